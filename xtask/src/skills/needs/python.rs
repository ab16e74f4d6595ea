//! The Python a skill's scripts import: their `import` statements read by the image's own `ast`
//! (the same Python that will run them), the skill's own modules told apart from packages, and
//! import names mapped to the PyPI distributions that provide them.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

/// Scripts larger than this are not read: generated or vendored code, not a skill's own script.
pub(super) const MAX_SCRIPT_BYTES: u64 = 256 * 1024;
/// Scripts read per skill, at most (per language).
pub(super) const MAX_SCRIPTS: usize = 200;
/// The whole reading of every skill's scripts, at most.
const PARSE_TIMEOUT: Duration = Duration::from_secs(300);

/// Reads one JSON request a line (`id`, `source` in base64) and answers one a line with the
/// file's imports as `[module, line, optional]`. Nothing of a script runs: `ast.parse` only. An
/// import is optional inside a `try` whose handlers catch a failed import (or everything) and carry
/// on, in such a handler (a fallback), or under `if TYPE_CHECKING:`. A handler that raises or exits
/// (`except ImportError: sys.exit("pip install …")`) leaves the import required. Relative imports
/// are left out.
const IMPORTS_SCRIPT: &str = r#"
import ast, base64, json, sys

CAUGHT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
FATAL = {"exit", "_exit", "quit", "abort"}
TRIES = (ast.Try, getattr(ast, "TryStar", ast.Try))

def named(node):
    return getattr(node, "id", getattr(node, "attr", None))

def catches(handler):
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(named(kind) in CAUGHT for kind in kinds)

def gives_up(handler):
    return any(isinstance(node, ast.Raise) or isinstance(node, ast.Call) and named(node.func) in FATAL
               for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])))

def imports(tree):
    found, stack = set(), [(tree, False)]
    while stack:
        node, optional = stack.pop()
        if isinstance(node, ast.Import):
            found.update((alias.name, node.lineno, optional) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.add((node.module, node.lineno, optional))
        elif isinstance(node, TRIES):
            catching = [handler for handler in node.handlers if catches(handler)]
            guarded = optional or bool(catching) and not any(gives_up(handler) for handler in catching)
            stack += [(child, guarded) for child in node.body]
            stack += [(child, optional or handler in catching) for handler in node.handlers for child in handler.body]
            stack += [(child, optional) for part in (node.orelse, node.finalbody) for child in part]
        elif isinstance(node, ast.If) and named(node.test) == "TYPE_CHECKING":
            stack += [(child, True) for child in node.body]
            stack += [(child, optional) for child in node.orelse]
        else:
            stack += [(child, optional) for child in ast.iter_child_nodes(node)]
    return sorted(found)

for line in sys.stdin.buffer:
    request = json.loads(line)
    answer = {"id": request["id"], "imports": [], "error": None}
    try:
        answer["imports"] = imports(ast.parse(base64.b64decode(request["source"])))
    except SyntaxError as err:
        answer["error"] = "not Python 3 (%s, line %s)" % (err.msg, err.lineno)
    except Exception as err:
        answer["error"] = "could not be read (%s)" % type(err).__name__
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"#;

/// A script's import of a module, as its top-level statement names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Import {
    /// The dotted module (`google.cloud.storage`, `yaml`).
    pub module: String,
    pub line: u64,
}

/// One script read: its required imports, or why it could not be read.
pub(super) type Parsed = Result<Vec<Import>, String>;

/// The required (not optional) absolute imports of each source, by the image's Python at `root`.
pub(super) fn read_imports(root: &Path, sources: &[Vec<u8>]) -> Result<Vec<Parsed>, String> {
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let mut input = Vec::new();
    for (id, source) in sources.iter().enumerate() {
        input.extend(json!({ "id": id, "source": engine.encode(source) }).to_string().into_bytes());
        input.push(b'\n');
    }
    let output = super::image::run(root, &["python3", "-I", "-c", IMPORTS_SCRIPT], &[], input, PARSE_TIMEOUT)
        .map_err(|err| format!("reading the scripts' imports with the image's Python: {err}"))?;
    let mut parsed: Vec<Option<Parsed>> = vec![None; sources.len()];
    for line in String::from_utf8_lossy(&output).lines() {
        let answer: Value = serde_json::from_str(line).map_err(|err| format!("the import reader's answer: {err}"))?;
        let Some(slot) = answer["id"].as_u64().and_then(|id| parsed.get_mut(id as usize)) else { continue };
        *slot = Some(match answer["error"].as_str() {
            Some(error) => Err(error.to_owned()),
            None => Ok(answer["imports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|import| import[2] != true)
                .filter_map(|import| {
                    Some(Import { module: import[0].as_str()?.to_owned(), line: import[1].as_u64().unwrap_or(0) })
                })
                .collect()),
        });
    }
    Ok(parsed
        .into_iter()
        .map(|slot| slot.unwrap_or_else(|| Err("no answer from the import reader".to_owned())))
        .collect())
}

/// The names a skill's scripts can import from the skill itself: every `.py` file's stem and
/// every folder holding one (its `scripts/` too), since a script's own folder is first on its
/// `sys.path` and skills add their others. `files` are paths inside the skill.
pub(super) fn own_modules<'a>(files: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut own = BTreeSet::new();
    for file in files {
        let Some(stem) = file.strip_suffix(".py").or_else(|| file.strip_suffix(".pyw")) else { continue };
        own.extend(stem.split('/').filter(|part| !part.is_empty()).map(str::to_owned));
    }
    own
}

/// Import names whose PyPI distribution is named otherwise; dotted entries are namespace packages,
/// where only the longer name says which distribution it is.
const PYPI_NAMES: &[(&str, &str)] = &[
    ("AppKit", "pyobjc"),
    ("Bio", "biopython"),
    ("Crypto", "pycryptodome"),
    ("Cryptodome", "pycryptodomex"),
    ("Foundation", "pyobjc"),
    ("Levenshtein", "levenshtein"),
    ("MySQLdb", "mysqlclient"),
    ("OpenSSL", "pyOpenSSL"),
    ("PIL", "pillow"),
    ("Quartz", "pyobjc"),
    ("Xlib", "python-xlib"),
    ("attr", "attrs"),
    ("azure.identity", "azure-identity"),
    ("azure.storage.blob", "azure-storage-blob"),
    ("bs4", "beautifulsoup4"),
    ("bson", "pymongo"),
    ("camelot", "camelot-py"),
    ("community", "python-louvain"),
    ("crossref", "crossrefapi"),
    ("cv2", "opencv-python-headless"),
    ("dateutil", "python-dateutil"),
    ("decouple", "python-decouple"),
    ("discord", "discord.py"),
    ("dns", "dnspython"),
    ("docx", "python-docx"),
    ("dotenv", "python-dotenv"),
    ("esm", "fair-esm"),
    ("faiss", "faiss-cpu"),
    ("ffmpeg", "ffmpeg-python"),
    ("firecrawl", "firecrawl-py"),
    ("fitz", "PyMuPDF"),
    ("fpdf", "fpdf2"),
    ("gi", "PyGObject"),
    ("git", "GitPython"),
    ("github", "PyGithub"),
    ("gitlab", "python-gitlab"),
    ("google.auth", "google-auth"),
    ("google.cloud.bigquery", "google-cloud-bigquery"),
    ("google.cloud.storage", "google-cloud-storage"),
    ("google.genai", "google-genai"),
    ("google.generativeai", "google-generativeai"),
    ("google.oauth2", "google-auth"),
    ("google.protobuf", "protobuf"),
    ("google_auth_oauthlib", "google-auth-oauthlib"),
    ("googleapiclient", "google-api-python-client"),
    ("googlesearch", "googlesearch-python"),
    ("grpc", "grpcio"),
    ("hubspot", "hubspot-api-client"),
    ("jose", "python-jose"),
    ("jwt", "PyJWT"),
    ("kafka", "kafka-python"),
    ("labarchivespy", "labarchives-py"),
    ("ldap", "python-ldap"),
    ("magic", "python-magic"),
    ("markdown", "Markdown"),
    ("markdown_it", "markdown-it-py"),
    ("mp_api", "mp-api"),
    ("mpl_toolkits", "matplotlib"),
    ("multipart", "python-multipart"),
    ("nacl", "PyNaCl"),
    ("newspaper", "newspaper3k"),
    ("objc", "pyobjc"),
    ("osgeo", "GDAL"),
    ("parallel", "parallel-web"),
    ("pdfminer", "pdfminer.six"),
    ("pkg_resources", "setuptools"),
    ("pptx", "python-pptx"),
    ("psycopg2", "psycopg2-binary"),
    ("pylab", "matplotlib"),
    ("pymupdf", "PyMuPDF"),
    ("pythoncom", "pywin32"),
    ("readability", "readability-lxml"),
    ("ruamel.yaml", "ruamel.yaml"),
    ("scvi", "scvi-tools"),
    ("serial", "pyserial"),
    ("serpapi", "google-search-results"),
    ("shopify", "ShopifyAPI"),
    ("simtk", "openmm"),
    ("skimage", "scikit-image"),
    ("sklearn", "scikit-learn"),
    ("slack", "slackclient"),
    ("slugify", "python-slugify"),
    ("snowflake.connector", "snowflake-connector-python"),
    ("socks", "PySocks"),
    ("speech_recognition", "SpeechRecognition"),
    ("tabula", "tabula-py"),
    ("tavily", "tavily-python"),
    ("tdc", "PyTDC"),
    ("telegram", "python-telegram-bot"),
    ("umap", "umap-learn"),
    ("usb", "pyusb"),
    ("vertexai", "google-cloud-aiplatform"),
    ("weaviate", "weaviate-client"),
    ("whisper", "openai-whisper"),
    ("win32api", "pywin32"),
    ("win32com", "pywin32"),
    ("win32con", "pywin32"),
    ("win32gui", "pywin32"),
    ("wx", "wxPython"),
    ("yaml", "PyYAML"),
    ("zmq", "pyzmq"),
];

/// The import a dotted module counts as (its longest prefix in the table, else its top-level
/// name) and the PyPI distribution that provides it.
pub(super) fn distribution_of(module: &str) -> (String, String) {
    let parts: Vec<&str> = module.split('.').collect();
    for length in (1..=parts.len()).rev() {
        let prefix = parts[..length].join(".");
        if let Some((_, pypi)) = PYPI_NAMES.iter().find(|(import, _)| *import == prefix) {
            return (prefix, (*pypi).to_owned());
        }
    }
    let top = parts[0].to_owned();
    (top.clone(), top)
}

/// The modules a declared distribution may be imported as: its name as a module, and those the
/// table maps to it.
pub(super) fn imports_of(distribution: &str) -> Vec<String> {
    let wanted = normalize(distribution);
    let mut imports = vec![distribution.replace(['-', '.'], "_")];
    imports.extend(
        PYPI_NAMES
            .iter()
            .filter(|(import, pypi)| !import.contains('.') && normalize(pypi) == wanted)
            .map(|(import, _)| (*import).to_owned()),
    );
    imports
}

/// A distribution name as PEP 503 compares them.
pub(super) fn normalize(name: &str) -> String {
    agent_core::skills::bundle::normalize_distribution(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_names_map_to_their_distributions() {
        let pair = |module: &str| distribution_of(module);
        assert_eq!(pair("yaml"), ("yaml".to_owned(), "PyYAML".to_owned()));
        assert_eq!(pair("PIL.Image"), ("PIL".to_owned(), "pillow".to_owned()));
        assert_eq!(pair("sklearn.model_selection"), ("sklearn".to_owned(), "scikit-learn".to_owned()));
        assert_eq!(pair("docx.shared"), ("docx".to_owned(), "python-docx".to_owned()));
        assert_eq!(
            pair("google.cloud.storage.blob"),
            ("google.cloud.storage".to_owned(), "google-cloud-storage".to_owned())
        );
        assert_eq!(pair("rdkit.Chem"), ("rdkit".to_owned(), "rdkit".to_owned()));
        assert_eq!(imports_of("PyYAML"), ["PyYAML", "yaml"]);
        assert_eq!(imports_of("scikit_learn"), ["scikit_learn", "sklearn"]);
        assert_eq!(imports_of("python-dotenv"), ["python_dotenv", "dotenv"]);
        assert_eq!(imports_of("pdfminer.six"), ["pdfminer_six", "pdfminer"]);
        assert_eq!(imports_of("matplotlib"), ["matplotlib", "mpl_toolkits", "pylab"]);
        assert_eq!(imports_of("typing-extensions"), ["typing_extensions"]);
        assert_eq!(pair("tdc"), ("tdc".to_owned(), "PyTDC".to_owned()));
        assert_eq!(normalize("Foo__Bar.baz-QUX"), "foo-bar-baz-qux");
    }

    #[test]
    fn own_modules_are_every_script_and_its_folders() {
        let own =
            own_modules(["SKILL.md", "scripts/helpers.py", "scripts/office/pack.py", "lib/util.pyw", "README.md"]);
        let own: Vec<&str> = own.iter().map(String::as_str).collect();
        assert_eq!(own, ["helpers", "lib", "office", "pack", "scripts", "util"]);
    }
}
