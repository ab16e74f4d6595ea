//! What the xtask tests share: scratch folders, the compiled xtask binary run as a user runs it,
//! its report read back, and what a sync left in the bucket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use agent_core::skills::index::{decode_index, IndexHead, IndexRead};
use agent_core::store::ObjectStore;
use agent_core::UserId;
use serde_json::Value;

/// A folder of its own under the system's temporary directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xtask-skills-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a scratch folder");
        Scratch(dir)
    }

    pub fn write(&self, rel: &str, text: impl AsRef<[u8]>) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().expect("a file has a folder")).expect("create the file's folder");
        std::fs::write(&path, text).expect("write a file");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn skill_md(description: &str, extra: &str) -> String {
    format!("---\ndescription: {description}\n{extra}---\n\n# Instructions\n")
}

pub fn xtask(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_xtask"));
    command.args(args);
    for name in ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "XTASK_LOCAL_ENV", "BUNDLE_SIGNING_KEY"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().expect("run the xtask binary")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn validate_json(dir: &Path) -> (Output, Value) {
    let output = xtask(&["skills", "validate", dir.to_str().expect("UTF-8 path"), "--json"], &[]);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("the report is JSON ({err}): {}\n{}", stdout(&output), stderr(&output)));
    (output, report)
}

pub fn files_of(list: &Value) -> Vec<String> {
    list.as_array().expect("a list").iter().map(|entry| entry["file"].as_str().expect("a file").to_owned()).collect()
}

/// Every object under `prefix` with its ETag.
pub async fn etags(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> BTreeMap<String, String> {
    let listed = s3.list_objects_v2().bucket(bucket).prefix(prefix).send().await.expect("list");
    listed.contents().iter().map(|o| (o.key().unwrap().to_owned(), o.e_tag().unwrap().to_owned())).collect()
}

pub async fn head(objects: &aws_store::S3ObjectStore, user: &str) -> IndexHead {
    let user = UserId::parse(user).unwrap();
    let object = objects.get(&agent_core::keys::catalog_index_key(&user)).await.unwrap().expect("an index head");
    match decode_index(&object.bytes).unwrap() {
        IndexRead::Usable(head) => *head,
        other => panic!("unexpected index {other:?}"),
    }
}
