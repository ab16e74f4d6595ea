//! What a skill says it needs, read without running anything: the lines of a `requirements.txt`,
//! the `[project] dependencies` of a `pyproject.toml` (read by the small reader in `toml`) and the
//! `dependencies` of a `package.json`.

use serde_json::Value;

use super::toml::Toml;

/// A Python requirement as declared: the distribution and its version specifier as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Requirement {
    pub name: String,
    /// `>=1.2,<2`, `==3.1`, `@ https://…`, or empty.
    pub specifier: String,
}

impl Requirement {
    /// The requirement as pip takes it on its command line.
    pub fn pip_argument(&self) -> String {
        match self.specifier.starts_with('@') {
            true => format!("{} {}", self.name, self.specifier),
            false => format!("{}{}", self.name, self.specifier),
        }
    }
}

/// The requirements of a `requirements.txt`, and a problem per line that is not one. Comments,
/// blank lines and pip's options (`-r`, `--index-url`, a line's `--hash`) are skipped, as are
/// requirements whose environment marker excludes the image (`python` is its version).
pub(super) fn requirements_txt(text: &str, python: &str) -> (Vec<Requirement>, Vec<String>) {
    let (mut found, mut problems) = (Vec::new(), Vec::new());
    let mut pending = String::new();
    let mut first_line = 0;
    for (number, raw) in text.lines().enumerate() {
        if pending.is_empty() {
            first_line = number + 1;
        }
        // A backslash at the end continues the line, as pip reads it.
        if let Some(head) = raw.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        let line = std::mem::take(&mut pending);
        let line = strip_comment(&line).trim();
        if line.is_empty() || line.starts_with('-') {
            continue;
        }
        // Options after a requirement (`--hash=…`, `--config-settings …`) are pip's, not the need's.
        let line = match line.find(" -") {
            Some(at) => line[..at].trim(),
            None => line,
        };
        match requirement(line, python) {
            Ok(Some(need)) => found.push(need),
            Ok(None) => {}
            Err(err) => problems.push(format!("line {first_line}: {err}")),
        }
    }
    (found, problems)
}

/// A line without its comment: pip takes `#` at the start or after whitespace as one.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (at, &byte) in bytes.iter().enumerate() {
        if byte == b'#' && (at == 0 || bytes[at - 1].is_ascii_whitespace()) {
            return &line[..at];
        }
    }
    line
}

/// One PEP 508 requirement: `None` when its marker excludes the image.
pub(super) fn requirement(text: &str, python: &str) -> Result<Option<Requirement>, String> {
    let text = text.trim();
    let name_end = text.find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))).unwrap_or(text.len());
    let (name, rest) = text.split_at(name_end);
    let rest = rest.trim_start();
    let named =
        name.starts_with(|c: char| c.is_ascii_alphanumeric()) && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !named || rest.starts_with(['+', ':', '/', '\\']) {
        return Err(match rest.starts_with(['+', ':', '/', '\\']) || text.starts_with(['.', '/', '~']) {
            true => format!("`{text}` is a URL or a path, not a package name"),
            false => format!("`{text}` is not a requirement (a package name, then its versions)"),
        });
    }
    let rest = match rest.strip_prefix('[') {
        Some(extras) => {
            let end = extras.find(']').ok_or_else(|| format!("`{text}`: its extras have no closing `]`"))?;
            if !extras[..end].chars().all(|c| c.is_ascii_alphanumeric() || "._-, ".contains(c)) {
                return Err(format!("`{text}`: `[{}]` is not a list of extras", &extras[..end]));
            }
            extras[end + 1..].trim_start()
        }
        None => rest,
    };
    let (specifier, marker) = match rest.strip_prefix('@') {
        // A direct reference ends at a `;` after whitespace: the URL may hold `;` itself.
        Some(url) => match url.find(" ;").or_else(|| url.find("\t;")) {
            Some(at) => (format!("@ {}", url[..at].trim()), Some(&url[at + 2..])),
            None => (format!("@ {}", url.trim()), None),
        },
        None => {
            let (spec, marker) = match rest.split_once(';') {
                Some((spec, marker)) => (spec, Some(marker)),
                None => (rest, None),
            };
            (version_specifier(spec.trim()).map_err(|err| format!("`{text}`: {err}"))?, marker)
        }
    };
    if specifier == "@ " {
        return Err(format!("`{text}`: `@` names no URL"));
    }
    let applies = marker.is_none_or(|marker| marker_applies(marker.trim(), python));
    Ok(applies.then(|| Requirement { name: name.to_owned(), specifier }))
}

/// The version clauses (`>=1.2, <2` or `(>=1.2)`), checked and written without spaces.
fn version_specifier(spec: &str) -> Result<String, String> {
    let spec = spec.strip_prefix('(').and_then(|inner| inner.strip_suffix(')')).unwrap_or(spec).trim();
    if spec.is_empty() {
        return Ok(String::new());
    }
    let mut clauses = Vec::new();
    for clause in spec.split(',') {
        let clause = clause.trim();
        let operator = ["===", "==", "!=", "<=", ">=", "~=", "<", ">"]
            .into_iter()
            .find(|operator| clause.starts_with(operator))
            .ok_or_else(|| format!("`{clause}` is not a version clause (such as `>=1.2`)"))?;
        let version = clause[operator.len()..].trim();
        let usable = !version.is_empty() && version.chars().all(|c| c.is_ascii_alphanumeric() || ".*+!_-".contains(c));
        if !usable {
            return Err(format!("`{clause}` is not a version clause (such as `>=1.2`)"));
        }
        clauses.push(format!("{operator}{version}"));
    }
    Ok(clauses.join(","))
}

/// Whether a PEP 508 marker holds for the image (CPython `python` on Linux x86_64). Clauses joined
/// by `and` are evaluated; a marker with `or`, parentheses or a variable this does not know (such
/// as `extra`) is taken to hold, so a need is never dropped by a guess.
pub(super) fn marker_applies(marker: &str, python: &str) -> bool {
    if marker.contains(['(', ')']) || marker.split_whitespace().any(|word| word == "or") {
        return true;
    }
    let short: String = python.split('.').take(2).collect::<Vec<_>>().join(".");
    let mut rest = marker;
    loop {
        let (clause, tail) = match rest.find(" and ") {
            Some(at) => (&rest[..at], Some(&rest[at + 5..])),
            None => (rest, None),
        };
        if !clause_holds(clause.trim(), python, &short) {
            return false;
        }
        match tail {
            Some(tail) => rest = tail,
            None => return true,
        }
    }
}

/// A marker variable's value in the image, and whether it compares as a version.
fn marker_value<'a>(name: &str, python: &'a str, short: &'a str) -> Option<(&'a str, bool)> {
    Some(match name {
        "python_version" => (short, true),
        "python_full_version" => (python, true),
        "sys_platform" => ("linux", false),
        "platform_system" => ("Linux", false),
        "os_name" => ("posix", false),
        "platform_machine" => ("x86_64", false),
        "implementation_name" => ("cpython", false),
        "platform_python_implementation" => ("CPython", false),
        _ => return None,
    })
}

/// One `variable op "value"` clause (either way round); `true` when it cannot be read.
fn clause_holds(clause: &str, python: &str, short: &str) -> bool {
    let operators = [" not in ", " in ", "===", "==", "!=", "<=", ">=", "~=", "<", ">"];
    let Some((at, operator)) = operators
        .iter()
        .filter_map(|operator| clause.find(operator).map(|at| (at, *operator)))
        .min_by_key(|(at, _)| *at)
    else {
        return true;
    };
    let (left, right) = (clause[..at].trim(), clause[at + operator.len()..].trim());
    let quoted = |side: &str| {
        let side = side.trim();
        (side.len() >= 2
            && (side.starts_with('"') && side.ends_with('"') || side.starts_with('\'') && side.ends_with('\'')))
        .then(|| side[1..side.len() - 1].to_owned())
    };
    // `"3.8" > python_version` reads as `python_version < "3.8"`.
    let (variable, literal, operator) = match (quoted(left), quoted(right)) {
        (None, Some(literal)) => (left, literal, operator.trim().to_owned()),
        (Some(literal), None) => {
            let flipped = match operator.trim() {
                "<" => ">",
                ">" => "<",
                "<=" => ">=",
                ">=" => "<=",
                other if other.ends_with("in") => return true,
                other => other,
            };
            (right, literal, flipped.to_owned())
        }
        _ => return true,
    };
    let Some((actual, is_version)) = marker_value(variable, python, short) else { return true };
    let ordering = match is_version {
        true => compare_versions(actual, &literal),
        false => actual.cmp(literal.as_str()),
    };
    match operator.as_str() {
        "==" | "===" => match is_version && literal.ends_with(".*") {
            true => actual.starts_with(literal.trim_end_matches('*')) || actual == literal.trim_end_matches(".*"),
            false => ordering.is_eq(),
        },
        "!=" => !ordering.is_eq(),
        "<" => ordering.is_lt(),
        "<=" => ordering.is_le(),
        ">" => ordering.is_gt(),
        ">=" | "~=" => ordering.is_ge(),
        "in" => literal.contains(actual),
        "not in" => !literal.contains(actual),
        _ => true,
    }
}

/// Dotted versions compared number by number (`3.13` after `3.9`); a part that is not a number
/// compares as text.
fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |version: &str| version.split('.').map(str::to_owned).collect::<Vec<_>>();
    let (a, b) = (parts(a), parts(b));
    for index in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(index).map_or("0", String::as_str), b.get(index).map_or("0", String::as_str));
        let ordering = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => x.cmp(y),
        };
        if !ordering.is_eq() {
            return ordering;
        }
    }
    std::cmp::Ordering::Equal
}

/// The `[project] dependencies` of a `pyproject.toml`: `None` when it declares none (no `[project]`
/// table, or dependencies it leaves `dynamic`), so the scripts' imports count instead.
pub(super) fn pyproject_dependencies(text: &str) -> Result<Option<Vec<String>>, String> {
    let mut toml = Toml::new(text);
    let mut table = String::new();
    loop {
        toml.skip_blank_lines();
        let Some(byte) = toml.peek() else { return Ok(None) };
        if byte == b'[' {
            table = toml.header()?;
            continue;
        }
        let key = toml.key()?;
        let key = if table.is_empty() { key } else { format!("{table}.{key}") };
        if key == "project.dependencies" {
            return toml.string_array().map(Some);
        }
        toml.skip_value()?;
    }
}

/// The `dependencies` of a `package.json` (name and version range): `None` when it has none.
pub(super) fn package_json_dependencies(text: &str) -> Result<Option<Vec<(String, String)>>, String> {
    let value: Value = serde_json::from_str(text).map_err(|err| format!("package.json is not JSON: {err}"))?;
    match value.get("dependencies") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(
            map.iter().map(|(name, range)| (name.clone(), range.as_str().unwrap_or_default().to_owned())).collect(),
        )),
        Some(_) => Err("package.json: `dependencies` is not an object".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(name: &str, specifier: &str) -> Requirement {
        Requirement { name: name.to_owned(), specifier: specifier.to_owned() }
    }

    #[test]
    fn requirements_lines_give_names_and_specifiers() {
        let text = "\
# the tools
anthropic>=0.40  # the SDK
mcp == 1.2.0
markitdown[docx, pdf]>=0.1 ; python_version >= \"3.10\"
-r other.txt
--index-url https://example.org/simple
Pillow (>=10)
numpy==2.1 --hash=sha256:abc
pywin32; sys_platform == 'win32'
dataclasses; python_version < '3.7'
requests>=2,\\
  <3
local-pkg @ https://example.org/pkg.whl ; os_name == 'posix'
";
        let (found, problems) = requirements_txt(text, "3.13.5");
        assert_eq!(problems, Vec::<String>::new());
        assert_eq!(
            found,
            [
                need("anthropic", ">=0.40"),
                need("mcp", "==1.2.0"),
                need("markitdown", ">=0.1"),
                need("Pillow", ">=10"),
                need("numpy", "==2.1"),
                need("requests", ">=2,<3"),
                need("local-pkg", "@ https://example.org/pkg.whl"),
            ]
        );
        assert_eq!(found[6].pip_argument(), "local-pkg @ https://example.org/pkg.whl");
        assert_eq!(found[0].pip_argument(), "anthropic>=0.40");
    }

    #[test]
    fn a_malformed_line_is_a_problem_with_its_number() {
        let (found, problems) =
            requirements_txt("numpy\ngit+https://github.com/x/y.git\n./vendor/pkg\npandas >> 2\nok[x\n", "3.13");
        assert_eq!(found, [need("numpy", "")]);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].starts_with("line 2:") && problems[0].contains("URL or a path"), "{problems:?}");
        assert!(problems[1].starts_with("line 3:") && problems[1].contains("URL or a path"), "{problems:?}");
        assert!(problems[2].starts_with("line 4:") && problems[2].contains("version clause"), "{problems:?}");
        assert!(problems[3].starts_with("line 5:") && problems[3].contains("extras"), "{problems:?}");
    }

    #[test]
    fn markers_are_read_for_the_image() {
        for (marker, holds) in [
            ("python_version >= '3.10'", true),
            ("python_version < \"3.8\"", false),
            ("'3.8' > python_version", false),
            ("sys_platform == 'linux' and platform_machine == 'x86_64'", true),
            ("sys_platform == 'darwin'", false),
            ("platform_system != 'Windows'", true),
            ("sys_platform == 'win32' or python_version > '3'", true),
            ("extra == 'test'", true),
            ("python_full_version >= '3.13.1'", true),
            ("python_version == '3.13.*'", true),
        ] {
            assert_eq!(marker_applies(marker, "3.13.5"), holds, "{marker}");
        }
    }

    #[test]
    fn pyproject_dependencies_are_found_across_lines() {
        let text = r#"
[build-system]
requires = ["hatchling"]

[project]
name = "demo"
description = """A tool.
[project.urls]
dependencies = ["not", "these"]
"""
classifiers = [
  "A :: B",  # a comment ]
]
dependencies = [
  "rdkit>=2024",  # chemistry
  'numpy',
  "tool[extra] @ https://x/y.whl",
]

[project.optional-dependencies]
test = ["pytest"]
"#;
        let found = pyproject_dependencies(text).unwrap().unwrap();
        assert_eq!(found, ["rdkit>=2024", "numpy", "tool[extra] @ https://x/y.whl"]);
        assert_eq!(pyproject_dependencies("[tool.x]\ndependencies = ['a']\n").unwrap(), None);
        assert_eq!(pyproject_dependencies("[project]\nname = 'x'\ndynamic = ['dependencies']\n").unwrap(), None);
        assert_eq!(pyproject_dependencies("project.dependencies = ['a']\n").unwrap(), Some(vec!["a".to_owned()]));
        let err = pyproject_dependencies("[project]\ndependencies = [\n  'a'\n  'b',\n]\n").unwrap_err();
        assert!(err.contains("line 4") && err.contains("`,`"), "{err}");
        assert!(pyproject_dependencies("[project]\ndependencies = \"a\"\n").is_err());
        assert!(pyproject_dependencies("[project]\nname = \"never ends\n").is_err());
    }

    #[test]
    fn package_json_dependencies_are_read() {
        let found =
            package_json_dependencies(r#"{"name": "x", "dependencies": {"docx": "^9", "@scope/pkg": "1.0.0"}}"#)
                .unwrap()
                .unwrap();
        assert_eq!(found, [("@scope/pkg".to_owned(), "1.0.0".to_owned()), ("docx".to_owned(), "^9".to_owned())]);
        assert_eq!(package_json_dependencies(r#"{"devDependencies": {"jest": "1"}}"#).unwrap(), None);
        assert!(package_json_dependencies("{not json").unwrap_err().contains("not JSON"));
        assert!(package_json_dependencies(r#"{"dependencies": ["x"]}"#).is_err());
    }
}
