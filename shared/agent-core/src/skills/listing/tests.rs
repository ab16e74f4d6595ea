//! Unit tests of the listing: tiers, the budget it uses and keeps to, and what its opening line says.

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
        unmet_needs: Vec::new(),
        version: None,
    }
}

/// A description of `chars` characters (±1) of ordinary words, different for each `seed`.
fn description(seed: usize, chars: usize) -> String {
    const WORDS: [&str; 12] = [
        "analyse",
        "sequencing",
        "data",
        "with",
        "protein",
        "structures",
        "and",
        "plots",
        "for",
        "cells",
        "flows",
        "using",
    ];
    let mut out = format!("Skill {seed}:");
    let mut i = seed;
    while out.len() < chars {
        out.push(' ');
        out.push_str(WORDS[i % WORDS.len()]);
        i = (i * 7 + 3) % 1009;
    }
    out.truncate(chars);
    out.trim_end().to_owned()
}

/// The skills of a listing's described tier: (described lines, names given by name only).
fn lines_of(text: &str) -> (Vec<&str>, Vec<&str>) {
    let described = text.lines().filter(|line| line.starts_with("- ") && line.contains("(load_skill(\"")).collect();
    let named =
        text.lines().filter_map(|line| line.strip_prefix(NAMES_PREFIX)).flat_map(|names| names.split(", ")).collect();
    (described, named)
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
    assert!(text.starts_with("This account has 3 skills, all shown below with their full description."), "{text}");
    assert!(text.find("### contratos").unwrap() < text.find("### escrituras").unwrap());
    assert!(text.contains("- compraventa (load_skill(\"escrituras/compraventa\")): Compraventas"));
    assert!(text.contains("### general\n- pdf (load_skill(\"pdf\")): PDF files"), "{text}");
    assert!(!text.contains("find_skills") && !text.contains(NAMES_PREFIX));
}

/// A collection the size of claude-scientific-skills (134 skills, descriptions of 150 to 400
/// characters) under the default budget of a 32k-token model.
#[test]
fn a_mid_sized_library_fills_its_budget_with_whole_descriptions_first_and_names_the_rest() {
    const BUDGET: usize = 3584;
    let entries: Vec<SkillEntry> =
        (0..134).map(|i| entry(&format!("tool-{i:03}"), &description(i, 150 + (i * 37) % 251))).collect();
    let refs: Vec<&SkillEntry> = entries.iter().collect();
    let listing = render(&refs, BUDGET);
    let text = &listing.text;
    let used = estimate_text(text);
    assert!(used <= BUDGET, "{used} tokens");
    assert!(used * 100 >= BUDGET * 90, "uses most of its budget: {used} of {BUDGET} tokens\n{text}");

    let (described, named) = lines_of(text);
    assert_eq!(described.len() + named.len(), 134, "every skill is there, by name at least");
    assert!(described.len() >= 20, "{} described", described.len());
    assert_eq!(listing.shown_in_full, described.iter().filter(|line| !line.ends_with('…')).count());
    let shortened = described.len() - listing.shown_in_full;
    assert!(listing.search && text.contains("find_skills(query)"));
    let expected = match shortened {
        0 => format!("{} with the full description and {} by name only.", listing.shown_in_full, named.len()),
        n => format!(
            "{} with the full description, {n} with the first 100 characters of the description and {} by name only.",
            listing.shown_in_full,
            named.len()
        ),
    };
    assert!(
        text.starts_with(&format!("This account has 134 skills; to save space, not all are shown in full: {expected}")),
        "{text}"
    );
    // The shortest descriptions are the ones kept whole.
    let longest_whole = entries
        .iter()
        .filter(|e| described.iter().any(|line| line.ends_with(&e.description)))
        .map(|e| e.description.len())
        .max()
        .unwrap();
    let shortest_named =
        entries.iter().filter(|e| named.contains(&e.path.name())).map(|e| e.description.len()).min().unwrap();
    assert!(longest_whole <= shortest_named, "{longest_whole} > {shortest_named}");
    // Names keep path order inside their group.
    let mut sorted = named.clone();
    sorted.sort();
    assert_eq!(named, sorted);
    // The fallbacks are smaller and each still names the total.
    for smaller in &listing.fallbacks {
        assert!(smaller.len() < text.len() && smaller.starts_with("This account has 134 skills"));
    }
}

#[test]
fn a_large_library_degrades_by_tier_and_always_fits() {
    let entries: Vec<SkillEntry> = (0..10_000)
        .map(|i| entry(&format!("cat{}/skill-{i:05}", i % 40), &"A description of ordinary length. ".repeat(3)))
        .collect();
    let refs: Vec<&SkillEntry> = entries.iter().collect();
    for budget in [200, 1000, 4000, 40_000, 200_000] {
        let listing = render(&refs, budget);
        assert!(estimate_text(&listing.text) <= budget.max(200), "budget {budget}: {}", estimate_text(&listing.text));
        assert!(listing.text.starts_with("This account has 10000 skills; to save space"), "{budget}");
        assert!(listing.shown_in_full < listing.total);
        assert!(listing.search && listing.text.contains("find_skills(query)"));
        for smaller in &listing.fallbacks {
            assert!(smaller.len() < listing.text.len());
            assert!(smaller.contains("10000 skills"));
        }
    }
    // At 4,000 tokens the names of some categories fit, the others are counted, and the opening
    // line says how many of each.
    let listing = render(&refs, 4000);
    assert!(listing.text.contains("cat0/skill-00000, cat0/skill-00040"), "{}", listing.text);
    assert!(listing.text.contains("(250 skills, not listed here)"), "{}", listing.text);
    let listed = listing.text.matches("skill-").count();
    assert!(
        listing.text.contains(&format!("{listed} by name only and {} not named, only counted.", 10_000 - listed)),
        "{}",
        listing.text
    );
    // At 200,000 tokens every name fits and the budget left buys descriptions.
    let listing = render(&refs, 200_000);
    let (described, named) = lines_of(&listing.text);
    assert_eq!(described.len() + named.len(), 10_000);
    assert!(!described.is_empty() && !named.is_empty());
    assert!(render(&refs, 200).text.contains("more categories") || render(&refs, 200).text.contains("none is listed"));
}

#[test]
fn a_description_cut_only_at_the_specification_limit_is_said_to_be_so() {
    let entries = [entry("a", &"d".repeat(1068)), entry("b", "short")];
    let refs: Vec<&SkillEntry> = entries.iter().collect();
    let listing = render(&refs, 100_000);
    let text = &listing.text;
    assert!(
        text.starts_with(
            "This account has 2 skills, all shown below: 1 with the full description and 1 with the first 1024 \
             characters of a description longer than the Agent Skills specification allows."
        ),
        "{text}"
    );
    assert!(!text.contains("save space"), "{text}");
    assert!(text.contains(&format!("{}…", "d".repeat(1024))));
    assert!(!text.contains(&"d".repeat(1025)));
    assert_eq!(listing.shown_in_full, 1);
    assert!(listing.search, "the whole description is only found by find_skills");
}

#[test]
fn one_line_collapses_whitespace_and_cuts_at_a_character_count() {
    assert_eq!(one_line("  a\n b\t\tc ", 10), "a b c");
    assert_eq!(one_line("abcde fghij", 11), "abcde fghij");
    assert_eq!(one_line("abcde fghij", 6), "abcde…");
    assert_eq!(one_line("abcde fghij", 8), "abcde fg…");
    assert_eq!(one_line("ñandú ñandú", 7), "ñandú ñ…");
    assert_eq!(one_line(&"x".repeat(10_000), 3), "xxx…");
}
