//! The state-1 listing of the tenant's skills under its own token budget. It always fits,
//! degrading in tiers: full descriptions, shortened descriptions, names grouped by category,
//! categories with counts, and a one-line summary. Every tier says how many skills there are and
//! how many are shown in full; below the first, the model is pointed at `find_skills`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::frontmatter::SPEC_DESCRIPTION_MAX;
use super::index::SkillEntry;
use crate::budget::estimate_text;

/// Characters of a description kept in the shortened tier.
const SHORT_DESCRIPTION_CHARS: usize = 100;
/// The group of skills that have neither a category folder nor a `category` field.
const UNCATEGORISED: &str = "general";

/// A listing chosen for a budget, with the smaller tiers the context budget may fall back to.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The group a skill is listed under.
pub fn group_of(entry: &SkillEntry) -> &str {
    entry.path.category().or(entry.category.as_deref()).unwrap_or(UNCATEGORISED)
}

fn one_line(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", flat[..cut].trim_end()),
        None => flat,
    }
}

fn header(total: usize, shown_in_full: usize, search: bool) -> String {
    let mut out = if shown_in_full == total {
        format!("This account has {total} skills, all shown below with their full description. ")
    } else {
        format!(
            "This account has {total} skills; {shown_in_full} of them are shown with their full description \
             (the list is shortened to save space). "
        )
    };
    out.push_str(
        "Before working on a task a skill covers, load it with load_skill(skill_path=\"...\") using the exact \
         argument shown; its instructions then replace these.",
    );
    if search {
        out.push_str(
            " To find a skill that is not shown in full, call find_skills(query) with a few words about the task: \
             it searches every skill's name, description and category and returns the load_skill argument.",
        );
    }
    out.push('\n');
    out
}

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
    let mut groups: BTreeMap<&str, Vec<&SkillEntry>> = BTreeMap::new();
    for entry in entries {
        groups.entry(group_of(entry)).or_default().push(entry);
    }
    let fits = |text: &str| estimate_text(text) <= budget_tokens;

    // A description over the specification's limit is truncated, so that skill is not shown in full.
    let in_full = entries.iter().filter(|e| e.description.chars().count() <= SPEC_DESCRIPTION_MAX).count();
    let search = in_full < total;
    // Every line of a tier with descriptions holds at least the skill's path and its punctuation;
    // when that alone is over the budget, those tiers are not rendered at all (at 10,000 skills the
    // full tier would be megabytes, built only to be thrown away).
    let budget_bytes = budget_tokens.saturating_mul(3);
    let described_at_least: usize = entries.iter().map(|e| e.path.name().len() + 20).sum();
    let descriptions_may_fit = described_at_least <= budget_bytes;
    if descriptions_may_fit {
        let full = detailed(&groups, total, SPEC_DESCRIPTION_MAX, search);
        if fits(&full) {
            let fallbacks = smaller_tiers(&groups, total, search, budget_tokens, true);
            return Listing { text: full, fallbacks, total, shown_in_full: in_full, search };
        }
    }
    let tiers = smaller_tiers(&groups, total, true, budget_tokens, descriptions_may_fit);
    let chosen = tiers.iter().position(|tier| fits(tier)).unwrap_or(tiers.len() - 1);
    let shown_in_full = match chosen {
        0 if descriptions_may_fit => {
            entries.iter().filter(|e| e.description.chars().count() <= SHORT_DESCRIPTION_CHARS).count()
        }
        _ => 0,
    };
    let mut tiers = tiers.into_iter().skip(chosen);
    let text = tiers.next().unwrap_or_default();
    Listing { text, fallbacks: tiers.collect(), total, shown_in_full, search: true }
}

/// The tiers below the full one, largest first; the last always fits any sensible budget. The
/// shortened-descriptions tier is left out when `with_descriptions` is false.
fn smaller_tiers(
    groups: &BTreeMap<&str, Vec<&SkillEntry>>,
    total: usize,
    search: bool,
    budget_tokens: usize,
    with_descriptions: bool,
) -> Vec<String> {
    let mut tiers = Vec::with_capacity(4);
    if with_descriptions {
        tiers.push(detailed(groups, total, SHORT_DESCRIPTION_CHARS, search));
    }
    tiers.push(names(groups, total, search, budget_tokens));
    tiers.push(counts(groups, total, search, budget_tokens));
    tiers.push(summary(groups, total, search));
    tiers
}

fn detailed(groups: &BTreeMap<&str, Vec<&SkillEntry>>, total: usize, description_chars: usize, search: bool) -> String {
    let in_full = groups.values().flatten().filter(|e| e.description.chars().count() <= description_chars).count();
    let mut out = header(total, in_full, search);
    for (group, entries) in groups {
        let _ = write!(out, "\n### {group}\n");
        for entry in entries {
            let _ = writeln!(
                out,
                "- {} (load_skill(\"{}\")): {}",
                one_line(&entry.name, 128),
                entry.path,
                one_line(&entry.description, description_chars)
            );
        }
    }
    out
}

/// The load_skill arguments grouped by category, for as many categories as the budget holds; the
/// categories that do not fit are given with their counts.
fn names(groups: &BTreeMap<&str, Vec<&SkillEntry>>, total: usize, search: bool, budget_tokens: usize) -> String {
    const COUNT_LINE_BYTES: usize = 48;
    let budget_bytes = budget_tokens.saturating_mul(3);
    let mut out = header(total, 0, search);
    out.push_str("Skills by category, each written as its load_skill argument:\n");
    for (shown, (group, entries)) in groups.iter().enumerate() {
        let paths: Vec<String> = entries.iter().map(|e| e.path.to_string()).collect();
        let line = format!("\n### {group} ({})\n{}\n", entries.len(), paths.join(", "));
        // Keep room for a count line for each category still to come.
        let rest = (groups.len() - shown - 1) * COUNT_LINE_BYTES;
        if out.len() + line.len() + rest <= budget_bytes {
            out.push_str(&line);
        } else {
            let _ = write!(out, "\n### {group} ({} skills, not listed here)\n", entries.len());
        }
    }
    out
}

fn counts(groups: &BTreeMap<&str, Vec<&SkillEntry>>, total: usize, search: bool, budget_tokens: usize) -> String {
    let mut out = header(total, 0, search);
    let _ = writeln!(out, "Skills by category ({} categories):", groups.len());
    let budget_bytes = budget_tokens.saturating_mul(3);
    for (shown, (group, entries)) in groups.iter().enumerate() {
        let line = format!("- {group}: {} skills\n", entries.len());
        // Keep room for the closing line that says how many categories were left out.
        if out.len() + line.len() + 80 > budget_bytes {
            let _ = writeln!(out, "- … and {} more categories", groups.len() - shown);
            break;
        }
        out.push_str(&line);
    }
    out
}

fn summary(groups: &BTreeMap<&str, Vec<&SkillEntry>>, total: usize, search: bool) -> String {
    let mut out = header(total, 0, search);
    let _ = writeln!(out, "They are in {} categories; none is listed here to save space.", groups.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SkillPath;

    fn entry(path: &str, description: &str) -> SkillEntry {
        let path = SkillPath::parse(path).unwrap();
        SkillEntry {
            name: path.name().to_owned(),
            path,
            etag: "e".into(),
            size: 1,
            description: description.to_owned(),
            category: None,
            tools: None,
            declared_tools: None,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn a_small_library_is_listed_in_full_by_category() {
        let entries = [
            entry("escrituras/compraventa", "Compraventas"),
            entry("contratos/arrendamiento", "Alquileres"),
            entry("pdf", "PDF files"),
        ];
        let refs: Vec<&SkillEntry> = entries.iter().collect();
        let listing = render(&refs, 4000);
        assert!(!listing.search);
        assert_eq!((listing.total, listing.shown_in_full), (3, 3));
        let text = &listing.text;
        assert!(text.starts_with("This account has 3 skills, all shown"), "{text}");
        assert!(text.find("### contratos").unwrap() < text.find("### escrituras").unwrap());
        assert!(text.contains("- compraventa (load_skill(\"escrituras/compraventa\")): Compraventas"));
        assert!(text.contains("### general\n- pdf (load_skill(\"pdf\")): PDF files"), "{text}");
        assert!(!text.contains("find_skills"));
    }

    #[test]
    fn a_large_library_degrades_by_tier_and_always_fits() {
        let entries: Vec<SkillEntry> = (0..10_000)
            .map(|i| entry(&format!("cat{}/skill-{i:05}", i % 40), &"A description of ordinary length. ".repeat(3)))
            .collect();
        let refs: Vec<&SkillEntry> = entries.iter().collect();
        for budget in [200, 1000, 4000, 40_000, 200_000] {
            let listing = render(&refs, budget);
            assert!(
                estimate_text(&listing.text) <= budget.max(200),
                "budget {budget}: {}",
                estimate_text(&listing.text)
            );
            assert!(listing.text.starts_with("This account has 10000 skills; "), "{budget}");
            assert!(listing.shown_in_full < listing.total);
            assert!(listing.search && listing.text.contains("find_skills(query)"));
            for smaller in &listing.fallbacks {
                assert!(smaller.len() < listing.text.len());
                assert!(smaller.contains("10000 skills"));
            }
        }
        // At 4,000 tokens the names of some categories fit, the others are counted.
        let listing = render(&refs, 4000);
        assert!(listing.text.contains("cat0/skill-00000, cat0/skill-00040"), "{}", listing.text);
        assert!(listing.text.contains("(250 skills, not listed here)"), "{}", listing.text);
        assert!(
            render(&refs, 200).text.contains("more categories") || render(&refs, 200).text.contains("none is listed")
        );
    }

    #[test]
    fn long_descriptions_are_truncated_and_not_counted_as_full() {
        let entries = [entry("a", &"d".repeat(1068)), entry("b", "short")];
        let refs: Vec<&SkillEntry> = entries.iter().collect();
        let listing = render(&refs, 100_000);
        assert!(listing.text.contains("1 of them are shown with their full description"), "{}", listing.text);
        assert!(listing.text.contains(&format!("{}…", "d".repeat(1024))));
        assert!(!listing.text.contains(&"d".repeat(1025)));
    }
}
