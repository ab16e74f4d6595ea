//! The local backend: the handler run in this process under bubblewrap. Every call goes through the
//! wire form and its JSON on purpose, so the local backend runs exactly the Lambda function's code.

use std::path::{Path, PathBuf};

use agent_ports::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxLayout};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::bundles::{self, BundleSource};
use crate::handler::{self, bundle, Config, HandlerError, Isolation};
use crate::wire::{WireError, WireRequest, WireResponse};

/// Commands run at once; more wait their turn.
pub const LOCAL_CONCURRENCY: usize = 2;

/// Runs commands on this machine, isolated by bubblewrap.
pub struct LocalSandbox {
    config: Config,
    permits: Semaphore,
    bundles: Option<BundleSource>,
}

impl LocalSandbox {
    /// A backend over `config`, unchecked.
    pub fn new(config: Config) -> Self {
        Self { config, permits: Semaphore::new(LOCAL_CONCURRENCY), bundles: None }
    }

    /// Installs the skills' bundles it lacks from `bundles`, those the runtime signed for the
    /// call's tenant only (without it, no bundle is installed or used).
    pub fn with_bundles(mut self, bundles: BundleSource) -> Self {
        self.bundles = Some(bundles);
        self
    }

    /// The backend as the environment configures it: `SANDBOX_ROOT`, the sandbox image's root
    /// filesystem (`cargo xtask sandbox image` builds it and prints its path; required, so that no
    /// command ever runs on the host's own tools), `SANDBOX_SCRATCH_DIR` (default
    /// `/tmp/agent-sandbox`), `SANDBOX_CALL_MEMORY_MIB` (the memory of one call, all its processes
    /// together; default 2048), and bubblewrap from `PATH` or `/usr/bin/bwrap`. Runs `true` once in
    /// the sandbox (blocking for a few milliseconds) and says clearly what is missing when that fails.
    pub fn from_env() -> Result<Self, String> {
        let bwrap = find_bwrap().ok_or_else(|| {
            "the local sandbox needs bubblewrap (apt-get install bubblewrap): no bwrap on PATH or at /usr/bin/bwrap"
                .to_owned()
        })?;
        // bwrap binds absolute paths only.
        let absolute = |name: &str, dir: std::ffi::OsString| {
            std::path::absolute(&dir).map_err(|err| format!("{name}={}: {err}", dir.to_string_lossy()))
        };
        let root = std::env::var_os("SANDBOX_ROOT").filter(|dir| !dir.is_empty()).ok_or_else(|| {
            "the local sandbox needs the sandbox image: set SANDBOX_ROOT to the root filesystem that \
             `cargo xtask sandbox image` builds and prints"
                .to_owned()
        })?;
        let root = absolute("SANDBOX_ROOT", root)?;
        if !root.join("usr/bin/bash").is_file() {
            return Err(format!(
                "SANDBOX_ROOT={} is not the sandbox image's root filesystem (no usr/bin/bash in it)",
                root.display()
            ));
        }
        let mut config = Config::local_default(bwrap, root);
        if let Some(dir) = std::env::var_os("SANDBOX_SCRATCH_DIR").filter(|dir| !dir.is_empty()) {
            config.scratch_base = absolute("SANDBOX_SCRATCH_DIR", dir)?;
        }
        if let Some(dir) = std::env::var_os("SANDBOX_BUNDLE_DIR").filter(|dir| !dir.is_empty()) {
            config.bundle_dir = absolute("SANDBOX_BUNDLE_DIR", dir)?;
        }
        if let Ok(bytes) = std::env::var("SANDBOX_BUNDLE_BYTES") {
            if !bytes.trim().is_empty() {
                config.bundle_bytes = handler::parse_bundle_bytes(&bytes)?;
            }
        }
        if let Some(mib) = std::env::var("SANDBOX_CALL_MEMORY_MIB").ok().filter(|mib| !mib.trim().is_empty()) {
            config.limits.call_memory_bytes = mib
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|mib| (64..=1 << 20).contains(mib))
                .map(|mib| mib << 20)
                .ok_or_else(|| format!("SANDBOX_CALL_MEMORY_MIB={mib} must be a number of MiB from 64 to 1048576"))?;
        }
        let sandbox = Self::new(config);
        sandbox.check()?;
        Ok(sandbox)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Runs `true` in the sandbox: bubblewrap, namespaces, the uid switch and the mounts all work.
    pub fn check(&self) -> Result<(), String> {
        let request = WireRequest {
            tenant: "self-check".into(),
            session: "self-check".into(),
            command: "true".into(),
            timeout_ms: 10_000,
            workspace: vec![],
            skills: vec![],
            ticket: None,
        };
        let bwrap = match &self.config.isolation {
            Isolation::Bwrap { bwrap, .. } => bwrap.display().to_string(),
            Isolation::Process => "a plain process".to_owned(),
        };
        let hint = "bubblewrap needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or \
                    kernel.apparmor_restrict_unprivileged_userns=0), and the scratch folder and the image's root \
                    must be readable by every user";
        match handler::run_blocking(&self.config, request) {
            Ok(response) if response.exit_code == Some(0) => Ok(()),
            Ok(response) => Err(format!(
                "the local sandbox's self-check ({bwrap} ... true) failed ({:?}): {}; {hint}",
                response.exit_code,
                response.output.trim()
            )),
            Err(err) => Err(format!("the local sandbox's self-check ({bwrap} ... true) failed: {err}; {hint}")),
        }
    }
}

/// `bwrap` on `PATH`, else `/usr/bin/bwrap`.
fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("bwrap"))
        .chain([PathBuf::from("/usr/bin/bwrap")])
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Serialises and parses back, as the Lambda invocation would.
fn through_json<T: Serialize + DeserializeOwned>(value: &T) -> Result<T, String> {
    let json = serde_json::to_vec(value).map_err(|err| format!("could not serialise: {err}"))?;
    serde_json::from_slice(&json).map_err(|err| format!("could not parse: {err}"))
}

fn unavailable(detail: String) -> SandboxError {
    tracing::warn!(sandbox = "local", error = %detail, "the sandbox call failed");
    SandboxError::Unavailable(detail)
}

#[async_trait]
impl Sandbox for LocalSandbox {
    fn layout(&self) -> SandboxLayout {
        self.config.layout()
    }

    fn name(&self) -> &'static str {
        "local"
    }

    async fn execute(&self, mut request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        // Before the handler hears of them: a bundle the runtime did not sign is neither used nor installed.
        let note = bundles::admit(self.bundles.as_ref(), &mut request);
        let _permit = self.permits.acquire().await.map_err(|err| unavailable(err.to_string()))?;
        let event = || through_json(&WireRequest::from_exec(&request)).map_err(unavailable);
        let mut ran = handler::run(&self.config, event()?).await;
        // Bundles this machine lacks are installed once, then the call runs as it would have.
        if let Err(HandlerError::MissingBundles(missing)) = &ran {
            let source = self.bundles.as_ref().ok_or_else(|| {
                unavailable("a skill has a bundle and this sandbox has no store to read it from".to_owned())
            })?;
            for sha256 in missing {
                let (_, bytes) = source.fetch(&request, sha256).await?;
                let (config, tenant, sha256) =
                    (self.config.clone(), request.tenant.as_str().to_owned(), sha256.clone());
                let installed = tokio::task::spawn_blocking(move || bundle::install(&config, &tenant, &sha256, &bytes))
                    .await
                    .map_err(|err| unavailable(format!("the bundle install task failed: {err}")))?;
                match installed {
                    Ok(done) => tracing::info!(
                        sandbox = "local",
                        took_ms = done.map(|done| done.took.as_millis() as u64),
                        "installed a skill's bundle"
                    ),
                    Err(HandlerError::BadBundle(reason)) => return Err(SandboxError::Bundle(reason)),
                    Err(err) => return Err(unavailable(err.to_string())),
                }
            }
            // The event is built again rather than kept: the common call, with no bundle to install, copies nothing.
            ran = handler::run(&self.config, event()?).await;
        }
        match ran {
            Ok(response) => {
                let response: WireResponse = through_json(&response).map_err(unavailable)?;
                response.into_outcome().map_err(unavailable).map(|outcome| bundles::with_note(outcome, note))
            }
            Err(err) => {
                let error = through_json(&WireError::from(&err)).map_err(unavailable)?;
                match (err, error.into_sandbox_error()) {
                    (HandlerError::TooLarge { .. }, too_large @ SandboxError::TooLarge { .. }) => Err(too_large),
                    (_, SandboxError::Unavailable(detail)) => Err(unavailable(detail)),
                    (_, other) => Err(other),
                }
            }
        }
    }
}
