//! The figures the tables show: statistics of a series, durations in milliseconds, rows.

use std::time::Duration;

pub(crate) use benches::thousands;

#[derive(Clone, Copy)]
pub(crate) struct Stats {
    pub(crate) median: Duration,
    pub(crate) p95: Duration,
    pub(crate) min: Duration,
}

pub(crate) fn stats(values: &[Duration]) -> Stats {
    let mut sorted = values.to_vec();
    sorted.sort();
    let at = |fraction: f64| sorted[((sorted.len() - 1) as f64 * fraction).round() as usize];
    Stats { median: at(0.5), p95: at(0.95), min: sorted[0] }
}

pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

/// A signed difference of two durations, in milliseconds.
pub(crate) fn ms_diff(a: Duration, b: Duration) -> String {
    format!("{:.2} ms", (a.as_secs_f64() - b.as_secs_f64()) * 1e3)
}

pub(crate) fn row(cells: &[String]) {
    println!("| {} |", cells.join(" | "));
}

pub(crate) fn header(cells: &[&str]) {
    row(&cells.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>());
    row(&cells.iter().enumerate().map(|(i, _)| if i == 0 { "---" } else { "---:" }.to_owned()).collect::<Vec<_>>());
}
