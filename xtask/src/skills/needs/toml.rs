//! Just enough of TOML to find one key of a `pyproject.toml`: table headers, keys, arrays of
//! strings, and other values skipped whole.

/// Just enough of TOML to find one key: headers, keys, and values skipped whole (strings of every
/// kind, arrays and inline tables over several lines).
pub(super) struct Toml<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Toml<'a> {
    /// A reader at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Toml { text: text.as_bytes(), at: 0 }
    }

    /// The byte at the reader, `None` at the end.
    pub fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn line(&self) -> usize {
        1 + self.text[..self.at.min(self.text.len())].iter().filter(|&&byte| byte == b'\n').count()
    }

    fn error(&self, what: &str) -> String {
        format!("pyproject.toml line {}: {what}", self.line())
    }

    /// Past spaces and tabs, and a comment to the end of its line.
    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
        if self.peek() == Some(b'#') {
            while !matches!(self.peek(), None | Some(b'\n')) {
                self.at += 1;
            }
        }
    }

    /// Past whitespace, newlines and comments.
    pub fn skip_blank_lines(&mut self) {
        loop {
            self.skip_spaces();
            match self.peek() {
                Some(b'\n' | b'\r') => self.at += 1,
                _ => return,
            }
        }
    }

    /// `[table]` or `[[array.of.tables]]`: the table's dotted name, quotes removed.
    pub fn header(&mut self) -> Result<String, String> {
        let start = self.at;
        while !matches!(self.peek(), None | Some(b'\n')) {
            self.at += 1;
        }
        let line = String::from_utf8_lossy(&self.text[start..self.at]);
        let line = line.split('#').next().unwrap_or_default().trim();
        let inner = line.trim_start_matches('[').trim_end_matches(']');
        if !line.ends_with(']') {
            return Err(self.error(&format!("`{line}` is not a table header")));
        }
        Ok(inner.split('.').map(|part| part.trim().trim_matches(['"', '\''])).collect::<Vec<_>>().join("."))
    }

    /// A key up to its `=`, dotted parts trimmed of spaces and quotes.
    pub fn key(&mut self) -> Result<String, String> {
        let start = self.at;
        while !matches!(self.peek(), None | Some(b'=' | b'\n')) {
            self.at += 1;
        }
        if self.peek() != Some(b'=') {
            return Err(self.error("a line that is neither a key = value nor a table header"));
        }
        let key = String::from_utf8_lossy(&self.text[start..self.at]).into_owned();
        self.at += 1;
        self.skip_spaces();
        Ok(key.split('.').map(|part| part.trim().trim_matches(['"', '\''])).collect::<Vec<_>>().join("."))
    }

    /// A string of any of TOML's four kinds, starting at its quote.
    fn string(&mut self) -> Result<String, String> {
        let quote = self.peek().ok_or_else(|| self.error("the file ends where a string should be"))?;
        let multi = self.text[self.at..].starts_with(&[quote; 3]);
        self.at += if multi { 3 } else { 1 };
        let mut value = Vec::new();
        loop {
            let byte = self.peek().ok_or_else(|| self.error("a string that does not end"))?;
            if multi && self.text[self.at..].starts_with(&[quote; 3]) {
                self.at += 3;
                break;
            }
            if !multi && byte == quote {
                self.at += 1;
                break;
            }
            if !multi && byte == b'\n' {
                return Err(self.error("a string that does not end on its line"));
            }
            if byte == b'\\' && quote == b'"' {
                let escaped =
                    self.text.get(self.at + 1).copied().ok_or_else(|| self.error("a string that does not end"))?;
                value.push(match escaped {
                    b'n' => b'\n',
                    b't' => b'\t',
                    other => other,
                });
                self.at += 2;
                continue;
            }
            value.push(byte);
            self.at += 1;
        }
        String::from_utf8(value).map_err(|_| self.error("a string that is not UTF-8"))
    }

    /// An array of strings, over as many lines as it takes.
    pub fn string_array(&mut self) -> Result<Vec<String>, String> {
        if self.peek() != Some(b'[') {
            return Err(self.error("`dependencies` is not an array of strings"));
        }
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.skip_blank_lines();
            match self.peek() {
                Some(b']') => {
                    self.at += 1;
                    return Ok(items);
                }
                Some(b'"' | b'\'') => items.push(self.string()?),
                _ => return Err(self.error("`dependencies` holds something other than strings")),
            }
            self.skip_blank_lines();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {}
                _ => return Err(self.error("`dependencies` is missing a `,` or its closing `]`")),
            }
        }
    }

    /// Past a value of any kind, to the end of its (last) line.
    pub fn skip_value(&mut self) -> Result<(), String> {
        let mut depth = 0usize;
        loop {
            match self.peek() {
                None => return Ok(()),
                Some(b'"' | b'\'') => {
                    self.string()?;
                }
                Some(b'[' | b'{') => {
                    depth += 1;
                    self.at += 1;
                }
                Some(b']' | b'}') => {
                    depth = depth.saturating_sub(1);
                    self.at += 1;
                }
                Some(b'#') => self.skip_spaces(),
                Some(b'\n') if depth == 0 => {
                    self.at += 1;
                    return Ok(());
                }
                Some(_) => self.at += 1,
            }
        }
    }
}
