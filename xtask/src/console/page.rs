//! The console's page: built from `console/` with npm on first use (and again when its sources
//! change), then served from memory, so no request path ever reaches the file system.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The sources whose change calls for a new build.
const SOURCES: [&str; 5] = ["src", "index.html", "package.json", "vite.config.ts", "tsconfig.json"];
/// A built page is a few files of tens of kilobytes; anything far larger is not ours.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Installs the locked dependencies when `node_modules` is missing or older than the lockfile, and
/// builds the page when `dist/` is missing or older than a source.
pub fn build(root: &Path) -> Result<(), String> {
    let console = root.join("console");
    let installed = modified(&console.join("node_modules/.package-lock.json"));
    if installed.is_none() || installed < modified(&console.join("package-lock.json")) {
        npm(&console, &["ci", "--no-audit", "--no-fund"])?;
    }
    let built = modified(&console.join("dist/index.html"));
    let newest_source = SOURCES.iter().filter_map(|source| newest(&console.join(source))).max();
    if built.is_none() || built < newest_source {
        npm(&console, &["run", "build"])?;
    }
    Ok(())
}

pub fn npm(console: &Path, args: &[&str]) -> Result<(), String> {
    eprintln!("$ (cd console && npm {})", args.join(" "));
    let status = std::process::Command::new("npm")
        .args(args)
        .current_dir(console)
        .status()
        .map_err(|err| format!("could not run npm ({err}): the console's page is built with Node.js 20 and npm"))?;
    status.success().then_some(()).ok_or_else(|| format!("`npm {}` failed ({status})", args.join(" ")))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|metadata| metadata.modified()).ok()
}

/// The newest modification time of a file or of any file below a folder.
fn newest(path: &Path) -> Option<SystemTime> {
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_dir() {
        return metadata.modified().ok();
    }
    std::fs::read_dir(path).ok()?.flatten().filter_map(|entry| newest(&entry.path())).max()
}

/// One file of the built page.
pub struct Asset {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

/// The built page, by request path (`/`, `/assets/index-abc.js`).
pub struct Page {
    assets: HashMap<String, Asset>,
}

impl Page {
    pub fn load(root: &Path) -> Result<Self, String> {
        let dist = root.join("console/dist");
        let mut assets = HashMap::new();
        let mut folders: Vec<PathBuf> = vec![dist.clone()];
        while let Some(folder) = folders.pop() {
            let entries = std::fs::read_dir(&folder)
                .map_err(|err| format!("{}: {err} (run without --no-build to build the page)", folder.display()))?;
            for entry in entries.flatten() {
                let path = entry.path();
                let metadata = entry.metadata().map_err(|err| format!("{}: {err}", path.display()))?;
                if metadata.is_dir() {
                    folders.push(path);
                    continue;
                }
                if metadata.len() > MAX_FILE_BYTES {
                    return Err(format!("{} is {} bytes: not a built page", path.display(), metadata.len()));
                }
                let relative = path.strip_prefix(&dist).map_err(|err| err.to_string())?;
                let url = format!("/{}", relative.to_string_lossy().replace('\\', "/"));
                let bytes = std::fs::read(&path).map_err(|err| format!("{}: {err}", path.display()))?;
                assets.insert(url, Asset { content_type: content_type(&path), bytes });
            }
        }
        if !assets.contains_key("/index.html") {
            return Err(format!("{} has no index.html: build the page (`npm run build` in console/)", dist.display()));
        }
        Ok(Self { assets })
    }

    /// The asset at a request path; `/` is `index.html`.
    pub fn get(&self, path: &str) -> Option<&Asset> {
        let path = if path == "/" { "/index.html" } else { path };
        self.assets.get(path)
    }
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|extension| extension.to_str()).unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" | "map" => "application/json",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
