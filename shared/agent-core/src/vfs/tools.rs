//! The seven file tools as the model sees them (names, arguments, defaults and descriptions as
//! LangChain deepagents 0.7's filesystem tools, adapted to the four roots) and their dispatch onto
//! a [`Vfs`]. Arguments are read as deepagents' pydantic schemas read them (a number may come as a
//! numeric string, a boolean as `"true"`), and every bad one is an error result naming it.

use serde_json::{json, Map, Value};

use super::read::Read;
use super::{
    GrepOutput, Vfs, VfsError, DEFAULT_READ_LIMIT, MAX_FILE_BYTES, MAX_GREP_MATCHES, MAX_MEMORY_BYTES,
    MAX_MEMORY_FILES, MAX_MEMORY_FILE_BYTES, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES,
};
use crate::message::ToolSpec;
use crate::tool_names::FILE_TOOL_NAMES;

const ROOTS: &str = "The filesystem has up to four roots: /workspace (your private read-write \
    scratch space for this conversation), /memories (read-write, your long-term memory of this user, kept across \
    conversations), /ticket (read-only files of the current ticket, when there is one) and /skills \
    (read-only; only the skills you have loaded appear there, as /skills/<name>). Paths must be absolute.";

const GLOB_RULES: &str = "Supports `*` (any characters within a path segment), `**` (any directories), `?` \
    (single character), `[abc]` (one character from a set), and `{a,b}` (alternatives), e.g. `*.md`, \
    `resources/**/*.md`, `*.{md,txt}`.\n\nA pattern without `/` matches the file name at any depth under the \
    search root (`*.md` matches `/skills/compraventa/resources/ejemplo.md`). A pattern containing `/` matches the \
    search-root-relative path (`resources/*.md`). A leading `/` anchors to the search root (`/*.md` matches only \
    files directly in it).\n\nLeading-dot names are only matched when the pattern segment itself starts with `.`; \
    `**` does not descend into dot-directories.";

const GREP_GLOB: &str = "Glob pattern (NOT regex) limiting which files are searched (e.g. '*.md', '*.txt'). A \
    pattern without '/' matches the file name at any depth; a pattern containing '/' matches the \
    search-root-relative path (e.g. 'resources/**/*.md'). This is an in-tool file filter, not a call to the \
    separate glob tool. Brace expansion (e.g. '*.{md,txt}') is supported.";

const GREP_OUTPUT_MODE: &str = "Shape of the returned text. 'files_with_matches' (default): newline-separated \
    matching file paths. 'content': matching lines grouped by file under a '<path>:' header, each line indented \
    and formatted '<line_number>: <line text>' (only the matched line, no surrounding context). 'count': one \
    '<path>: <match_count>' line per file.";

/// Specs of the seven file tools for the model (deepagents' `ls`, `read_file`, `write_file`,
/// `edit_file`, `delete`, `glob`, `grep`).
pub fn file_tool_specs() -> Vec<ToolSpec> {
    let spec = |name: &str, description: String, parameters: Value| ToolSpec {
        name: name.to_owned(),
        description,
        parameters,
    };
    vec![
        spec(
            "ls",
            format!(
                "Lists all files in a directory.\n\nThis is useful for exploring the filesystem and finding the \
                 right file to read or edit. You should almost ALWAYS use this tool before using the read_file or \
                 edit_file tools. Returns a list of absolute paths; directories end in '/'. Start with ls(\"/\") to \
                 see which roots exist. {ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Absolute path to the directory to list, e.g. \"/\" or \"/workspace\". Must be absolute, not relative."}
                },
                "required": ["path"]
            }),
        ),
        spec(
            "read_file",
            format!(
                "Reads a file from the filesystem. Assume any path the user provides is valid; reading a missing \
                 file returns an error.\n\nUsage:\n\
                 - By default, it reads up to {DEFAULT_READ_LIMIT} lines starting from the beginning of the file. \
                 Use `offset`/`limit` to page through large files instead of reading them whole: `offset` is the \
                 0-based line to start from, `limit` how many lines to read.\n\
                 - A status header, `@@ field | field | ... @@`, sits above the file content, and every line after \
                 it is verbatim file content. `lines A-B of T` says which lines you got out of how many; \
                 `next offset N` is the `offset` to continue from. When content is truncated, there may be an \
                 explanation before the header. Never include the header when editing.\n\
                 - Speculatively batch multiple `read_file` calls in one response when several files may be \
                 useful.\n\
                 - An empty file returns a system-reminder warning in place of contents.\n\
                 - Images (PNG, JPEG, GIF, WebP) and PDFs are shown to you as they are, to look at (a large \
                 image downscaled; render the pages of a long PDF as images). Other binary files cannot be \
                 read; convert them with a command.\n\
                 - Always read a file before editing it.\n\n{ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path to the file to read, e.g. \"/skills/compraventa/SKILL.md\". Must be absolute, not relative."},
                    "offset": {"type": "integer", "default": 0, "description": "Line number to start reading from (0-indexed). Use for pagination of large files."},
                    "limit": {"type": "integer", "default": DEFAULT_READ_LIMIT, "description": "Maximum number of lines to read. Use for pagination of large files."}
                },
                "required": ["file_path"]
            }),
        ),
        spec(
            "write_file",
            format!(
                "Writes content to a file. Creates the file if it does not exist; replaces it entirely if it \
                 does.\n\nUsage:\n\
                 - Use this tool when you intend to create a new file or replace the whole file. You do not need to \
                 read the file first.\n\
                 - Prefer to edit existing files (with the edit_file tool) over creating new ones when possible.\n\
                 - Only /workspace and /memories are writable; parent directories are implied. A file holds at \
                 most {MAX_FILE_BYTES} bytes; /workspace holds at most {MAX_WORKSPACE_FILES} files and {} MiB in \
                 all. A /memories file holds at most {MAX_MEMORY_FILE_BYTES} bytes; /memories holds at most \
                 {MAX_MEMORY_FILES} files and {} MiB in all.",
                MAX_WORKSPACE_BYTES / (1024 * 1024),
                MAX_MEMORY_BYTES / (1024 * 1024)
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path where the file should be written, under /workspace or /memories, e.g. \"/workspace/borrador.md\"."},
                    "content": {"type": "string", "description": "The text content to write to the file. This parameter is required."}
                },
                "required": ["file_path", "content"]
            }),
        ),
        spec(
            "edit_file",
            "Performs exact string replacements in files.\n\nUsage:\n\
             - Read the file before editing.\n\
             - Preserve the exact source indentation from the read output, and never include the read status \
             header in old_string or new_string.\n\
             - old_string must be unique in the file unless replace_all is true; give more surrounding context to \
             make it unique.\n\
             - Prefer editing an existing file over creating a new one.\n\
             - Only files under /workspace and /memories can be edited."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path to the file to edit, under /workspace or /memories."},
                    "old_string": {"type": "string", "description": "The exact text to find and replace. Must be unique in the file unless replace_all is true."},
                    "new_string": {"type": "string", "description": "The text to replace old_string with. Must be different from old_string."},
                    "replace_all": {"type": "boolean", "default": false, "description": "If true, replace all occurrences of old_string. If false (default), old_string must be unique."}
                },
                "required": ["file_path", "old_string", "new_string"]
            }),
        ),
        spec(
            "delete",
            "Deletes a file or directory under /workspace or /memories.\n\nUsage:\n- Permanently removes the file or directory at \
             the given absolute path.\n- Deleting a directory removes it and everything inside it, recursively. Prefer \
             deleting a directory in one call over deleting each file individually.\n- This cannot be undone, so only \
             delete paths you are sure are no longer needed; it also makes room when the workspace is full."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path to the file or directory to delete, under /workspace or /memories."}
                },
                "required": ["file_path"]
            }),
        ),
        spec(
            "glob",
            format!("Find files matching a glob pattern, returning absolute paths.\n\n{GLOB_RULES}\n\n{ROOTS}"),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern to match files (e.g. '*.md', '**/*.md', 'resources/*.pdf'). A pattern without '/' matches the file name at any depth; a pattern containing '/' matches the search-root-relative path; a leading '/' anchors to the search root."},
                    "path": {"type": "string", "description": "Absolute directory to search from (default \"/\", every root)."}
                },
                "required": ["pattern"]
            }),
        ),
        spec(
            "grep",
            format!(
                "Search for a LITERAL text pattern across files (NOT regex).\n\nThe pattern is matched verbatim: \
                 regex metacharacters are ordinary characters, not operators. To match any of several strings, run \
                 a separate grep for each; `grep(pattern=\"foo|bar\")` searches for the literal text \"foo|bar\", and \
                 `.*` or `\\.` match those characters literally.\n\nReturns matching files or content per \
                 `output_mode`; binary files are skipped. {ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Text pattern to search for (literal string, not regex)."},
                    "path": {"type": "string", "description": "Absolute file or directory to search in (default \"/\", every root)."},
                    "glob": {"type": "string", "description": GREP_GLOB},
                    "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"], "default": "files_with_matches", "description": GREP_OUTPUT_MODE},
                    "max_count": {"type": "integer", "minimum": 1, "description": format!("Optional cap on the total number of matches returned across all files (default and at most {MAX_GREP_MATCHES}). When the cap is hit, results are truncated and a note says so; narrow the pattern or path to see the rest.")}
                },
                "required": ["pattern"]
            }),
        ),
    ]
}

/// Runs `read_file`: a window of a text file, or the bytes of a binary one (to be shown to the
/// model when it is an image or a PDF); errors as the text for the model.
pub async fn read_file_or_bytes(vfs: &Vfs<'_>, args: &Value) -> Result<Read, String> {
    let read = async {
        let args = Args::new("read_file", args)?;
        let offset = args.optional_int("offset")?.unwrap_or(0);
        let limit = args.optional_int("limit")?.unwrap_or(DEFAULT_READ_LIMIT);
        vfs.read_or_bytes(args.string("file_path")?, offset, limit).await
    };
    read.await.map_err(|error| error.to_string())
}

/// Runs a file tool call and returns the text for the model, errors included as `Error: ...`.
/// `None` if `name` is not a file tool.
pub async fn run_file_tool(vfs: &mut Vfs<'_>, name: &str, args: &Value) -> Option<String> {
    if !FILE_TOOL_NAMES.contains(&name) {
        return None;
    }
    Some(dispatch(vfs, name, args).await.unwrap_or_else(|error| error.to_string()))
}

async fn dispatch(vfs: &mut Vfs<'_>, name: &str, args: &Value) -> Result<String, VfsError> {
    let args = Args::new(name, args)?;
    match name {
        "ls" => vfs.ls(args.string("path")?).await,
        "read_file" => {
            let offset = args.optional_int("offset")?.unwrap_or(0);
            let limit = args.optional_int("limit")?.unwrap_or(DEFAULT_READ_LIMIT);
            vfs.read_window(args.string("file_path")?, offset, limit).await
        }
        "write_file" => vfs.write_file(args.string("file_path")?, args.string("content")?).await,
        "edit_file" => {
            let replace_all = args.optional_bool("replace_all")?.unwrap_or(false);
            vfs.edit_file(
                args.string("file_path")?,
                args.string("old_string")?,
                args.string("new_string")?,
                replace_all,
            )
            .await
        }
        "delete" => vfs.delete(args.string("file_path")?).await,
        "glob" => vfs.glob(args.string("pattern")?, args.optional_string("path")?).await,
        "grep" => {
            let output = match args.optional_string("output_mode")? {
                None => GrepOutput::default(),
                Some(mode) => GrepOutput::parse(mode).ok_or_else(|| {
                    VfsError::Arguments(
                        "argument 'output_mode' of grep must be 'files_with_matches', 'content' or 'count'".into(),
                    )
                })?,
            };
            let max_count = match args.optional_int("max_count")? {
                Some(n) if n <= 0 => {
                    return Err(VfsError::Arguments("argument 'max_count' of grep must be greater than 0".into()))
                }
                n => n.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            };
            let glob = args.optional_string("glob")?;
            vfs.grep_with(args.string("pattern")?, args.optional_string("path")?, glob, output, max_count).await
        }
        other => Err(VfsError::Arguments(format!("unknown file tool '{other}'"))),
    }
}

/// A tool call's arguments, checked one by one with errors that name the argument.
struct Args<'t> {
    tool: &'t str,
    map: Map<String, Value>,
}

impl<'t> Args<'t> {
    /// An object, `null` (no arguments) or a string holding a JSON object (a provider that
    /// could not parse the arguments keeps them as a string).
    fn new(tool: &'t str, args: &Value) -> Result<Self, VfsError> {
        let map = match args {
            Value::Object(map) => map.clone(),
            Value::Null => Map::new(),
            Value::String(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                _ => {
                    return Err(VfsError::Arguments(format!(
                        "the arguments of {tool} are not valid JSON: send a JSON object"
                    )))
                }
            },
            other => {
                return Err(VfsError::Arguments(format!(
                    "the arguments of {tool} must be a JSON object, got {}",
                    kind(other)
                )))
            }
        };
        Ok(Self { tool, map })
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    fn wrong_type(&self, name: &str, expected: &str, got: &Value) -> VfsError {
        VfsError::Arguments(format!("argument '{name}' of {} must be {expected}, got {}", self.tool, kind(got)))
    }

    fn string(&self, name: &str) -> Result<&str, VfsError> {
        match self.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
            None => {
                Err(VfsError::Arguments(format!("missing required argument '{name}' (a string) for {}", self.tool)))
            }
        }
    }

    fn optional_string(&self, name: &str) -> Result<Option<&str>, VfsError> {
        match self.get(name) {
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
            None => Ok(None),
        }
    }

    /// A boolean as pydantic's lax mode reads one: `true`/`false`, 0 or 1, or (in any case)
    /// "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n", "1", "0".
    fn optional_bool(&self, name: &str) -> Result<Option<bool>, VfsError> {
        let value = match self.get(name) {
            None => return Ok(None),
            Some(value) => value,
        };
        let parsed = match value {
            Value::Bool(b) => Some(*b),
            Value::Number(n) => match n.as_f64() {
                Some(0.0) => Some(false),
                Some(1.0) => Some(true),
                _ => None,
            },
            Value::String(text) => match text.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "t" | "y" | "1" => Some(true),
                "false" | "no" | "off" | "f" | "n" | "0" => Some(false),
                _ => None,
            },
            _ => None,
        };
        parsed.map(Some).ok_or_else(|| self.wrong_type(name, "a boolean (true or false)", value))
    }

    /// An integer as pydantic's lax mode reads one: a JSON integer, a number with no fraction, a
    /// boolean (1 or 0), or a string of digits (surrounding spaces, a sign and `_` between digits
    /// allowed). Out-of-range values saturate.
    fn optional_int(&self, name: &str) -> Result<Option<i64>, VfsError> {
        let value = match self.get(name) {
            None => return Ok(None),
            Some(value) => value,
        };
        let parsed = match value {
            Value::Bool(b) => Some(i64::from(*b)),
            Value::Number(number) => match number.as_i64() {
                Some(n) => Some(n),
                None => number.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64),
            },
            Value::String(text) => parse_int(text),
            _ => None,
        };
        parsed.map(Some).ok_or_else(|| self.wrong_type(name, "an integer", value))
    }
}

/// Python's `int(text)` for decimal text, saturating at the bounds of `i64`.
fn parse_int(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: i64 = 0;
    for c in digits.chars().filter(|c| *c != '_') {
        let digit = i64::from(c.to_digit(10)?);
        value = value.saturating_mul(10).saturating_add(digit);
    }
    Some(if negative { -value } else { value })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
