//! Concurrent uploads of one skill, each to an instance of its own (a Lambda function runs one
//! invocation at a time; concurrent requests reach concurrent instances): each gets a version
//! number of its own, and every version's record names files that are all there with its hashes.
//! The core's `publish` is also raced harder, eight at once over the S3 store itself.

use std::collections::{BTreeMap, BTreeSet};

use agent_core::ids::{SkillPath, UserId};
use agent_core::keys;
use agent_core::skills::versions::{self, SkillFileBytes};
use aws_store::S3ObjectStore;
use futures::future::join_all;
use local_stack::lambda::Function;
use local_stack::stack::Stack;

use super::{get, poderes, sha256_hex, text, upload, versions, zip_of, OWNER, SKILL};

const UPLOADS: usize = 4;
/// Files besides SKILL.md in each upload: enough that the uploads' writes overlap.
const EXTRA_FILES: usize = 24;

/// Upload `index`'s files: its own SKILL.md and reference files whose bytes differ from the others'.
fn files_of(index: usize) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![("SKILL.md".to_owned(), poderes(&format!("Subida concurrente número {index}.")).into_bytes())];
    for file in 0..EXTRA_FILES {
        let text = format!("# Referencia {file}\n\nDe la subida {index}.\n{}", "texto de relleno ".repeat(64));
        files.push((format!("referencias/r{file:02}.md"), text.into_bytes()));
    }
    files
}

#[tokio::test]
async fn concurrent_uploads_of_one_skill_get_distinct_versions_and_no_version_is_torn() {
    let stack = Stack::new().await;
    let instances: Vec<Function> = join_all((0..UPLOADS).map(|_| stack.http(&[]))).await;
    let uploads: Vec<Vec<(String, Vec<u8>)>> = (0..UPLOADS).map(files_of).collect();
    let zips: Vec<Vec<u8>> = uploads
        .iter()
        .map(|files| zip_of(&files.iter().map(|(path, bytes)| (path.as_str(), bytes.as_slice())).collect::<Vec<_>>()))
        .collect();

    let answers = join_all(instances.iter().zip(&zips).map(|(http, zip)| upload(http, OWNER, SKILL, zip, None))).await;
    let mut by_version: BTreeMap<u64, usize> = BTreeMap::new();
    let mut said_default = BTreeSet::new();
    for (index, answer) in answers.iter().enumerate() {
        assert_eq!(answer.status, 201, "upload {index}: {}", text(answer));
        let body = answer.json();
        let version = body["version"].as_u64().expect("a version");
        assert!(by_version.insert(version, index).is_none(), "version {version} given twice");
        assert_eq!(body["created"], true);
        if body["default"] == true {
            said_default.insert(version);
        }
    }
    assert_eq!(by_version.keys().copied().collect::<Vec<_>>(), (1..=UPLOADS as u64).collect::<Vec<_>>());

    // The default is one of them, one whose upload said it was.
    let http = &instances[0];
    let listed = versions(http, OWNER, SKILL).await.json();
    assert_eq!(listed["versions"].as_array().map(Vec::len), Some(UPLOADS), "{listed}");
    let default = listed["default"].as_u64().expect("a default");
    assert!(said_default.contains(&default), "default {default}, said so: {said_default:?}");

    // Every version is exactly one upload's files: listed with their hashes, each object there
    // with those bytes, and served back as uploaded.
    let user = UserId::parse(OWNER).unwrap();
    let skill = SkillPath::parse(SKILL).unwrap();
    for (version, index) in &by_version {
        let read = get(http, OWNER, SKILL, &format!("/versions/{version}")).await;
        assert_eq!(read.status, 200, "{}", text(&read));
        let read = read.json();
        let expected: BTreeMap<String, Vec<u8>> = uploads[*index].iter().cloned().collect();
        let listed: BTreeMap<String, String> = read["file_list"]
            .as_array()
            .expect("file_list")
            .iter()
            .map(|file| (file["path"].as_str().unwrap().to_owned(), file["sha256"].as_str().unwrap().to_owned()))
            .collect();
        let wanted: BTreeMap<String, String> =
            expected.iter().map(|(path, bytes)| (path.clone(), sha256_hex(bytes))).collect();
        assert_eq!(listed, wanted, "version {version} names upload {index}'s files");
        let sha256 = read["sha256"].as_str().expect("sha256");
        let prefix = keys::skill_version_files_prefix(&user, &skill, sha256);
        for (path, bytes) in &expected {
            let stored = stack.get(&format!("{prefix}{path}")).await;
            assert!(stored.as_deref() == Some(bytes.as_slice()), "version {version}: {path} is stored whole");
        }
        let served = get(http, OWNER, SKILL, &format!("/versions/{version}/files/SKILL.md")).await;
        assert_eq!((served.status, &served.bytes), (200, &expected["SKILL.md"]), "{}", text(&served));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_publishes_over_s3_each_claim_a_number_of_their_own() {
    const RACERS: usize = 8;
    let stack = Stack::new().await;
    let store = S3ObjectStore::new(stack.s3.clone(), stack.bucket.clone());
    let user = UserId::parse(OWNER).unwrap();
    let skill = SkillPath::parse(SKILL).unwrap();
    let uploads: Vec<Vec<(String, Vec<u8>)>> = (0..RACERS).map(files_of).collect();
    let published = join_all(uploads.iter().map(|files| {
        let files: Vec<SkillFileBytes> =
            files.iter().map(|(path, bytes)| SkillFileBytes { path: path.clone(), bytes: bytes.clone() }).collect();
        versions::publish(&store, &user, &skill, files, OWNER, 1_800_000_000, None, None)
    }))
    .await;
    let mut by_version = BTreeMap::new();
    for (index, result) in published.into_iter().enumerate() {
        let published = result.unwrap_or_else(|err| panic!("publish {index}: {err}"));
        assert!(published.created, "upload {index} made a version");
        assert!(by_version.insert(published.record.version, index).is_none(), "a number given twice");
    }
    assert_eq!(by_version.keys().copied().collect::<Vec<_>>(), (1..=RACERS as u32).collect::<Vec<_>>());

    let records = versions::list_versions(&store, &user, &skill).await.expect("list");
    assert_eq!(records.len(), RACERS);
    for record in &records {
        let index = by_version[&record.version];
        for (path, bytes) in &uploads[index] {
            let read = versions::read_version_file(&store, &user, record, path).await;
            assert!(read.as_ref().is_ok_and(|read| read == bytes), "version {}: {path}", record.version);
        }
        assert_eq!(record.files.len(), uploads[index].len(), "version {} names only its files", record.version);
    }
    let (defaults, _) = versions::defaults(&store, &user).await.expect("defaults");
    let default = defaults.skills.get(SKILL).expect("a default").version;
    assert!(by_version.contains_key(&default), "the default is one of them: {default}");
}
