//! The benchmark's report: the markdown table of figures per library size and the targets they are held to.

use std::collections::BTreeSet;

use super::aws::AwsFigures;
use super::cpu::CpuFigure;
use super::function::FunctionFigures;
use super::*;

pub(super) struct SizeReport {
    pub skills: usize,
    pub cpu: CpuFigure,
    pub aws: Option<AwsFigures>,
    pub function: Option<FunctionFigures>,
}

pub(super) fn median(values: &[Duration]) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied()
}

/// The state-1 skill listing inside a system prompt: from its header to the end.
pub(super) fn listing_of(system: &str) -> &str {
    system.find("This account has").map_or("", |at| system[at..].trim_end())
}

/// Which tier of `agent_core::skills::listing` a rendered listing is, from its wording.
pub(super) fn listing_tier(listing: &str) -> &'static str {
    if listing.is_empty() {
        "none"
    } else if listing.contains("all shown below with their full description") {
        "full descriptions"
    } else if listing.contains("Skills by category, each written as its load_skill argument") {
        "names by category"
    } else if listing.contains("Skills by category (") {
        "categories with counts"
    } else if listing.contains("none is listed here") {
        "one-line summary"
    } else {
        "descriptions as the budget allows, names for the rest"
    }
}

pub(super) fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(3)
}

/// All the same, or `None` when there is nothing to compare.
pub(super) fn all_equal(values: &[Ops]) -> Option<bool> {
    let first = values.first()?;
    Some(values.iter().all(|ops| ops == first))
}

pub(super) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(reports: &[SizeReport]) -> Self {
        let mut header = vec!["figure".to_owned()];
        header.extend(reports.iter().map(|r| format!("{} skills", thousands(r.skills as u64))));
        Table { header, rows: Vec::new() }
    }

    fn row(&mut self, label: impl Into<String>, cells: Vec<String>) {
        let mut row = vec![label.into()];
        row.extend(cells);
        self.rows.push(row);
    }

    /// A total row, then one row per operation seen at any size.
    fn ops_rows(&mut self, label: &str, ops: &[Option<Ops>]) {
        let cell = |ops: &Option<Ops>, f: &dyn Fn(&Ops) -> String| ops.as_ref().map_or("n/a".to_owned(), f);
        self.row(
            format!("**{label}**"),
            ops.iter().map(|o| cell(o, &|ops| format!("**{}**", thousands(total(ops))))).collect(),
        );
        let names: BTreeSet<&String> = ops.iter().flatten().flat_map(|ops| ops.keys()).collect();
        for name in names {
            self.row(
                format!("  · {name}"),
                ops.iter().map(|o| cell(o, &|ops| thousands(ops.get(name).copied().unwrap_or(0)))).collect(),
            );
        }
    }

    fn print(&self) {
        let line = |cells: &[String]| println!("| {} |", cells.join(" | "));
        line(&self.header);
        let rule: Vec<String> =
            self.header.iter().enumerate().map(|(i, _)| if i == 0 { "---" } else { "---:" }.to_owned()).collect();
        line(&rule);
        for row in &self.rows {
            line(row);
        }
    }
}

pub(super) fn print_report(reports: &[SizeReport], listing_budget: usize) {
    let mut table = Table::new(reports);
    let each = |f: &dyn Fn(&SizeReport) -> Option<String>| -> Vec<String> {
        reports.iter().map(|r| f(r).unwrap_or_else(|| "n/a".to_owned())).collect()
    };

    table.row(
        "handler CPU per warm turn (embedded store)",
        each(&|r| Some(format!("{:.0} µs", r.cpu.per_turn.as_secs_f64() * 1e6))),
    );
    table.row("  warm turns measured", each(&|r| Some(r.cpu.turns.to_string())));
    table.row("  embedded-store calls per warm turn", each(&|r| Some(format!("{:.1}", r.cpu.calls_per_turn))));
    table.row(
        "cold catalog load CPU (decode the head, its listing, the loaded skill's part)",
        each(&|r| Some(format!("{:.1} ms", ms(r.cpu.catalog_load)))),
    );
    table.row("  warm-up turn (builds the index in memory)", each(&|r| Some(format!("{:.0} ms", ms(r.cpu.warmup)))));

    let aws = |f: &dyn Fn(&AwsFigures) -> Ops| -> Vec<Option<Ops>> {
        reports.iter().map(|r| r.aws.as_ref().map(f)).collect()
    };
    table.ops_rows("storage requests, cold turn (CallCounter, moto)", &aws(&|a| a.cold_ops.clone()));
    table.row(
        "  cold turn wall time (moto on loopback)",
        each(&|r| r.aws.as_ref().map(|a| format!("{:.0} ms", ms(a.cold_wall)))),
    );
    table.ops_rows("storage requests per warm turn (CallCounter, moto)", &aws(&|a| a.warm_ops[0].clone()));
    table.row(
        format!("  the {AWS_WARM_TURNS} warm turns counted alike"),
        each(&|r| {
            r.aws.as_ref().and_then(|a| all_equal(&a.warm_ops)).map(|same| if same { "yes" } else { "NO" }.into())
        }),
    );
    table.row(
        "  warm turn wall time (moto on loopback)",
        each(&|r| r.aws.as_ref().map(|a| format!("{:.0} ms", ms(a.warm_wall)))),
    );
    table.row(
        "  index revalidation kept the cached catalog (304)",
        each(&|r| r.aws.as_ref().map(|a| if a.catalog_reused { "yes" } else { "NO" }.into())),
    );

    let log = |f: &dyn Fn(&FunctionFigures) -> Option<Ops>| -> Vec<Option<Ops>> {
        reports.iter().map(|r| r.function.as_ref().and_then(f)).collect()
    };
    table.ops_rows("storage requests, cold turn (http-turn's own log)", &log(&|f| f.log_cold.first().cloned()));
    table.ops_rows("storage requests per warm turn (http-turn's own log)", &log(&|f| f.log_warm.first().cloned()));
    table.row(
        "  log agrees with CallCounter (cold ×3, warm ×20)",
        each(&|r| {
            let (aws, function) = (r.aws.as_ref()?, r.function.as_ref()?);
            let cold = function.log_cold.iter().all(|ops| *ops == aws.cold_ops);
            let warm = function.log_warm.iter().all(|ops| *ops == aws.warm_ops[0]);
            Some(if cold && warm { "yes".into() } else { format!("NO (cold {cold}, warm {warm})") })
        }),
    );

    table.ops_rows("index build: first turn of a tenant with no index", &aws(&|a| a.build_ops.clone()));
    table.row("  index build turn wall time", each(&|r| r.aws.as_ref().map(|a| format!("{:.0} ms", ms(a.build_wall)))));
    table.row(
        "  skills-index rebuild (fresh release process): requests, wall time",
        each(&|r| {
            r.aws.as_ref().map(|a| match &a.rebuild {
                Ok((ops, wall)) => format!("{} in {:.0} ms", thousands(total(ops)), ms(*wall)),
                Err(error) => error.clone(),
            })
        }),
    );
    table.row(
        "  index head size (parts: count, total size)",
        each(&|r| {
            r.aws.as_ref().map(|a| match a.parts {
                (0, _) => format!("{:.1} KB (no parts)", a.index_bytes as f64 / 1e3),
                (count, bytes) => {
                    format!("{:.1} KB ({count} parts, {:.1} KB)", a.index_bytes as f64 / 1e3, bytes as f64 / 1e3)
                }
            })
        }),
    );

    table.row(
        format!("cold start → first reply, http-turn (median of {COLD_STARTS})"),
        each(&|r| {
            let f = r.function.as_ref()?;
            let runs: Vec<String> = f.cold_starts.iter().map(|d| format!("{:.0}", ms(*d))).collect();
            Some(format!("**{:.0} ms** ({})", ms(median(&f.cold_starts)?), runs.join(", ")))
        }),
    );
    table.row(
        "  the same less its waits on moto (median)",
        each(&|r| {
            let f = r.function.as_ref()?;
            let runs: Vec<String> = f.cold_starts_less_storage.iter().map(|d| format!("{:.0}", ms(*d))).collect();
            Some(format!("**{:.0} ms** ({})", ms(median(&f.cold_starts_less_storage)?), runs.join(", ")))
        }),
    );
    table.row(
        "state-1 system prompt (first model call)",
        each(&|r| {
            let bytes = r.function.as_ref()?.system_prompt.len();
            Some(format!("{} B ≈ {} tokens", thousands(bytes as u64), thousands(tokens(bytes) as u64)))
        }),
    );
    table.row(
        format!("  skill listing in it (budget {} tokens)", thousands(listing_budget as u64)),
        each(&|r| {
            let bytes = listing_of(&r.function.as_ref()?.system_prompt).len();
            Some(format!("{} B ≈ {} tokens", thousands(bytes as u64), thousands(tokens(bytes) as u64)))
        }),
    );
    table.row(
        "  find_skills offered",
        each(&|r| {
            Some(if r.function.as_ref()?.tools.iter().any(|t| t == "find_skills") { "yes" } else { "no" }.into())
        }),
    );
    table.row(
        "  listing tier shown",
        each(&|r| Some(listing_tier(listing_of(&r.function.as_ref()?.system_prompt)).into())),
    );
    table.row(
        format!("peak RSS of http-turn after {RSS_TURNS} turns (VmHWM)"),
        each(&|r| r.function.as_ref()?.rss_kib.map(|kib| format!("{:.1} MiB", kib as f64 / 1024.0))),
    );
    table.print();
}

/// Which of a size's cold-start samples a target reads.
type ColdStarts = fn(&FunctionFigures) -> &[Duration];

/// The targets, each judged from the figures; a miss is printed as it is.
pub(super) fn print_targets(reports: &[SizeReport], listing_budget: usize) {
    println!("\n## Targets\n");
    let verdict = |met: bool| if met { "met" } else { "**MISSED**" };
    let aws: Vec<&AwsFigures> = reports.iter().filter_map(|r| r.aws.as_ref()).collect();
    let functions: Vec<&FunctionFigures> = reports.iter().filter_map(|r| r.function.as_ref()).collect();
    if aws.len() == reports.len() {
        let cold: Vec<Ops> = aws.iter().map(|a| a.cold_ops.clone()).collect();
        let warm: Vec<Ops> = aws.iter().map(|a| a.warm_ops[0].clone()).collect();
        let totals = |all: &[Ops]| all.iter().map(|ops| total(ops).to_string()).collect::<Vec<_>>().join(" / ");
        // A catalog held whole in its index's head (under 64 KB) needs no part; a larger one reads
        // the one part of the skill it loads, whatever its size.
        let larger = total(&cold[cold.len() - 1]);
        println!(
            "- storage requests of a cold turn do not grow with the library (at most one index part more \
             than a catalog held in its head): {} requests at {} skills — {}",
            totals(&cold),
            size_list(reports, " / "),
            verdict(cold.len() < 2 || (all_equal(&cold[1..]) == Some(true) && larger <= total(&cold[0]) + 1))
        );
        println!(
            "- storage requests of a warm turn do not grow with the library: {} requests at {} skills — {}",
            totals(&warm),
            size_list(reports, " / "),
            verdict(all_equal(&warm) == Some(true) && aws.iter().all(|a| all_equal(&a.warm_ops) == Some(true)))
        );
        println!("  - a warm turn is: {}", ops_text(&warm[0]));
    } else {
        println!("- storage request targets: not measured (no moto_server)");
    }
    if functions.len() == reports.len() {
        // moto's own latency grows with the objects in its bucket (S3's does not), so the function's
        // part is judged as well: the cold start less the turn's waits on storage.
        let samples: [(&str, ColdStarts); 2] = [
            ("cold start", |f| &f.cold_starts),
            ("cold start less its waits on moto", |f| &f.cold_starts_less_storage),
        ];
        for (what, runs) in samples {
            let first = median(runs(functions[0])).unwrap_or_default();
            let last = median(runs(functions[functions.len() - 1])).unwrap_or_default();
            println!(
                "- {what} at {} skills within 1.5× of the same at {}: {:.0} ms vs {:.0} ms = {:.2}× — {}",
                thousands(reports[reports.len() - 1].skills as u64),
                thousands(reports[0].skills as u64),
                ms(last),
                ms(first),
                last.as_secs_f64() / first.as_secs_f64(),
                verdict(last.as_secs_f64() <= first.as_secs_f64() * 1.5)
            );
        }
        let (small, large) = (functions[0].rss_kib, functions[functions.len() - 1].rss_kib);
        if let (Some(small), Some(large)) = (small, large) {
            println!(
                "- peak RSS at {} skills within 1.5× of peak RSS at {}: {:.1} MiB vs {:.1} MiB = {:.2}× — {}",
                thousands(reports[reports.len() - 1].skills as u64),
                thousands(reports[0].skills as u64),
                large as f64 / 1024.0,
                small as f64 / 1024.0,
                large as f64 / small as f64,
                verdict(large as f64 <= small as f64 * 1.5)
            );
        }
        let system = &functions[functions.len() - 1].system_prompt;
        let (listing, whole) = (tokens(listing_of(system).len()), tokens(system.len()));
        println!(
            "- system prompt at {} skills within the listing budget of {} tokens: listing ≈ {} tokens, whole \
             system prompt ≈ {} tokens — {}",
            thousands(reports[reports.len() - 1].skills as u64),
            thousands(listing_budget as u64),
            thousands(listing as u64),
            thousands(whole as u64),
            verdict(listing <= listing_budget && whole <= listing_budget)
        );
        if aws.len() == reports.len() {
            let agree = reports.iter().all(|r| match (&r.aws, &r.function) {
                (Some(a), Some(f)) => {
                    f.log_cold.iter().all(|ops| *ops == a.cold_ops)
                        && f.log_warm.iter().all(|ops| *ops == a.warm_ops[0])
                }
                _ => false,
            });
            println!("- the compiled function's own log agrees with the CallCounter figures — {}", verdict(agree));
        }
    } else {
        println!("- cold start and system prompt targets: not measured (no moto_server)");
    }
    let (first, last) = (&reports[0].cpu, &reports[reports.len() - 1].cpu);
    println!(
        "- (no target) warm-turn CPU at {} vs {} skills: {:.2}×",
        thousands(reports[reports.len() - 1].skills as u64),
        thousands(reports[0].skills as u64),
        last.per_turn.as_secs_f64() / first.per_turn.as_secs_f64()
    );
}
