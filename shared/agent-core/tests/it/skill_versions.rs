//! Published skills over the embedded store: numbered immutable versions, the same content making
//! no new one, the default a turn's catalog serves (promote, roll back), a folder at the same path
//! shadowed and served again, a rebuilt index keeping what is published, pins, and the bounds an
//! uploaded zip is held to.

use std::io::Write;

use agent_core::skills::index::{update_index, TenantFile};
use agent_core::skills::versions::{
    self, delete_skill, delete_version, get_version, list_versions, pinned_entry, publish, read_zip, set_default,
    SkillFileBytes, VersionError,
};
use agent_core::skills::{Resolved, SkillLibrary};
use agent_core::{ObjectStore, SkillPath, UserId};
use local_store::MemoryObjectStore;

fn skill_md(name: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {body} Use it for {name} work.\n---\n# {name}\n\n{body}\n")
}

fn files(name: &str, body: &str) -> Vec<SkillFileBytes> {
    vec![
        SkillFileBytes { path: "SKILL.md".into(), bytes: skill_md(name, body).into_bytes() },
        SkillFileBytes { path: "scripts/run.py".into(), bytes: format!("print({body:?})\n").into_bytes() },
    ]
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (path, bytes) in entries {
        writer.start_file(*path, options).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

async fn publish_files(
    store: &MemoryObjectStore,
    user: &UserId,
    skill: &SkillPath,
    files: Vec<SkillFileBytes>,
    promote: Option<bool>,
) -> Result<versions::Published, VersionError> {
    publish(store, user, skill, files, "tester", 1_700_000_000, promote, None).await
}

/// The SKILL.md a turn of `user` would load for `wanted` now.
async fn served(store: &MemoryObjectStore, user: &UserId, wanted: &str) -> Option<(String, Option<u32>)> {
    let library = SkillLibrary::new();
    let catalog = library.catalog(store, user).await.unwrap();
    let Resolved::Found(entry) = catalog.resolve(store, wanted).await.unwrap() else { return None };
    let doc = library.skill_doc(store, user, &entry).await.unwrap()?;
    Some((doc.content.to_string(), doc.version))
}

#[tokio::test]
async fn versions_are_numbered_content_named_and_the_same_content_is_one_version() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("review").unwrap();
    let first = publish_files(&store, &user, &skill, files("review", "First."), None).await.unwrap();
    assert_eq!((first.record.version, first.created, first.is_default), (1, true, true));
    // The same files in another order: no new version.
    let mut again = files("review", "First.");
    again.reverse();
    let same = publish_files(&store, &user, &skill, again, None).await.unwrap();
    assert_eq!(
        (same.record.version, same.created, same.record.sha256.as_str()),
        (1, false, first.record.sha256.as_str())
    );
    let second = publish_files(&store, &user, &skill, files("review", "Second."), None).await.unwrap();
    assert_eq!((second.record.version, second.created, second.is_default), (2, true, false));
    assert_ne!(second.record.sha256, first.record.sha256);
    let listed = list_versions(&store, &user, &skill).await.unwrap();
    assert_eq!(listed.iter().map(|r| r.version).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(listed[1].uploaded_by, "tester");
    assert_eq!(listed[1].files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["SKILL.md", "scripts/run.py"]);
    let script = versions::read_version_file(&store, &user, &listed[1], "scripts/run.py").await.unwrap();
    assert_eq!(script, b"print(\"Second.\")\n");
    let unzipped = read_zip(&versions::version_zip(&store, &user, &listed[0]).await.unwrap()).unwrap();
    assert_eq!(unzipped.len(), 2);
    assert!(matches!(get_version(&store, &user, &skill, 3).await, Err(VersionError::NotFound(_))));
}

#[tokio::test]
async fn the_default_is_what_turns_load_and_a_rollback_brings_the_old_one_back() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("docs/memo").unwrap();
    publish_files(&store, &user, &skill, files("memo", "Old text."), None).await.unwrap();
    publish_files(&store, &user, &skill, files("memo", "New text."), None).await.unwrap();
    let (text, version) = served(&store, &user, "memo").await.unwrap();
    assert!(text.contains("Old text.") && version == Some(1));
    set_default(&store, &user, &skill, 2, "tester", 1, None).await.unwrap();
    let (text, version) = served(&store, &user, "docs/memo").await.unwrap();
    assert!(text.contains("New text.") && version == Some(2));
    set_default(&store, &user, &skill, 1, "tester", 2, None).await.unwrap();
    assert_eq!(served(&store, &user, "memo").await.unwrap().1, Some(1));
    assert!(matches!(set_default(&store, &user, &skill, 9, "tester", 3, None).await, Err(VersionError::NotFound(_))));
    // The default cannot go while another version remains; another one can.
    assert!(matches!(delete_version(&store, &user, &skill, 1, None).await, Err(VersionError::Conflict(_))));
    delete_version(&store, &user, &skill, 2, None).await.unwrap();
    assert!(store.keys().iter().all(|key| !key.contains("/@v/00000002")));
    // The last version, the default, takes the skill with it.
    delete_version(&store, &user, &skill, 1, None).await.unwrap();
    assert_eq!(served(&store, &user, "memo").await, None);
}

#[tokio::test]
async fn a_published_skill_shadows_a_folder_at_its_path_until_it_is_deleted() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    store.insert("u1/skills/pdf/SKILL.md", skill_md("pdf", "From the folder."));
    store.insert("u1/skills/other/SKILL.md", skill_md("other", "Another folder skill."));
    assert!(served(&store, &user, "pdf").await.unwrap().0.contains("From the folder."));
    let skill = SkillPath::parse("pdf").unwrap();
    publish_files(&store, &user, &skill, files("pdf", "Published."), None).await.unwrap();
    assert!(served(&store, &user, "pdf").await.unwrap().0.contains("Published."));
    // A change to the folder's file does not replace the published entry.
    store.insert("u1/skills/pdf/SKILL.md", skill_md("pdf", "Folder, edited."));
    update_index(&store, &user, &[TenantFile::Skill("pdf/SKILL.md".into())], false, None).await.unwrap();
    assert!(served(&store, &user, "pdf").await.unwrap().0.contains("Published."));
    // A rebuilt index (a new format, a lost head) keeps what is published.
    store.delete("u1/catalog/index.json").await.unwrap();
    assert!(served(&store, &user, "pdf").await.unwrap().0.contains("Published."));
    assert!(served(&store, &user, "other").await.is_some());
    delete_skill(&store, &user, &skill, None).await.unwrap();
    assert!(served(&store, &user, "pdf").await.unwrap().0.contains("Folder, edited."));
    assert!(store.keys().iter().all(|key| !key.starts_with("u1/skill-versions/pdf/")));
    assert!(matches!(delete_skill(&store, &user, &skill, None).await, Err(VersionError::NotFound(_))));
}

#[tokio::test]
async fn a_pinned_version_is_loaded_and_listed_in_place_of_the_default() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("review").unwrap();
    publish_files(&store, &user, &skill, files("review", "Default one."), None).await.unwrap();
    publish_files(&store, &user, &skill, files("review", "Candidate."), None).await.unwrap();
    let library = SkillLibrary::new();
    let catalog = library.catalog(&store, &user).await.unwrap();
    let pinned = catalog.with_pins([pinned_entry(&store, &user, &skill, 2).await.unwrap()]);
    let Resolved::Found(entry) = pinned.resolve(&store, "review").await.unwrap() else { panic!("found") };
    let doc = library.skill_doc(&store, &user, &entry).await.unwrap().unwrap();
    assert!(doc.content.contains("Candidate.") && doc.version == Some(2));
    let listing = pinned.listing(&store, 4000).await.unwrap();
    assert!(listing.text.contains("Candidate. Use it for review work."), "{}", listing.text);
    assert!(!listing.text.contains("Default one."));
    // The catalog turns share is unchanged.
    assert!(catalog.listing(&store, 4000).await.unwrap().text.contains("Default one."));
    let (_, files) = pinned.skill_files(&store, &skill).await.unwrap().unwrap();
    assert_eq!(files.iter().map(|file| file.rel.as_str()).collect::<Vec<_>>(), ["scripts/run.py"]);
}

#[tokio::test]
async fn concurrent_uploads_each_get_their_own_whole_version() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("busy").unwrap();
    let bodies = ["One.", "Two.", "Three.", "Four.", "Five."];
    let uploads = bodies.iter().map(|body| publish_files(&store, &user, &skill, files("busy", body), Some(false)));
    let published = futures::future::join_all(uploads).await;
    let mut numbers: Vec<u32> = published.iter().map(|p| p.as_ref().unwrap().record.version).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    for record in list_versions(&store, &user, &skill).await.unwrap() {
        for file in &record.files {
            versions::read_version_file(&store, &user, &record, &file.path).await.unwrap();
        }
    }
}

#[tokio::test]
async fn an_upload_is_checked_before_anything_is_stored() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("review").unwrap();
    let problems = |result: Result<versions::Published, VersionError>| match result {
        Err(VersionError::Invalid(problems)) => problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
        other => panic!("expected problems, got {other:?}"),
    };
    let wrong_name = problems(publish_files(&store, &user, &skill, files("other", "Text."), None).await);
    assert!(wrong_name.contains("SKILL.md") && wrong_name.contains("\"other\""), "{wrong_name}");
    let no_description =
        vec![SkillFileBytes { path: "SKILL.md".into(), bytes: b"---\nname: review\n---\n# x\n".to_vec() }];
    assert!(problems(publish_files(&store, &user, &skill, no_description, None).await).contains("description"));
    let no_skill_md = vec![SkillFileBytes { path: "README.md".into(), bytes: b"# x\n".to_vec() }];
    assert!(problems(publish_files(&store, &user, &skill, no_skill_md, None).await).contains("no SKILL.md"));
    assert!(store.keys().is_empty(), "{:?}", store.keys());
}

#[test]
fn a_zip_is_read_within_its_bounds_and_its_names_are_checked() {
    let skill = skill_md("review", "Text.");
    // The skill's folder as the zip's one top folder; macOS's litter left out.
    let zip =
        zip_of(&[("review/SKILL.md", skill.as_bytes()), ("review/a.txt", b"a"), ("__MACOSX/review/._a.txt", b"x")]);
    let read = read_zip(&zip).unwrap();
    assert_eq!(read.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["SKILL.md", "a.txt"]);
    let refused = |entries: &[(&str, &[u8])]| match read_zip(&zip_of(entries)) {
        Err(problems) => problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"),
        Ok(files) => panic!("accepted {:?}", files.iter().map(|f| &f.path).collect::<Vec<_>>()),
    };
    assert!(refused(&[("SKILL.md", skill.as_bytes()), ("../evil.sh", b"x")]).contains("`..`"));
    assert!(refused(&[("SKILL.md", skill.as_bytes()), ("/etc/passwd", b"x")]).contains("absolute"));
    assert!(refused(&[("SKILL.md", skill.as_bytes()), ("a\\b.txt", b"x")]).contains("backslash"));
    assert!(refused(&[("SKILL.md", skill.as_bytes()), ("Notes.md", b"x"), ("notes.md", b"y")]).contains("case"));
    // The same name twice: a writer refuses to make such a zip, so one name is renamed in its bytes.
    let mut twice = zip_of(&[("SKILL.md", skill.as_bytes()), ("notes-a.md", b"x"), ("notes-b.md", b"y")]);
    for at in 0..twice.len() - 10 {
        if &twice[at..at + 10] == b"notes-b.md" {
            twice[at..at + 10].copy_from_slice(b"notes-a.md");
        }
    }
    let problems = read_zip(&twice).unwrap_err();
    assert_eq!(problems[0].file.as_deref(), Some("notes-a.md"), "{problems:?}");
    assert!(problems[0].message.contains("twice"));
    assert!(refused(&[("SKILL.md", skill.as_bytes()), (".bundle/x.tar", b"x")]).contains(".bundle"));
    // A bomb: 70 MiB of zeros that deflate to a few kilobytes.
    let zeros = vec![0u8; 70 * 1024 * 1024];
    let bomb = zip_of(&[("SKILL.md", skill.as_bytes()), ("zeros.bin", &zeros)]);
    assert!(bomb.len() < 1024 * 1024);
    assert!(read_zip(&bomb).unwrap_err()[0].message.contains("inflate to more than"));
    let many: Vec<(String, Vec<u8>)> = (0..2000).map(|i| (format!("f{i}.txt"), vec![b'x'])).collect();
    let many: Vec<(&str, &[u8])> = many.iter().map(|(p, b)| (p.as_str(), b.as_slice())).collect();
    assert!(read_zip(&zip_of(&many)).unwrap_err()[0].message.contains("2000 entries"));
    assert!(read_zip(b"not a zip").unwrap_err()[0].message.contains("not a readable zip"));
    // A symbolic link, however it is named.
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    writer.start_file("SKILL.md", options).unwrap();
    writer.write_all(skill.as_bytes()).unwrap();
    writer.add_symlink("link", "/etc/passwd", options).unwrap();
    let linked = writer.finish().unwrap().into_inner();
    assert!(read_zip(&linked).unwrap_err()[0].message.contains("symbolic link"));
}

#[tokio::test]
async fn a_bundle_written_after_a_version_joins_its_files() {
    let store = MemoryObjectStore::new();
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("review").unwrap();
    let published = publish_files(&store, &user, &skill, files("review", "Text."), None).await.unwrap();
    let sha = published.record.sha256.clone();
    let marker = format!("u1/skill-versions/review/@files/{sha}/.bundle/unmet/rdkit");
    store.insert(&marker, Vec::new());
    update_index(&store, &user, &[TenantFile::Version(skill.clone(), sha)], false, None).await.unwrap();
    let library = SkillLibrary::new();
    let catalog = library.catalog(&store, &user).await.unwrap();
    let entry = catalog.get(&store, &skill).await.unwrap().unwrap();
    assert_eq!(entry.unmet_needs, ["rdkit"]);
}

/// A promote while a turn is between loading a skill and reading its files: the turn goes on with
/// the version it loaded (its SKILL.md and its files), and the next turn gets the new one.
#[tokio::test]
async fn a_promote_racing_a_turn_never_mixes_two_versions_files() {
    use std::sync::Arc;

    use agent_core::turn::{AgentConfig, OffsetDateTime, TurnRequest, TurnService};
    use agent_core::{ChatResponse, Message, SessionId, ToolCall};
    use agent_ports::testing::FnModel;
    use local_store::MemorySessionStore;
    use serde_json::json;

    let objects = Arc::new(MemoryObjectStore::new());
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("review").unwrap();
    for body in ["First.", "Second."] {
        let mut files = files("review", body);
        files.push(SkillFileBytes { path: "notes.md".into(), bytes: format!("notes of {body}").into_bytes() });
        publish(objects.as_ref(), &user, &skill, files, "tester", 1, None, None).await.unwrap();
    }
    let gate = Arc::new(tokio::sync::Notify::new());
    let model = Arc::new(
        FnModel::new(|request| {
            let call = |name: &str, arguments| ToolCall { id: name.into(), name: name.into(), arguments };
            Ok(match request.messages.last() {
                Some(Message::User { .. }) => {
                    ChatResponse::calling(vec![call("load_skill", json!({"skill_path": "review"}))])
                }
                Some(Message::Tool { name, .. }) if name == "load_skill" => {
                    ChatResponse::calling(vec![call("read_file", json!({"file_path": "/skills/review/notes.md"}))])
                }
                _ => ChatResponse::text("done"),
            })
        })
        .held(gate.clone()),
    );
    let sessions = Arc::new(MemorySessionStore::new());
    let service = Arc::new(TurnService::new(sessions, objects.clone(), model.clone(), AgentConfig::default()));
    let request = |session: &str| {
        TurnRequest::new(user.clone(), SessionId::parse(session).unwrap(), "review this", OffsetDateTime::now_utc())
    };
    let racing = tokio::spawn({
        let (service, request) = (service.clone(), request("racing"));
        async move { service.run_turn(request).await }
    });
    // The first call loads version 1; the promote lands while the second call is in flight.
    gate.notify_one();
    while model.calls() < 2 {
        tokio::task::yield_now().await;
    }
    set_default(objects.as_ref(), &user, &skill, 2, "tester", 2, None).await.unwrap();
    gate.notify_one();
    gate.notify_one();
    let reply = racing.await.unwrap().unwrap();
    assert_eq!(reply.skill_versions.get("review"), Some(&1));
    let requests = model.requests();
    let read = requests.last().unwrap().messages.last().unwrap().clone();
    let Message::Tool { content, .. } = read else { panic!("the read's result: {read:?}") };
    assert!(content.contains("notes of First.") && !content.contains("Second"), "{content}");
    assert!(requests.last().unwrap().system.contains("First.") && !requests.last().unwrap().system.contains("Second."));
    // The next turn is served the new default, its SKILL.md and its files.
    let next = tokio::spawn({
        let (service, request) = (service.clone(), request("after"));
        async move { service.run_turn(request).await }
    });
    // A permit per call as each comes (a `Notify` keeps at most one waiting).
    while !next.is_finished() {
        gate.notify_one();
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(next.await.unwrap().unwrap().skill_versions.get("review"), Some(&2));
    let read = model.requests().last().unwrap().messages.last().unwrap().clone();
    assert!(matches!(read, Message::Tool { content, .. } if content.contains("notes of Second.")));
}
