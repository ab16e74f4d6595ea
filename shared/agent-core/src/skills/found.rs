//! The text of a `find_skills` result, and how the context budget shrinks it: descriptions go
//! first, and the top matches' `load_skill` arguments, which the model asked the search for, stay.

use super::index::SkillEntry;

/// Characters of a description shown in a `find_skills` result.
const DESCRIPTION_CHARS: usize = 300;
/// Matches whose `load_skill` argument a result keeps however much it is shrunk.
const KEPT_MATCHES: usize = 5;
/// Description lengths tried, longest first, before descriptions are dropped.
const SHORTER_DESCRIPTIONS: [usize; 3] = [150, 80, 40];
/// Separates a match's `load_skill` argument and name from its description.
const DESCRIPTION_SEPARATOR: &str = " — ";
/// Ends the line that counts the matches a shrunk result left out.
const LEFT_OUT: &str = " lower matches left out)";
/// The last line of a shrunk result.
const SHRUNK_NOTE: &str = "[shortened to fit the model's context]";

/// The result for `query`: a header, then a line per match, best first, each starting with its
/// exact `load_skill` argument.
pub fn render(query: &str, found: &[&SkillEntry]) -> String {
    let mut out = format!("Best matches for \"{query}\" (best first):\n");
    for entry in found {
        let description: String = entry.description.split_whitespace().collect::<Vec<_>>().join(" ");
        out.push_str(&format!(
            "- load_skill(\"{}\"): {}{DESCRIPTION_SEPARATOR}{}\n",
            entry.path,
            entry.name,
            shorten(&description, DESCRIPTION_CHARS)
        ));
    }
    out
}

fn shorten(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `text`, a result made by [`render`], shrunk toward `max_bytes`: shorter descriptions, then none,
/// then fewer matches, but never fewer than the top [`KEPT_MATCHES`] with their `load_skill`
/// arguments whole, so it may stay over `max_bytes`. `None` when `text` lists no matches or cannot
/// get smaller.
pub fn shrink(text: &str, max_bytes: usize) -> Option<String> {
    let mut lines = text.lines();
    let header = lines.next()?;
    let mut matches: Vec<(&str, &str)> = Vec::new();
    // A result shrunk before says how many matches it left out already.
    let mut left_out = 0;
    for line in lines {
        if line.starts_with("- load_skill(\"") {
            matches.push(line.split_once(DESCRIPTION_SEPARATOR).unwrap_or((line, "")));
        } else if let Some(count) = line.strip_prefix('(').and_then(|rest| rest.strip_suffix(LEFT_OUT)) {
            left_out += count.parse::<usize>().unwrap_or(0);
        }
    }
    if matches.is_empty() {
        return None;
    }
    let render = |count: usize, chars: usize| {
        let mut out = format!("{header}\n");
        for (head, description) in &matches[..count] {
            out.push_str(head);
            if chars > 0 && !description.is_empty() {
                out.push_str(DESCRIPTION_SEPARATOR);
                out.push_str(&shorten(description, chars));
            }
            out.push('\n');
        }
        if count < matches.len() || left_out > 0 {
            out.push_str(&format!("({}{LEFT_OUT}\n", matches.len() - count + left_out));
        }
        out.push_str(SHRUNK_NOTE);
        out
    };
    let all = matches.len();
    let kept = all.min(KEPT_MATCHES);
    let shrunk = SHORTER_DESCRIPTIONS
        .iter()
        .map(|&chars| (all, chars))
        .chain((kept..=all).rev().map(|count| (count, 0)))
        .map(|(count, chars)| render(count, chars))
        .find(|shrunk| shrunk.len() <= max_bytes)
        .unwrap_or_else(|| render(kept, 0));
    (shrunk.len() < text.len()).then_some(shrunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(matches: usize) -> String {
        let mut out = "Best matches for \"vat\" (best first):\n".to_owned();
        for i in 0..matches {
            out.push_str(&format!("- load_skill(\"area/skill-{i:02}\"): skill-{i:02} — {}\n", "words ".repeat(50)));
        }
        out
    }

    #[test]
    fn descriptions_are_shortened_before_they_go() {
        let full = result(20);
        let shrunk = shrink(&full, full.len() - 1000).unwrap();
        assert!(shrunk.len() <= full.len() - 1000);
        assert_eq!(shrunk.matches("load_skill(\"").count(), 20);
        assert!(shrunk.contains(" — words") && shrunk.ends_with(SHRUNK_NOTE), "{shrunk}");
    }

    #[test]
    fn the_top_matches_keep_their_arguments_however_small_the_room() {
        let full = result(20);
        let shrunk = shrink(&full, 10).unwrap();
        let arguments: Vec<&str> = shrunk.lines().filter(|line| line.starts_with("- load_skill(")).collect();
        assert_eq!(arguments[0], "- load_skill(\"area/skill-00\"): skill-00");
        assert_eq!(arguments.len(), KEPT_MATCHES);
        assert!(shrunk.contains("(15 lower matches left out)"), "{shrunk}");
        assert_eq!(shrink(&shrunk, 10), None, "the floor does not shrink again");
    }

    #[test]
    fn a_text_without_matches_is_not_shrunk_here() {
        assert_eq!(shrink("No skills match \"x\" among the 3 skills of this account.", 10), None);
    }
}
