//! The text the file tools answer, in deepagents' formats: `read_file`'s status header and verbatim
//! window, Python list reprs for `ls` and `glob`, and the size cuts of long results. Pure functions
//! over strings; sizes are counted in bytes, since a result must stay under the loop's byte bound.

use super::VfsError;

/// What `read_file` answers for a file with no content (or only whitespace).
pub const EMPTY_FILE_NOTE: &str = "System reminder: File exists but has empty contents";

/// Appended (as a list item, or a line) to an `ls`, `glob` or `grep` result cut to the output bound.
pub(super) const TRUNCATION_GUIDANCE: &str = "... [results truncated, try being more specific with your parameters]";

/// Put above the status header when a `read_file` window had to be cut to the output bound.
/// deepagents' wording suggests the `execute` tool, which is offered only with a sandbox.
const READ_TRUNCATION_NOTICE: &str = "[Output was truncated due to size limits. The file content is very large. \
     Read fewer lines at a time with `limit`, continuing from the next offset shown; the rest of a single line \
     longer than this limit cannot be shown.]";

/// Python's `str.isspace`: Unicode white space plus the four information separators.
fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Whether deepagents treats `text` as an empty file (`not content or content.strip() == ""`).
pub(super) fn is_blank(text: &str) -> bool {
    text.chars().all(py_isspace)
}

/// Python's `str.splitlines(keepends=True)`: every line with its terminator, which may be `\n`,
/// `\r\n`, `\r`, `\v`, `\f`, `\x1c`–`\x1e`, `\x85`, U+2028 or U+2029.
pub(super) fn split_lines_keepends(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '\r' => match chars.peek() {
                Some(&(next, '\n')) => {
                    chars.next();
                    next + 1
                }
                _ => at + 1,
            },
            '\n' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                at + c.len_utf8()
            }
            _ => continue,
        };
        lines.push(&text[start..end]);
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// A `read_file` answer: the window `[offset, offset + limit)` of `text` under deepagents' status
/// header (`@@ lines A-B of T | next offset N @@`), then the lines verbatim, the whole at most
/// `budget` bytes. A negative offset reads from the start, with a notice; a limit below 1 reads
/// nothing, with a reminder that says so; an offset past the end is an error.
pub(super) fn read_window(text: &str, offset: i64, limit: i64, budget: usize) -> Result<String, VfsError> {
    if is_blank(text) {
        return Ok(EMPTY_FILE_NOTE.to_owned());
    }
    if limit <= 0 {
        return Ok(format!(
            "System reminder: no lines were read because `limit` was {limit}. The file was not inspected and may \
             have contents; retry with `limit` >= 1 to read it."
        ));
    }
    let start = usize::try_from(offset.max(0)).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let lines = split_lines_keepends(text);
    let total = lines.len();
    if start >= total {
        return Err(VfsError::OffsetOutOfRange { offset: start, lines: total });
    }
    let end = start.saturating_add(limit).min(total);
    let sliced = lines[start..end].concat().replace("\r\n", "\n").replace('\r', "\n");
    // deepagents' rows: split on `\n`, a final empty row dropped, blank rows padded back so the
    // body has one row per line of the window.
    let mut rows: Vec<&str> = sliced.split('\n').collect();
    if rows.last() == Some(&"") {
        rows.pop();
    }
    let window = end - start;
    while rows.len() < window {
        rows.push("");
    }
    let body = rows.join("\n");
    let window = Window { start: start + 1, end, total, next_offset: (end < total).then_some(end) };
    let mut notices = Vec::new();
    if offset < 0 {
        notices.push(format!("[Requested offset {offset} is before the start of the file; read from line 1 instead.]"));
    }
    let whole = assemble(&body, &window.fields(), &notices);
    if whole.len() < budget {
        return Ok(whole);
    }
    Ok(cut_window(&body, &window, &notices, budget))
}

/// Which source lines a read shows, as its status header states them.
struct Window {
    /// 1-based first line.
    start: usize,
    /// 1-based last line.
    end: usize,
    total: usize,
    next_offset: Option<usize>,
}

impl Window {
    fn fields(&self) -> Vec<String> {
        let mut fields = vec![format!("lines {}-{} of {}", self.start, self.end, self.total)];
        if let Some(next) = self.next_offset.filter(|_| self.end < self.total) {
            fields.push(format!("next offset {next}"));
        }
        fields
    }
}

fn assemble(body: &str, fields: &[String], notices: &[String]) -> String {
    let mut parts: Vec<&str> = notices.iter().map(String::as_str).collect();
    let header = format!("@@ {} @@", fields.join(" | "));
    parts.push(&header);
    parts.push(body);
    parts.join("\n")
}

/// The longest prefix of whole source lines that fits `budget`, its header restated so the next
/// offset never skips a line that was not shown; a first line that does not fit alone is shown
/// in part, and the header says how much of it.
fn cut_window(body: &str, window: &Window, notices: &[String], budget: usize) -> String {
    let mut notices = notices.to_vec();
    notices.push(READ_TRUNCATION_NOTICE.to_owned());
    let cut_fields = |end: usize| {
        let shown = Window { start: window.start, end, total: window.total, next_offset: Some(end) };
        let mut fields = shown.fields();
        fields.push("truncated due to size".to_owned());
        fields
    };
    let notices_len: usize = notices.iter().map(|n| n.len() + 1).sum();
    // Candidates grow with each line, so the first that does not fit ends the search. (Only a
    // window's last line of the file drops `next offset` from the header, and that candidate is
    // longer than the whole result, which did not fit.)
    let mut best = None;
    let mut position = 0;
    for (index, row) in body.split('\n').enumerate() {
        let line = window.start + index;
        if line > window.end {
            break;
        }
        position += row.len();
        let header_len = format!("@@ {} @@", cut_fields(line).join(" | ")).len();
        if notices_len + header_len + 1 + position > budget {
            break;
        }
        best = Some((position, line));
        position += 1;
    }
    if let Some((position, line)) = best {
        return assemble(&body[..position], &cut_fields(line), &notices);
    }
    let first = body.split('\n').next().unwrap_or_default();
    let chars = first.chars().count();
    let mid_fields = |shown: usize| {
        vec![
            format!("lines {0}-{0} of {1}", window.start, window.total),
            "truncated mid-line".to_owned(),
            format!("{shown} of {chars} chars"),
        ]
    };
    let reserved = assemble("", &mid_fields(chars), &notices).len();
    let shown = prefix_within(first, budget.saturating_sub(reserved));
    assemble(shown, &mid_fields(shown.chars().count()), &notices)
}

/// The longest prefix of `text` of at most `max` bytes that ends at a character boundary.
pub(super) fn prefix_within(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// A long text result cut to `budget` bytes, as deepagents cuts a `grep` result: the head, then
/// [`TRUNCATION_GUIDANCE`] on a line of its own.
pub(super) fn truncate_text(text: String, budget: usize) -> String {
    if text.len() <= budget {
        return text;
    }
    let head = prefix_within(&text, budget.saturating_sub(TRUNCATION_GUIDANCE.len() + 1));
    format!("{head}\n{TRUNCATION_GUIDANCE}")
}

/// Paths as deepagents answers them from `ls` and `glob`: Python's `str()` of the list, cut to
/// `budget` bytes with [`TRUNCATION_GUIDANCE`] as the last item; no paths is "No files found".
pub(super) fn path_list(paths: &[String], budget: usize) -> String {
    if paths.is_empty() {
        return "No files found".to_owned();
    }
    let guidance = py_repr(TRUNCATION_GUIDANCE);
    let room = budget.saturating_sub(guidance.len() + 2);
    let mut items = Vec::new();
    let mut used = 0;
    for path in paths {
        let item = py_repr(path);
        used += item.len() + 2;
        if used > room {
            items.push(guidance);
            break;
        }
        items.push(item);
    }
    format!("[{}]", items.join(", "))
}

/// Python's `repr` of a string: single quotes unless the text holds a single quote and no double
/// one; backslash escapes for the quote, backslashes and characters Python does not print.
pub(super) fn py_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !py_printable(c) => {
                let code = u32::from(c);
                let escaped = if code < 0x100 {
                    format!("\\x{code:02x}")
                } else if code < 0x10000 {
                    format!("\\u{code:04x}")
                } else {
                    format!("\\U{code:08x}")
                };
                out.push_str(&escaped);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable` for the characters a path can hold: controls, separators other
/// than the space, format characters and private-use characters are not printable. (Unassigned
/// code points, which Python also escapes, are not known here and are shown as they are.)
fn py_printable(c: char) -> bool {
    let code = u32::from(c);
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            code,
            0xad | 0x600..=0x605
                | 0x61c
                | 0x6dd
                | 0x70f
                | 0x8e2
                | 0x180e
                | 0x200b..=0x200f
                | 0x202a..=0x202e
                | 0x2060..=0x2064
                | 0x2066..=0x206f
                | 0xfeff
                | 0xfff9..=0xfffb
                | 0x110bd
                | 0x1bca0..=0x1bca3
                | 0x1d173..=0x1d17a
                | 0xe0001
                | 0xe0020..=0xe007f
                | 0xe000..=0xf8ff
                | 0xf0000..=0x10ffff
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_like_python() {
        assert_eq!(
            split_lines_keepends("a\nb\r\nc\rd\u{c}e\u{2028}f"),
            ["a\n", "b\r\n", "c\r", "d\u{c}", "e\u{2028}", "f"]
        );
        assert_eq!(split_lines_keepends("a\n\n"), ["a\n", "\n"]);
        assert!(split_lines_keepends("").is_empty());
    }

    #[test]
    fn reprs_strings_like_python() {
        assert_eq!(py_repr("/a.md"), "'/a.md'");
        assert_eq!(py_repr("/it's.md"), "\"/it's.md\"");
        assert_eq!(py_repr("'\""), "'\\'\"'");
        assert_eq!(py_repr("a\\b\u{a0}é\u{200b}"), "'a\\\\b\\xa0é\\u200b'");
        assert_eq!(path_list(&["/a".into(), "/b/".into()], 1000), "['/a', '/b/']");
        assert_eq!(path_list(&[], 1000), "No files found");
        let many: Vec<String> = (0..100).map(|i| format!("/f{i:03}")).collect();
        let cut = path_list(&many, 200);
        assert!(cut.len() <= 200 && cut.ends_with(&format!("{}]", py_repr(TRUNCATION_GUIDANCE))), "{cut}");
    }

    #[test]
    fn reads_windows_like_deepagents() {
        let text = "x\n\ny\n\n";
        assert_eq!(read_window(text, 0, 100, 1000).unwrap(), "@@ lines 1-4 of 4 @@\nx\n\ny\n");
        assert_eq!(read_window(text, 1, 2, 1000).unwrap(), "@@ lines 2-3 of 4 | next offset 3 @@\n\ny");
        assert_eq!(read_window(text, 3, 1, 1000).unwrap(), "@@ lines 4-4 of 4 @@\n");
        assert_eq!(
            read_window(text, -1, 1, 1000).unwrap(),
            "[Requested offset -1 is before the start of the file; read from line 1 instead.]\n@@ lines 1-1 of 4 | next offset 1 @@\nx"
        );
        assert!(read_window(text, 0, 0, 1000)
            .unwrap()
            .starts_with("System reminder: no lines were read because `limit` was 0."));
        assert_eq!(read_window(" \n\t", 7, 1, 1000).unwrap(), EMPTY_FILE_NOTE);
        assert_eq!(
            read_window(text, 4, 1, 1000).unwrap_err().to_string(),
            "Error: Line offset 4 exceeds file length (4 lines)"
        );
        assert_eq!(read_window("a\r\nb\rc", 0, 100, 1000).unwrap(), "@@ lines 1-3 of 3 @@\na\nb\nc");
    }

    #[test]
    fn cuts_long_windows_at_whole_lines_or_mid_line() {
        let text: String = (0..50).map(|i| format!("{i:02}{}\n", "a".repeat(98))).collect();
        let cut = read_window(&text, 0, 100, 2000).unwrap();
        assert!(cut.len() <= 2000, "{}", cut.len());
        assert!(cut.starts_with(READ_TRUNCATION_NOTICE), "{cut}");
        let header = cut.lines().nth(1).unwrap();
        let shown = cut.lines().count() - 2;
        assert_eq!(header, format!("@@ lines 1-{shown} of 50 | next offset {shown} | truncated due to size @@"));
        assert!(cut.ends_with(&format!("{:02}{}", shown - 1, "a".repeat(98))));

        let long = format!("{}\nshort\n", "é".repeat(3000));
        let cut = read_window(&long, 0, 100, 2000).unwrap();
        assert!(cut.len() <= 2000, "{}", cut.len());
        let shown = cut.lines().last().unwrap().chars().count();
        assert_eq!(
            cut.lines().nth(1).unwrap(),
            format!("@@ lines 1-1 of 2 | truncated mid-line | {shown} of 3000 chars @@")
        );
    }
}
