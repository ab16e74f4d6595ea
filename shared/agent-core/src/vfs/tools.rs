//! The seven file tools as the model sees them (names and arguments as LangChain deepagents'
//! filesystem tools) and their dispatch onto a [`Vfs`].

use serde_json::{json, Map, Value};

use super::{
    Vfs, VfsError, DEFAULT_READ_LIMIT, MAX_FILE_BYTES, MAX_GREP_MATCHES, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES,
};
use crate::message::ToolSpec;

/// The file tools' names, as offered to the model.
pub const FILE_TOOL_NAMES: [&str; 7] = ["ls", "read_file", "write_file", "edit_file", "delete_file", "glob", "grep"];

const ROOTS: &str = "The filesystem has up to three roots: /workspace (your private read-write \
    scratch space for this conversation), /ticket (read-only files of the current ticket, when there is one) \
    and /skills (read-only; only the skills you have loaded appear there, as /skills/<name>). \
    Paths must be absolute.";

/// Specs of the seven file tools for the model (deepagents' six and `delete_file`).
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
                "Lists a directory: one absolute path per line, directories ending in '/', files with their \
                 size. Start with ls(\"/\") to see which roots exist. {ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Absolute path of the directory to list, e.g. \"/\" or \"/workspace\"."}
                },
                "required": ["path"]
            }),
        ),
        spec(
            "read_file",
            format!(
                "Reads a text file. The result is numbered like `cat -n` (line number, tab, line). By default \
                 up to {DEFAULT_READ_LIMIT} lines from the start; for long files page with offset and limit. \
                 Binary files (PDFs, images) cannot be read. {ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path of the file, e.g. \"/skills/compraventa/SKILL.md\"."},
                    "offset": {"type": "integer", "minimum": 0, "description": "0-based line to start from (default 0)."},
                    "limit": {"type": "integer", "minimum": 1, "description": format!("Maximum number of lines to read (default {DEFAULT_READ_LIMIT}).")}
                },
                "required": ["file_path"]
            }),
        ),
        spec(
            "write_file",
            format!(
                "Creates a new text file under /workspace (parent directories are implied). It fails if the \
                 file already exists: use edit_file to change an existing file. At most {MAX_FILE_BYTES} bytes \
                 a file; /workspace holds at most {MAX_WORKSPACE_FILES} files and {} MiB in all.",
                MAX_WORKSPACE_BYTES / (1024 * 1024)
            ),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path of the new file, under /workspace, e.g. \"/workspace/borrador.md\"."},
                    "content": {"type": "string", "description": "The whole content of the file."}
                },
                "required": ["file_path", "content"]
            }),
        ),
        spec(
            "edit_file",
            "Replaces an exact string in a file under /workspace. old_string must occur exactly once, \
             unless replace_all is true; include surrounding text to make it unique. Read the file first \
             so old_string matches it character for character (without the line-number prefix)."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path of the file, under /workspace."},
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The text to put in its place."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                },
                "required": ["file_path", "old_string", "new_string"]
            }),
        ),
        spec(
            "delete_file",
            "Deletes a file under /workspace, for instance to make room when the workspace is full.".to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Absolute path of the file, under /workspace."}
                },
                "required": ["file_path"]
            }),
        ),
        spec(
            "glob",
            format!(
                "Finds files whose path matches a glob pattern such as \"**/*.md\" (`*` stays within one \
                 directory, `**` crosses directories). The pattern is relative to `path`, or absolute if it \
                 starts with '/'. Returns matching absolute paths, one per line. {ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, e.g. \"**/*.md\"."},
                    "path": {"type": "string", "description": "Absolute directory to search from (default \"/\", every root)."}
                },
                "required": ["pattern"]
            }),
        ),
        spec(
            "grep",
            format!(
                "Searches text files for lines matching a regular expression. Returns `path:line_number:line` \
                 per match (at most {MAX_GREP_MATCHES}); binary files are skipped. {ROOTS}"
            ),
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax), e.g. \"(?i)cl[aá]usula\"."},
                    "path": {"type": "string", "description": "Absolute file or directory to search (default \"/\", every root)."},
                    "glob": {"type": "string", "description": "Only search files matching this glob, e.g. \"*.md\" (a pattern without '/' matches the file name)."}
                },
                "required": ["pattern"]
            }),
        ),
    ]
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
            let offset = args.optional_usize("offset")?.unwrap_or(0);
            let limit = args.optional_usize("limit")?.unwrap_or(DEFAULT_READ_LIMIT);
            vfs.read_file(args.string("file_path")?, offset, limit).await
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
        "delete_file" => vfs.delete_file(args.string("file_path")?),
        "glob" => vfs.glob(args.string("pattern")?, args.optional_string("path")?).await,
        "grep" => {
            let glob = args.optional_string("glob")?;
            vfs.grep(args.string("pattern")?, args.optional_string("path")?, glob).await
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

    fn optional_bool(&self, name: &str) -> Result<Option<bool>, VfsError> {
        match self.get(name) {
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.wrong_type(name, "a boolean (true or false)", other)),
            None => Ok(None),
        }
    }

    fn optional_usize(&self, name: &str) -> Result<Option<usize>, VfsError> {
        let value = match self.get(name) {
            None => return Ok(None),
            Some(value) => value,
        };
        let not_integer = || self.wrong_type(name, "a non-negative integer", value);
        let Value::Number(number) = value else { return Err(not_integer()) };
        if let Some(n) = number.as_u64() {
            return Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)));
        }
        match number.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f.min(usize::MAX as f64) as usize)),
            _ => Err(VfsError::Arguments(format!(
                "argument '{name}' of {} must be a non-negative integer, got {number}",
                self.tool
            ))),
        }
    }
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
