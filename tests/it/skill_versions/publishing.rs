//! Publishing and reading versions: a new zip makes a version (the first one the default), the same
//! files again make none however they are zipped, a change makes the next one without promoting
//! it, and every version reads back whole: its summary, one file, and the zip it came in.

use std::collections::BTreeMap;

use local_stack::stack::Stack;
use serde_json::{json, Value};
use zip::{CompressionMethod, DateTime};

use super::{
    get, poderes, sha256_hex, stored_versions, text, unzip, upload, versions, zip_of, zip_styled, ZipStyle, OWNER,
    SKILL,
};

/// The skill's files in its first version.
fn first_files() -> Vec<(String, Vec<u8>)> {
    vec![
        ("SKILL.md".to_owned(), poderes("Primera versión: pide el DNI del poderdante.").into_bytes()),
        ("referencia/modelos.md".to_owned(), "# Modelos\n\nPoder general para pleitos.\n".as_bytes().to_vec()),
        ("scripts/plantilla.py".to_owned(), b"print('poder')\n".to_vec()),
        // Not text: served as bytes.
        ("logo.bin".to_owned(), vec![0, 159, 146, 150, 255, 0, 1]),
    ]
}

fn as_refs(files: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    files.iter().map(|(path, bytes)| (path.as_str(), bytes.as_slice())).collect()
}

/// The summary fields every answer about a version carries.
fn assert_summary(summary: &Value, version: u64, files: &[(String, Vec<u8>)], default: bool) {
    assert_eq!(summary["skill"], SKILL, "{summary}");
    assert_eq!(summary["version"].as_u64(), Some(version), "{summary}");
    assert_eq!(summary["default"].as_bool(), Some(default), "{summary}");
    assert_eq!(summary["files"].as_u64(), Some(files.len() as u64), "{summary}");
    let size: usize = files.iter().map(|(_, bytes)| bytes.len()).sum();
    assert_eq!(summary["size"].as_u64(), Some(size as u64), "{summary}");
    let sha = summary["sha256"].as_str().unwrap_or_default();
    assert!(sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()), "{summary}");
    assert_eq!(summary["uploaded_by"], OWNER, "{summary}");
    let at = summary["uploaded_at"].as_str().unwrap_or_default();
    assert!(at.len() >= 20 && at.as_bytes()[4] == b'-' && at.contains('T'), "RFC 3339: {summary}");
    for list in ["warnings", "needs", "optional_needs"] {
        assert!(summary[list].is_array(), "{list}: {summary}");
    }
}

#[tokio::test]
async fn uploads_make_numbered_versions_once_per_content_and_each_reads_back_whole() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let files = first_files();

    // The first version of a skill: 201, and its default.
    let first = upload(&http, OWNER, SKILL, &zip_of(&as_refs(&files)), None).await;
    assert_eq!(first.status, 201, "{}", text(&first));
    let published = first.json();
    assert_summary(&published, 1, &files, true);
    assert_eq!(published["created"], true, "{published}");
    let first_sha = published["sha256"].as_str().unwrap().to_owned();

    // The same files again, and zipped otherwise (other times, the other order, stored, inside the
    // skill's folder): the same version, no new one.
    let again = upload(&http, OWNER, SKILL, &zip_of(&as_refs(&files)), None).await;
    assert_eq!(again.status, 200, "{}", text(&again));
    let rezipped = zip_styled(
        &as_refs(&files),
        &ZipStyle {
            modified: DateTime::from_date_and_time(2031, 7, 2, 23, 58, 40).unwrap(),
            reversed: true,
            method: CompressionMethod::Stored,
            folder: Some("poderes"),
        },
    );
    let other_zip = upload(&http, OWNER, SKILL, &rezipped, None).await;
    assert_eq!(other_zip.status, 200, "{}", text(&other_zip));
    for same in [again.json(), other_zip.json()] {
        assert_summary(&same, 1, &files, true);
        assert_eq!((same["created"].as_bool(), same["sha256"].as_str()), (Some(false), Some(first_sha.as_str())));
    }

    // A changed SKILL.md is version 2; without `promote` the default stays 1.
    let mut changed = files.clone();
    changed[0].1 = poderes("Segunda versión: pide también el NIE.").into_bytes();
    let second = upload(&http, OWNER, SKILL, &zip_of(&as_refs(&changed)), None).await;
    assert_eq!(second.status, 201, "{}", text(&second));
    assert_summary(&second.json(), 2, &changed, false);
    assert_eq!(second.json()["created"], true);
    assert_ne!(second.json()["sha256"], json!(first_sha));

    // The list: newest first, the default named.
    let listed = versions(&http, OWNER, SKILL).await;
    assert_eq!(listed.status, 200, "{}", text(&listed));
    let listed = listed.json();
    assert_eq!((listed["skill"].as_str(), listed["default"].as_u64()), (Some(SKILL), Some(1)), "{listed}");
    let numbers: Vec<u64> =
        listed["versions"].as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [2, 1], "{listed}");
    assert_summary(&listed["versions"][0], 2, &changed, false);
    assert_summary(&listed["versions"][1], 1, &files, true);
    assert!(listed["versions"][0].get("created").is_none(), "a summary has no `created`: {listed}");

    // One version: its summary, every file with its size and hash, and its SKILL.md.
    for (number, expected) in [(1, &files), (2, &changed)] {
        let read = get(&http, OWNER, SKILL, &format!("/versions/{number}")).await;
        assert_eq!(read.status, 200, "{}", text(&read));
        let read = read.json();
        assert_summary(&read, number, expected, number == 1);
        let mut listed: Vec<(String, u64, String)> = read["file_list"]
            .as_array()
            .expect("file_list")
            .iter()
            .map(|f| {
                (
                    f["path"].as_str().unwrap().to_owned(),
                    f["size"].as_u64().unwrap(),
                    f["sha256"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        listed.sort();
        let mut want: Vec<(String, u64, String)> =
            expected.iter().map(|(path, bytes)| (path.clone(), bytes.len() as u64, sha256_hex(bytes))).collect();
        want.sort();
        assert_eq!(listed, want);
        assert_eq!(read["skill_md"].as_str().map(str::as_bytes), Some(expected[0].1.as_slice()), "{read}");
    }

    // One file: text as UTF-8 text, other bytes as bytes; only the version's own paths.
    let model = get(&http, OWNER, SKILL, "/versions/1/files/referencia/modelos.md").await;
    assert_eq!(model.status, 200, "{}", text(&model));
    assert_eq!(model.bytes, files[1].1);
    assert_eq!(model.header("content-type"), Some("text/plain; charset=utf-8"));
    let logo = get(&http, OWNER, SKILL, "/versions/2/files/logo.bin").await;
    assert_eq!((logo.status, logo.bytes.as_slice()), (200, files[3].1.as_slice()));
    assert_eq!(logo.header("content-type"), Some("application/octet-stream"));
    let skill_md = get(&http, OWNER, SKILL, "/versions/2/files/SKILL.md").await;
    assert_eq!((skill_md.status, skill_md.bytes.as_slice()), (200, changed[0].1.as_slice()));
    for missing in
        ["/versions/1/files/nada.md", "/versions/1/files/referencia", "/versions/3/files/SKILL.md", "/versions/3"]
    {
        let answer = get(&http, OWNER, SKILL, missing).await;
        assert_eq!((answer.status, answer.code().as_str()), (404, "not_found"), "{missing}: {}", text(&answer));
    }

    // The zip: named after the skill and version, and it unzips to the very files uploaded.
    for (number, expected) in [(1, &files), (2, &changed)] {
        let download = get(&http, OWNER, SKILL, &format!("/versions/{number}/zip")).await;
        assert_eq!(download.status, 200, "{}", text(&download));
        assert_eq!(download.header("content-type"), Some("application/zip"));
        assert_eq!(
            download.header("content-disposition"),
            Some(format!("attachment; filename=\"poderes-v{number}.zip\"").as_str())
        );
        let want: BTreeMap<String, Vec<u8>> = expected.iter().cloned().collect();
        assert_eq!(unzip(&download.bytes), want);
        // Uploaded again, the download is that same version.
        let back = upload(&http, OWNER, SKILL, &download.bytes, None).await;
        assert_eq!((back.status, back.json()["version"].as_u64()), (200, Some(number)), "{}", text(&back));
    }
    assert_eq!(versions(&http, OWNER, SKILL).await.json()["versions"].as_array().unwrap().len(), 2);
    assert!(!stored_versions(&stack, OWNER).await.is_empty());
}

#[tokio::test]
async fn promote_on_upload_makes_the_new_version_the_default_and_promote_false_keeps_a_first_one_unpublished() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let version = |body: &str| zip_of(&[("SKILL.md", poderes(body).as_bytes())]);

    let first = upload(&http, OWNER, SKILL, &version("uno"), None).await;
    assert_eq!((first.status, first.json()["default"].as_bool()), (201, Some(true)), "{}", text(&first));
    let second = upload(&http, OWNER, SKILL, &version("dos"), Some(true)).await;
    assert_eq!((second.status, second.json()["version"].as_u64()), (201, Some(2)), "{}", text(&second));
    assert_eq!(second.json()["default"], true, "promoted as it was published");
    assert_eq!(versions(&http, OWNER, SKILL).await.json()["default"].as_u64(), Some(2));
    // The first version again, with promote: no new version, but it is the default again.
    let back = upload(&http, OWNER, SKILL, &version("uno"), Some(true)).await;
    assert_eq!(back.status, 200, "{}", text(&back));
    assert_eq!((back.json()["version"].as_u64(), back.json()["default"].as_bool()), (Some(1), Some(true)));
    assert_eq!(versions(&http, OWNER, SKILL).await.json()["default"].as_u64(), Some(1));

    // `promote=false` on a skill's first version: stored, listed, but no default and not served.
    let draft = "notaria/borrador";
    let md = super::skill_md("borrador", "Un borrador aún sin publicar.", "cuerpo");
    let stored = upload(&http, OWNER, draft, &zip_of(&[("SKILL.md", md.as_bytes())]), Some(false)).await;
    assert_eq!((stored.status, stored.json()["default"].as_bool()), (201, Some(false)), "{}", text(&stored));
    let listed = versions(&http, OWNER, draft).await.json();
    assert_eq!((listed["default"].clone(), listed["versions"].as_array().map(Vec::len)), (Value::Null, Some(1)));
    let skills = super::listed_skills(&http, OWNER).await;
    assert!(skills.contains(&SKILL.to_owned()) && !skills.contains(&draft.to_owned()), "{skills:?}");
}
