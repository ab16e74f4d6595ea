//! The npm packages a skill's JavaScript loads: `require('…')`, `import … from '…'`, `import '…'`
//! and `import('…')` of bare package names, found by a small scanner that knows comments, strings,
//! template literals and regular expressions well enough not to read code inside them.

/// The module specifiers a script loads with a literal string, in order.
pub(super) fn specifiers(source: &str) -> Vec<String> {
    let bytes = source.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    // The last significant byte of code, to tell a regular expression from a division.
    let mut last = b';';
    while at < bytes.len() {
        let byte = bytes[at];
        match byte {
            b'/' if bytes.get(at + 1) == Some(&b'/') => at = skip_to(bytes, at, b"\n"),
            b'/' if bytes.get(at + 1) == Some(&b'*') => at = skip_to(bytes, at + 2, b"*/"),
            b'/' if b"(,=:[!&|?{};+-*%<>~^".contains(&last) => {
                at = skip_regex(bytes, at + 1);
                last = b'/';
            }
            b'\'' | b'"' | b'`' => {
                at = skip_string(bytes, at).1;
                last = b'"';
            }
            _ if is_identifier(byte) => {
                let start = at;
                while at < bytes.len() && is_identifier(bytes[at]) {
                    at += 1;
                }
                let word = &source[start..at];
                // `obj.require(…)` is a method of something else, not the module loader.
                let member = start > 0 && bytes[start - 1] == b'.';
                if !member && matches!(word, "require" | "import" | "from") {
                    if let Some((specifier, end)) = literal_after(bytes, at, word != "from") {
                        found.push(specifier);
                        at = end;
                    }
                }
                last = b'a';
            }
            _ => {
                if !byte.is_ascii_whitespace() {
                    last = byte;
                }
                at += 1;
            }
        }
    }
    found
}

fn is_identifier(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

/// The index just past `end` (or the end of the text), searching from `from`.
fn skip_to(bytes: &[u8], from: usize, end: &[u8]) -> usize {
    bytes[from.min(bytes.len())..]
        .windows(end.len())
        .position(|window| window == end)
        .map_or(bytes.len(), |position| from + position + end.len())
}

/// A string or template literal starting at its quote: its text (escapes kept as written) and the
/// index past its closing quote.
fn skip_string(bytes: &[u8], start: usize) -> (&[u8], usize) {
    let quote = bytes[start];
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            byte if byte == quote => return (&bytes[start + 1..at], at + 1),
            b'\n' if quote != b'`' => return (&bytes[start + 1..at], at),
            _ => at += 1,
        }
    }
    (&bytes[(start + 1).min(bytes.len())..], bytes.len())
}

/// Past a regular expression literal whose body starts at `at` (its classes may hold a `/`).
fn skip_regex(bytes: &[u8], mut at: usize) -> usize {
    let mut class = false;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 1,
            b'[' => class = true,
            b']' => class = false,
            b'/' if !class => return at + 1,
            b'\n' => return at,
            _ => {}
        }
        at += 1;
    }
    at
}

/// A quoted specifier after `require`/`import` (`(` allowed first) or `from`, with the index past it.
fn literal_after(bytes: &[u8], mut at: usize, parenthesis: bool) -> Option<(String, usize)> {
    let skip_space = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    at = skip_space(at);
    if parenthesis && bytes.get(at) == Some(&b'(') {
        at = skip_space(at + 1);
    }
    match bytes.get(at) {
        Some(b'\'' | b'"') => {
            let (text, end) = skip_string(bytes, at);
            Some((String::from_utf8_lossy(text).into_owned(), end))
        }
        // A template literal counts only when it has no `${…}` in it.
        Some(b'`') => {
            let (text, end) = skip_string(bytes, at);
            (!text.windows(2).any(|pair| pair == b"${")).then(|| (String::from_utf8_lossy(text).into_owned(), end))
        }
        _ => None,
    }
}

/// The npm package a specifier names (`@scope/name` or `name`, without a subpath), or `None` for
/// a relative or absolute path, a URL, `node:` modules and Node's own (`builtins`).
pub(super) fn package_of(specifier: &str, builtins: &impl Fn(&str) -> bool) -> Option<String> {
    if specifier.is_empty() || specifier.starts_with(['.', '/', '#']) || specifier.contains(':') {
        return None;
    }
    let mut parts = specifier.split('/');
    let first = parts.next()?;
    let package = match first.starts_with('@') {
        true => format!("{first}/{}", parts.next().filter(|name| !name.is_empty())?),
        false => first.to_owned(),
    };
    let valid = package
        .trim_start_matches('@')
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._~/".contains(c));
    (valid && !builtins(first) && !builtins(specifier)).then_some(package)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requires_and_imports_are_found_outside_comments_and_strings() {
        let source = r#"
const fs = require('fs');
const { Document } = require("docx");
import React from 'react';
import * as x from "@scope/pkg/sub/path";
import 'side-effect';
const lazy = await import('lazy-pkg');
// const no = require('commented-out');
/* import gone from 'block-comment'; */
const text = "require('in-a-string')";
const re = /require\('in-a-regex'\)/g;
const half = total / 2; const quote = '/';
const template = `import x from 'in-a-template'`;
obj.require('a-method');
export { thing } from './local.js';
const dynamic = require(`tpl-${name}`);
"#;
        let found = specifiers(source);
        assert_eq!(
            found,
            ["fs", "docx", "react", "@scope/pkg/sub/path", "side-effect", "lazy-pkg", "./local.js"],
            "{found:?}"
        );
    }

    #[test]
    fn specifiers_name_packages_without_subpaths_or_builtins() {
        let builtins = |name: &str| ["fs", "path", "fs/promises"].contains(&name);
        let package = |specifier: &str| package_of(specifier, &builtins);
        assert_eq!(package("docx"), Some("docx".to_owned()));
        assert_eq!(package("react-dom/client"), Some("react-dom".to_owned()));
        assert_eq!(package("@scope/pkg/sub"), Some("@scope/pkg".to_owned()));
        assert_eq!(package("./helpers.js"), None);
        assert_eq!(package("../x"), None);
        assert_eq!(package("/abs/x"), None);
        assert_eq!(package("node:fs"), None);
        assert_eq!(package("fs"), None);
        assert_eq!(package("fs/promises"), None);
        assert_eq!(package("@scope"), None);
        assert_eq!(package("Not A Package"), None);
    }
}
