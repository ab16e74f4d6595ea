//! Glob patterns as deepagents matches them (`wcmatch` with brace expansion and `**`, without
//! matching leading dots), for `glob` and `grep`'s file filter. Written here rather than taken
//! from a crate so that every rule is deepagents' and every cost is bounded: the pattern's length,
//! its brace nesting and its expansions are capped, and matching is linear in the path's segments.
//!
//! - A pattern without `/` matches the file name at any depth; one with `/` matches the path
//!   relative to the search root, and a leading `/` anchors it there (it never means the
//!   filesystem's root).
//! - `*` and `?` stay within a name, `[abc]`, `[a-z]`, `[!a]` (or `[^a]`) are classes, `**` as a
//!   whole segment crosses directories, `{a,b}` expands to alternatives, `\` escapes.
//! - A name starting with `.` is matched only by a segment that starts with a literal `.`; `**`
//!   does not descend into such directories.
//! - Malformed parts (an unclosed `[` or `{`) are literal text, as in `wcmatch`.

use super::render::py_repr;
use super::VfsError;

/// Longest glob pattern (`glob`'s `pattern`, `grep`'s `glob`) accepted, in bytes.
pub const MAX_GLOB_PATTERN_BYTES: usize = 1024;
/// Deepest nesting of `{a,b}` alternatives in a glob pattern.
pub const MAX_GLOB_NESTING: usize = 8;
/// Most patterns a glob's `{…}` alternatives may expand to (`wcmatch`'s own limit).
pub const MAX_GLOB_EXPANSIONS: usize = 1000;

/// A compiled glob pattern.
#[derive(Debug)]
pub(super) struct Glob {
    alternatives: Vec<Vec<Segment>>,
    anchored: bool,
}

#[derive(Debug, PartialEq)]
enum Segment {
    /// `**`: any number of names, none starting with a dot.
    Globstar,
    Name(Vec<Token>),
}

#[derive(Debug, PartialEq)]
enum Token {
    Literal(char),
    /// `?`
    One,
    /// `*`
    Any,
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

impl Glob {
    pub(super) fn new(pattern: &str) -> Result<Self, VfsError> {
        if pattern.len() > MAX_GLOB_PATTERN_BYTES {
            return Err(VfsError::InvalidGlob(format!("the pattern is longer than {MAX_GLOB_PATTERN_BYTES} bytes")));
        }
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for byte in pattern.bytes() {
            match byte {
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            deepest = deepest.max(depth);
        }
        if deepest > MAX_GLOB_NESTING {
            return Err(VfsError::InvalidGlob(format!("alternatives nest deeper than {MAX_GLOB_NESTING} levels")));
        }
        if pattern.replace('\\', "/").split('/').any(|segment| segment == "..") {
            return Err(VfsError::GlobTraversal(py_repr(pattern)));
        }
        let anchored = pattern.contains('/');
        let trimmed = pattern.trim_start_matches('/');
        let alternatives = expand(trimmed)?.iter().map(|alternative| compile(alternative)).collect();
        Ok(Self { alternatives, anchored })
    }

    /// Whether `rel` (a file's path relative to the search root, without a leading `/`) matches.
    pub(super) fn matches(&self, rel: &str) -> bool {
        let names: Vec<&str> =
            if self.anchored { rel.split('/').collect() } else { vec![rel.rsplit('/').next().unwrap_or(rel)] };
        self.alternatives.iter().any(|segments| matches_names(segments, &names))
    }
}

/// Brace expansion: every alternative of the first `{…,…}` group, each expanded in turn.
fn expand(pattern: &str) -> Result<Vec<String>, VfsError> {
    let Some((open, close)) = first_group(pattern) else { return Ok(vec![pattern.to_owned()]) };
    let (prefix, body, suffix) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
    let mut out = Vec::new();
    for alternative in split_alternatives(body) {
        for expanded in expand(&format!("{prefix}{alternative}{suffix}"))? {
            out.push(expanded);
            if out.len() > MAX_GLOB_EXPANSIONS {
                return Err(VfsError::InvalidGlob(format!(
                    "the alternatives expand to more than {MAX_GLOB_EXPANSIONS} patterns"
                )));
            }
        }
    }
    Ok(out)
}

/// Byte offsets of the first `{` whose matching `}` encloses a top-level comma.
fn first_group(pattern: &str) -> Option<(usize, usize)> {
    let bytes = pattern.as_bytes();
    let mut start = 0;
    while let Some(open) = find_unescaped(bytes, start, b'{') {
        let mut depth = 0usize;
        let mut comma = false;
        let mut at = open;
        while at < bytes.len() {
            match bytes[at] {
                b'\\' => at += 1,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        if comma {
                            return Some((open, at));
                        }
                        break;
                    }
                }
                b',' if depth == 1 => comma = true,
                _ => {}
            }
            at += 1;
        }
        start = open + 1;
    }
    None
}

fn find_unescaped(bytes: &[u8], from: usize, wanted: u8) -> Option<usize> {
    let mut at = from;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            byte if byte == wanted => return Some(at),
            _ => at += 1,
        }
    }
    None
}

/// The comma-separated alternatives of a group's body, commas inside nested groups kept.
fn split_alternatives(body: &str) -> Vec<&str> {
    let bytes = body.as_bytes();
    let mut parts = Vec::new();
    let (mut depth, mut start, mut at) = (0usize, 0usize, 0usize);
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 1,
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&body[start..at]);
                start = at + 1;
            }
            _ => {}
        }
        at += 1;
    }
    parts.push(&body[start..]);
    parts
}

/// One expanded pattern as segments; consecutive `**` are one.
fn compile(pattern: &str) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    for raw in pattern.split('/') {
        let segment = if raw == "**" { Segment::Globstar } else { Segment::Name(tokens(raw)) };
        if !(segment == Segment::Globstar && segments.last() == Some(&Segment::Globstar)) {
            segments.push(segment);
        }
    }
    segments
}

fn tokens(segment: &str) -> Vec<Token> {
    let chars: Vec<char> = segment.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let token = match chars[at] {
            '\\' if at + 1 < chars.len() => {
                at += 1;
                Token::Literal(chars[at])
            }
            '*' if out.last() == Some(&Token::Any) => {
                at += 1;
                continue;
            }
            '*' => Token::Any,
            '?' => Token::One,
            '[' => match class(&chars, at) {
                Some((token, end)) => {
                    at = end;
                    token
                }
                None => Token::Literal('['),
            },
            c => Token::Literal(c),
        };
        out.push(token);
        at += 1;
    }
    out
}

/// A `[…]` class starting at `open`, and the index of its `]`; `None` when it is not closed.
fn class(chars: &[char], open: usize) -> Option<(Token, usize)> {
    let mut at = open + 1;
    let negated = matches!(chars.get(at), Some('!' | '^'));
    if negated {
        at += 1;
    }
    let mut items = Vec::new();
    let mut first = true;
    loop {
        let mut c = *chars.get(at)?;
        if c == ']' && !first {
            return Some((Token::Class { negated, items }, at));
        }
        first = false;
        if c == '\\' {
            at += 1;
            c = *chars.get(at)?;
        }
        match (chars.get(at + 1), chars.get(at + 2)) {
            (Some('-'), Some(&high)) if high != ']' => {
                items.push((c, high));
                at += 3;
            }
            _ => {
                items.push((c, c));
                at += 1;
            }
        }
    }
}

/// Whether the names of a path match the segments; a dot name is never crossed by `**`.
fn matches_names(segments: &[Segment], names: &[&str]) -> bool {
    let mut reach = vec![false; names.len() + 1];
    reach[0] = true;
    for segment in segments {
        let mut next = vec![false; names.len() + 1];
        match segment {
            Segment::Globstar => {
                let mut carry = false;
                for (at, reached) in reach.iter().enumerate() {
                    carry |= *reached;
                    next[at] = carry;
                    if names.get(at).is_some_and(|name| name.starts_with('.')) {
                        carry = false;
                    }
                }
            }
            Segment::Name(tokens) => {
                for (at, name) in names.iter().enumerate() {
                    next[at + 1] = reach[at] && matches_name(tokens, name);
                }
            }
        }
        if !next.contains(&true) {
            return false;
        }
        reach = next;
    }
    reach[names.len()]
}

/// Whether one name matches a segment's tokens: a leading dot only by a literal dot, `*` by
/// backtracking to the last star (linear for ordinary patterns, at worst tokens × characters).
fn matches_name(tokens: &[Token], name: &str) -> bool {
    let chars: Vec<char> = name.chars().collect();
    if chars.first() == Some(&'.') && tokens.first() != Some(&Token::Literal('.')) {
        return false;
    }
    let (mut t, mut c) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while c < chars.len() {
        match tokens.get(t) {
            Some(Token::Any) => {
                star = Some((t, c));
                t += 1;
            }
            Some(token) if token_matches(token, chars[c]) => {
                t += 1;
                c += 1;
            }
            _ => match star {
                Some((star_t, star_c)) => {
                    t = star_t + 1;
                    c = star_c + 1;
                    star = Some((star_t, star_c + 1));
                }
                None => return false,
            },
        }
    }
    tokens[t..].iter().all(|token| *token == Token::Any)
}

fn token_matches(token: &Token, c: char) -> bool {
    match token {
        Token::Literal(literal) => *literal == c,
        Token::One => true,
        Token::Any => false,
        Token::Class { negated, items } => items.iter().any(|(low, high)| (*low..=*high).contains(&c)) != *negated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(pattern: &str, paths: &[&str]) -> Vec<String> {
        let glob = Glob::new(pattern).unwrap();
        paths.iter().filter(|path| glob.matches(path)).map(|path| (*path).to_owned()).collect()
    }

    const PATHS: [&str; 6] = ["a.md", "b.md", ".hidden/c.md", "d/.e.md", "d/it's.md", "d/x/y.txt"];

    #[test]
    fn follows_deepagents_rules() {
        // The same answers as deepagents 0.7.32 over the same files.
        assert_eq!(hits("*.md", &PATHS), ["a.md", "b.md", ".hidden/c.md", "d/it's.md"]);
        assert_eq!(hits("**/*.md", &PATHS), ["a.md", "b.md", "d/it's.md"]);
        // Without `/`, `**` looks at the file name only, like `*`.
        assert_eq!(hits("**", &PATHS), ["a.md", "b.md", ".hidden/c.md", "d/it's.md", "d/x/y.txt"]);
        assert_eq!(hits(".*", &PATHS), ["d/.e.md"]);
        assert_eq!(hits("d/*", &PATHS), ["d/it's.md"]);
        assert_eq!(hits("d/**", &PATHS), ["d/it's.md", "d/x/y.txt"]);
        assert_eq!(hits("/d/*", &PATHS), ["d/it's.md"]);
        assert_eq!(hits("/*.md", &PATHS), ["a.md", "b.md"]);
        assert_eq!(hits("**/d/*", &PATHS), ["d/it's.md"]);
        assert_eq!(hits("{a,b}.md", &PATHS), ["a.md", "b.md"]);
        assert_eq!(hits("[ab].md", &PATHS), ["a.md", "b.md"]);
        assert_eq!(hits("[!a].md", &PATHS), ["b.md", ".hidden/c.md"]);
        assert_eq!(hits("?.md", &PATHS), ["a.md", "b.md", ".hidden/c.md"]);
        assert!(hits("a[", &PATHS).is_empty());
        assert!(hits("*.{md", &PATHS).is_empty());
        assert!(hits("", &PATHS).is_empty());
        assert!(hits("A.MD", &PATHS).is_empty());
        assert_eq!(hits("*.{txt,{md,x}}", &PATHS), ["a.md", "b.md", ".hidden/c.md", "d/it's.md", "d/x/y.txt"]);
        assert_eq!(hits("d/\\*", &["d/*", "d/a"]), ["d/*"]);
        assert_eq!(hits("[]a]*", &["]x", "ax", "bx"]), ["]x", "ax"]);
        assert_eq!(hits("a**b", &["ab", "axxb", "a/b"]), ["ab", "axxb"]);
    }

    #[test]
    fn refuses_traversal_and_unbounded_patterns() {
        assert_eq!(
            Glob::new("../*").unwrap_err().to_string(),
            "Error: Path traversal not allowed in glob pattern '../*'"
        );
        assert!(Glob::new(&"a".repeat(MAX_GLOB_PATTERN_BYTES + 1)).is_err());
        assert!(Glob::new(&format!("{}a{}", "{a,".repeat(9), "}".repeat(9))).is_err());
        let wide = "{a,b}".repeat(10);
        assert!(Glob::new(&wide).unwrap_err().to_string().contains("more than 1000 patterns"));
        assert!(Glob::new(&"{a,b}".repeat(9)).is_ok());
        // Many globstars cost one pass over the names each.
        let globstars = "**/".repeat(300) + "*";
        assert!(Glob::new(&globstars).unwrap().matches("a/b/c"));
    }
}
