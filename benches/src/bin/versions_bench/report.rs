//! The tables `versions-bench` prints.

use std::time::Duration;

pub(crate) use benches::thousands;

use crate::library::Built;
use crate::promote::PromoteFigures;
use crate::turns::TurnFigures;
use crate::upload::UploadFigure;
use crate::{median, COLD_STARTS, DEFAULT_VERSION, SKILL, SKILL_FILE, VERSIONS};

/// One library measured: its size, how it was stored, and what its turns cost.
pub(crate) struct Variant {
    pub(crate) skills: usize,
    pub(crate) published: bool,
    pub(crate) built: Built,
    pub(crate) turns: TurnFigures,
}

/// `1.23 ms`, `123 µs`, `1.2 s`.
pub(crate) fn time(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    match micros {
        m if m < 1_000.0 => format!("{m:.0} µs"),
        m if m < 10_000.0 => format!("{:.2} ms", m / 1e3),
        m if m < 1_000_000.0 => format!("{:.1} ms", m / 1e3),
        m => format!("{:.2} s", m / 1e6),
    }
}

fn kb(bytes: u64) -> String {
    format!("{:.1} KB", bytes as f64 / 1e3)
}

fn spread(values: &[Duration]) -> String {
    let (min, max) =
        (values.iter().min().copied().unwrap_or_default(), values.iter().max().copied().unwrap_or_default());
    format!("{} ({}–{}, {} runs)", time(median(values)), time(min), time(max), values.len())
}

fn row(label: &str, variants: &[Variant], cell: impl Fn(&Variant) -> String) {
    let cells: Vec<String> = variants.iter().map(cell).collect();
    println!("| {label} | {} |", cells.join(" | "));
}

pub(crate) fn print_turns(variants: &[Variant]) {
    println!(
        "## 1. A turn over folders and over published versions\n\nEach turn: load_skill(\"{SKILL}\"), \
         read_file(\"{SKILL_FILE}\"), answer; zero-latency model. Published: {VERSIONS} versions a skill through \
         `versions::publish`, version {DEFAULT_VERSION} the default. Calls counted by the recording in-memory store.\n"
    );
    let headers: Vec<String> = variants
        .iter()
        .map(|v| format!("{}, {}", thousands(v.skills as u64), if v.published { "published" } else { "folders" }))
        .collect();
    println!("| figure | {} |", headers.join(" | "));
    println!("| --- |{}", " ---: |".repeat(variants.len()));
    row("library written", variants, |v| match v.built.publishes {
        0 => format!("{} (objects inserted)", time(v.built.write)),
        n => format!("{} ({} publishes)", time(v.built.write), thousands(n as u64)),
    });
    row("one-time index build", variants, |v| time(v.built.index_build));
    row("index head; parts", variants, |v| match v.built.parts {
        0 => format!("{} (held whole)", kb(v.built.head_bytes as u64)),
        n => format!("{}; {n} parts, {}", kb(v.built.head_bytes as u64), kb(v.built.parts_bytes)),
    });
    row("storage calls, cold turn", variants, |v| v.turns.cold.text());
    row("storage calls, warm turn (same session)", variants, |v| v.turns.warm.text());
    row(&format!("cold turn wall time, median of {COLD_STARTS}"), variants, |v| {
        let each: Vec<String> = v.turns.cold_wall.iter().map(|d| time(*d)).collect();
        format!("{} ({})", time(median(&v.turns.cold_wall)), each.join(", "))
    });
    row("cold turn CPU, median", variants, |v| time(v.turns.cold_cpu));
    row("handler CPU per warm turn", variants, |v| {
        format!("{} ({} turns)", time(v.turns.warm_cpu), v.turns.warm_turns)
    });
    row("version the turn loaded", variants, |v| match v.turns.versions.get(SKILL) {
        Some(version) => format!("{version}"),
        None => "– (folder)".to_owned(),
    });
    for variant in variants.iter().filter(|v| v.skills == variants.iter().map(|v| v.skills).max().unwrap_or(0)) {
        let kind = if variant.published { "published" } else { "folders" };
        println!("\nCold turn's object calls, {} skills as {kind}:", thousands(variant.skills as u64));
        for call in &variant.turns.cold.log {
            println!("    {call}");
        }
    }
}

pub(crate) fn print_promotes(promotes: &[(usize, PromoteFigures)]) {
    println!(
        "\n## 2. From a promote to the first turn that sees it\n\n`set_default` of {SKILL} (to version {VERSIONS}, \
         then back to {DEFAULT_VERSION}, alternately), then at once a turn of a warm process, which must load the \
         new default's SKILL.md.\n"
    );
    println!("| skills | set_default (median, range) | its storage calls | the turn right after | its storage calls | turns that saw the new default | publish with promote=true | its storage calls |");
    println!("| ---: | ---: | --- | ---: | --- | ---: | ---: | --- |");
    for (skills, figures) in promotes {
        println!(
            "| {} | {} | {} | {} | {} | {}/{} | {} | {} |",
            thousands(*skills as u64),
            spread(&figures.set_default),
            figures.set_default_calls.text(),
            spread(&figures.next_turn),
            figures.next_turn_calls.text(),
            figures.saw_it,
            figures.set_default.len(),
            spread(&figures.publish_promote),
            figures.publish_promote_calls.text(),
        );
    }
}

pub(crate) fn print_uploads(uploads: &[UploadFigure]) {
    println!(
        "\n## 3. An upload against its size\n\nA zip of SKILL.md and files of at most 1 MB, half text, half random \
         bytes; `read_zip`, then `publish` (the skill's first version: it becomes the default and the index is \
         written), each run in a new tenant. Medians.\n"
    );
    println!("| inflated | zip | files | read_zip | publish | in all | MB/s (inflated) | one SHA-256 pass | runs |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for upload in uploads {
        println!(
            "| {} B | {} B | {} | {} | {} | {} | {:.0} | {} | {} |",
            thousands(upload.size as u64),
            thousands(upload.zip_bytes as u64),
            upload.files,
            time(upload.read_zip),
            time(upload.publish),
            time(upload.total),
            upload.size as f64 / 1e6 / upload.total.as_secs_f64().max(1e-9),
            time(upload.one_hash),
            upload.runs
        );
    }
}
