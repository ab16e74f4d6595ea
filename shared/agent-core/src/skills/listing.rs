//! The state-1 listing of the tenant's skills under its own token budget, which it uses and never
//! passes. Every skill's `load_skill` argument is listed, grouped by category; the budget left
//! then buys descriptions, skill by skill: whole ones for as many skills as fit, shortened ones for
//! more, the rest by name only. Only when the names alone do not fit are whole categories given as
//! counts. The opening line says how many skills there are and what was cut for each; whenever not
//! every skill is shown in full, the model is pointed at `find_skills`.
//!
//! Who keeps a description: the skills with the shortest descriptions first (ties in path order).
//! No usage counts are kept, so nothing says which skills matter most; shortest-first shows the
//! most descriptions whole, a long description is the one that loses its tail, and the choice does
//! not depend on where a skill's name falls in the alphabet.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::frontmatter::SPEC_DESCRIPTION_MAX;
use super::index::SkillEntry;
use crate::budget::estimate::{estimate_text, BYTES_PER_TOKEN};

/// Characters of a description kept when it is shortened to save space.
const SHORT_DESCRIPTION_CHARS: usize = 100;
/// Characters of a skill's name shown.
const NAME_CHARS: usize = 128;
/// The group of skills that have neither a category folder nor a `category` field.
const UNCATEGORISED: &str = "general";
/// Opens a group's line of the skills listed by name only.
const NAMES_PREFIX: &str = "- by name only: ";
/// Bytes of a described line besides the name, the path and the description:
/// `- {name} (load_skill("{path}")): {description}\n`.
const LINE_BYTES: usize = 22;

/// A listing chosen for a budget, with the smaller renderings the context budget may fall back to.
/// The catalog index's head keeps it as rendered ([`super::index::stored::StoredListing`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub text: String,
    /// Smaller renderings, largest first; the context budget shrinks to them instead of dropping
    /// the listing.
    pub fallbacks: Vec<String>,
    pub total: usize,
    /// Skills shown with their whole description.
    pub shown_in_full: usize,
    /// Whether the model needs `find_skills`: true whenever not every skill is shown in full.
    pub search: bool,
}

impl Listing {
    /// This listing with `entry` (a pinned version) shown as it describes itself: its line
    /// rewritten in place (a shortened description stays as short), or added at the end when the
    /// listing does not name it at all. A skill listed by name only stays so.
    pub fn with_entry(&self, entry: &SkillEntry) -> Listing {
        let rewrite = |text: &str| -> String {
            let marker = format!("(load_skill(\"{}\")): ", entry.path);
            let name = one_line(&entry.name, NAME_CHARS);
            let mut out = String::with_capacity(text.len() + 128);
            let mut found = false;
            for line in text.split_inclusive('\n') {
                match line.split_once(&marker) {
                    Some((_, old)) if line.starts_with("- ") => {
                        found = true;
                        let limit = if old.trim_end().ends_with('…') {
                            SHORT_DESCRIPTION_CHARS
                        } else {
                            SPEC_DESCRIPTION_MAX
                        };
                        let _ = writeln!(out, "- {name} {marker}{}", one_line(&entry.description, limit));
                    }
                    _ => out.push_str(line),
                }
            }
            if !found && !text.contains(&entry.path.to_string()) {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                let _ = writeln!(out, "- {name} {marker}{}", one_line(&entry.description, SPEC_DESCRIPTION_MAX));
            }
            out
        };
        Listing {
            text: rewrite(&self.text),
            fallbacks: self.fallbacks.iter().map(|text| rewrite(text)).collect(),
            ..self.clone()
        }
    }
}

/// The group a skill is listed under.
pub fn group_of(entry: &SkillEntry) -> &str {
    entry.path.category().or(entry.category.as_deref()).unwrap_or(UNCATEGORISED)
}

/// `text` on one line (each run of whitespace one space), cut to `max_chars` with "…". It reads
/// no further than the cut, so a long text costs no more than a short one.
fn one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        let separator = usize::from(chars > 0);
        let word_chars = word.chars().take(max_chars + 1).count();
        if chars + separator + word_chars > max_chars {
            if separator == 1 && chars < max_chars {
                out.push(' ');
                chars += 1;
            }
            out.extend(word.chars().take(max_chars - chars));
            let kept = out.trim_end().len();
            out.truncate(kept);
            out.push('…');
            return out;
        }
        if separator == 1 {
            out.push(' ');
        }
        out.push_str(word);
        chars += separator + word_chars;
    }
    out
}

/// How many skills are shown how; the opening line says each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Shown {
    total: usize,
    /// With the whole description.
    full: usize,
    /// With the first [`SPEC_DESCRIPTION_MAX`] characters of a longer description.
    over_limit: usize,
    /// With the first [`SHORT_DESCRIPTION_CHARS`] characters, to save space.
    short: usize,
    /// By their `load_skill` argument only, to save space.
    named: usize,
    /// Only counted with their category, or not at all, to save space.
    counted: usize,
}

impl Shown {
    fn cut(&self) -> usize {
        self.over_limit + self.short + self.named + self.counted
    }

    fn search(&self) -> bool {
        self.full < self.total || self.cut() > 0
    }

    /// The largest opening line any listing of `total` skills can have.
    fn widest(total: usize) -> Self {
        Self { total, full: total, over_limit: total, short: total, named: total, counted: total }
    }
}

fn header(shown: &Shown) -> String {
    let total = shown.total;
    let mut out = if !shown.search() {
        format!("This account has {total} skills, all shown below with their full description. ")
    } else {
        let mut parts = Vec::with_capacity(5);
        if shown.full > 0 {
            parts.push(format!("{} with the full description", shown.full));
        }
        if shown.over_limit > 0 {
            parts.push(format!(
                "{} with the first {SPEC_DESCRIPTION_MAX} characters of a description longer than the Agent Skills \
                 specification allows",
                shown.over_limit
            ));
        }
        if shown.short > 0 {
            parts.push(format!(
                "{} with the first {SHORT_DESCRIPTION_CHARS} characters of the description",
                shown.short
            ));
        }
        if shown.named > 0 {
            parts.push(format!("{} by name only", shown.named));
        }
        if shown.counted > 0 {
            parts.push(format!("{} not named, only counted", shown.counted));
        }
        let opening = if shown.short + shown.named + shown.counted == 0 {
            format!("This account has {total} skills, all shown below: ")
        } else {
            format!("This account has {total} skills; to save space, not all are shown in full: ")
        };
        let last = parts.pop().unwrap_or_default();
        match parts.is_empty() {
            true => format!("{opening}{last}. "),
            false => format!("{opening}{} and {last}. ", parts.join(", ")),
        }
    };
    out.push_str(
        "Before working on a task a skill covers, load it with load_skill(skill_path=\"...\") using the exact \
         argument shown; its instructions then replace these.",
    );
    if shown.search() {
        out.push_str(
            " To find a skill that is not shown in full, call find_skills(query) with a few words about the task: \
             it searches every skill's name, description and category and returns the load_skill argument.",
        );
    }
    out.push('\n');
    out
}

type Groups<'e> = BTreeMap<&'e str, Vec<&'e SkillEntry>>;

/// Renders the listing of `entries` (in path order) to fit `budget_tokens`.
pub fn render(entries: &[&SkillEntry], budget_tokens: usize) -> Listing {
    let total = entries.len();
    if total == 0 {
        return Listing {
            text: "No skills are available for this account.".to_owned(),
            fallbacks: Vec::new(),
            total,
            shown_in_full: 0,
            search: false,
        };
    }
    let mut groups: Groups<'_> = BTreeMap::new();
    for entry in entries {
        groups.entry(group_of(entry)).or_default().push(entry);
    }
    let budget_bytes = budget_tokens.saturating_mul(BYTES_PER_TOKEN);
    let fits = |text: &str| estimate_text(text) <= budget_tokens;

    // Largest first: descriptions as the budget allows (when every name fits), then as half of it
    // allows, then names by category, categories with counts, and one line.
    let mut tiers: Vec<(String, Shown)> = Vec::with_capacity(5);
    if let Some(whole) = described(&groups, total, budget_bytes) {
        let half = (whole.1.full + whole.1.over_limit + whole.1.short > 0)
            .then(|| described(&groups, total, budget_bytes / 2))
            .flatten();
        tiers.push(whole);
        tiers.extend(half);
    }
    tiers.push(names(&groups, total, budget_bytes));
    tiers.push(counts(&groups, total, budget_bytes));
    tiers.push(summary(&groups, total));
    // Each fallback is smaller than the rendering before it.
    tiers.dedup_by(|smaller, larger| smaller.0.len() >= larger.0.len());

    let chosen = tiers.iter().position(|(text, _)| fits(text)).unwrap_or(tiers.len() - 1);
    let mut tiers = tiers.into_iter().skip(chosen);
    let (text, shown) = tiers.next().unwrap_or_default();
    Listing {
        text,
        fallbacks: tiers.map(|(text, _)| text).collect(),
        total,
        shown_in_full: shown.full,
        search: shown.search(),
    }
}

/// Every skill's `load_skill` argument with descriptions bought by what `budget_bytes` leaves, or
/// `None` when the names alone do not fit. The work is linear in the skills and bounded by the
/// budget: a description is only looked at while some budget is left.
fn described(groups: &Groups<'_>, total: usize, budget_bytes: usize) -> Option<(String, Shown)> {
    let reserve = header(&Shown::widest(total)).len();
    // Every group's heading and line of names, and every name in it.
    let names_bytes: usize = groups
        .iter()
        .map(|(group, entries)| {
            heading(group).len()
                + NAMES_PREFIX.len()
                + 1
                + entries.iter().map(|e| e.path.to_string().len() + 2).sum::<usize>()
        })
        .sum();
    let mut left = budget_bytes.checked_sub(reserve + names_bytes)?;

    // Shortest description first; the sort is stable, so ties keep path order.
    let mut order: Vec<(&str, usize)> =
        groups.iter().flat_map(|(group, entries)| (0..entries.len()).map(move |i| (*group, i))).collect();
    order.sort_by_key(|(group, i)| groups[group][*i].description.len());
    let mut chosen: BTreeMap<(&str, usize), String> = BTreeMap::new();
    let mut named_left: BTreeMap<&str, usize> = groups.iter().map(|(group, entries)| (*group, entries.len())).collect();
    let mut shown = Shown { total, named: total, ..Shown::default() };
    for (group, i) in order {
        let entry = groups[group][i];
        let path_len = entry.path.to_string().len();
        let line = LINE_BYTES + one_line(&entry.name, NAME_CHARS).len() + path_len;
        // Moving a skill out of its group's names line gives back its name there, and the line
        // itself with the group's last name.
        let mut freed = path_len + 2;
        if named_left[group] == 1 {
            freed += NAMES_PREFIX.len() + 1;
        }
        if line >= left + freed {
            if left < LINE_BYTES {
                break;
            }
            continue;
        }
        let whole = one_line(&entry.description, SPEC_DESCRIPTION_MAX);
        let description = if line + whole.len() <= left + freed {
            if entry.description.chars().count() > SPEC_DESCRIPTION_MAX {
                shown.over_limit += 1;
            } else {
                shown.full += 1;
            }
            whole
        } else {
            let short = one_line(&entry.description, SHORT_DESCRIPTION_CHARS);
            if short.len() >= whole.len() || line + short.len() > left + freed {
                continue;
            }
            shown.short += 1;
            short
        };
        left = left + freed - line - description.len();
        shown.named -= 1;
        *named_left.get_mut(group).expect("every group is counted") -= 1;
        chosen.insert((group, i), description);
    }

    let mut out = header(&shown);
    for (group, entries) in groups {
        out.push_str(&heading(group));
        let mut by_name = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            match chosen.get(&(*group, i)) {
                Some(description) => {
                    let _ = writeln!(
                        out,
                        "- {} (load_skill(\"{}\")): {description}",
                        one_line(&entry.name, NAME_CHARS),
                        entry.path
                    );
                }
                None => by_name.push(entry.path.to_string()),
            }
        }
        if !by_name.is_empty() {
            let _ = writeln!(out, "{NAMES_PREFIX}{}", by_name.join(", "));
        }
    }
    Some((out, shown))
}

fn heading(group: &str) -> String {
    format!("\n### {group}\n")
}

/// The load_skill arguments grouped by category, for as many categories as the budget holds; the
/// categories that do not fit are given with their counts.
fn names(groups: &Groups<'_>, total: usize, budget_bytes: usize) -> (String, Shown) {
    const INTRO: &str = "Skills by category, each written as its load_skill argument:\n";
    const COUNT_LINE_BYTES: usize = 48;
    let mut used = header(&Shown::widest(total)).len() + INTRO.len();
    let mut lines = Vec::with_capacity(groups.len());
    let mut shown = Shown { total, ..Shown::default() };
    for (index, (group, entries)) in groups.iter().enumerate() {
        let paths: Vec<String> = entries.iter().map(|e| e.path.to_string()).collect();
        let line = format!("\n### {group} ({})\n{}\n", entries.len(), paths.join(", "));
        // Keep room for a count line for each category still to come.
        let rest = (groups.len() - index - 1) * COUNT_LINE_BYTES;
        if used + line.len() + rest <= budget_bytes {
            shown.named += entries.len();
            used += line.len();
            lines.push(line);
        } else {
            shown.counted += entries.len();
            let line = format!("\n### {group} ({} skills, not listed here)\n", entries.len());
            used += line.len();
            lines.push(line);
        }
    }
    let mut out = header(&shown);
    out.push_str(INTRO);
    out.extend(lines);
    (out, shown)
}

fn counts(groups: &Groups<'_>, total: usize, budget_bytes: usize) -> (String, Shown) {
    let shown = Shown { total, counted: total, ..Shown::default() };
    let mut out = header(&shown);
    let _ = writeln!(out, "Skills by category ({} categories):", groups.len());
    for (index, (group, entries)) in groups.iter().enumerate() {
        let line = format!("- {group}: {} skills\n", entries.len());
        // Keep room for the closing line that says how many categories were left out.
        if out.len() + line.len() + 80 > budget_bytes {
            let _ = writeln!(out, "- … and {} more categories", groups.len() - index);
            break;
        }
        out.push_str(&line);
    }
    (out, shown)
}

fn summary(groups: &Groups<'_>, total: usize) -> (String, Shown) {
    let shown = Shown { total, counted: total, ..Shown::default() };
    let mut out = header(&shown);
    let _ = writeln!(out, "They are in {} categories; none is listed here to save space.", groups.len());
    (out, shown)
}

#[cfg(test)]
mod tests;
