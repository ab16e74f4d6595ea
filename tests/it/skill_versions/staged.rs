//! A zip too large for a direct upload, staged by a presigned PUT to S3 and then published by
//! naming it: the same version as a direct upload makes, the staged object gone after; a staged
//! zip whose bytes are not the declared ones is refused and deleted.

use local_stack::lambda::Function;
use local_stack::stack::Stack;
use serde_json::{json, Value};

use super::{
    call, event, get, poderes, sha256_hex, text, with_json, zip_of, zip_styled, Answered, ZipStyle, OWNER, SKILL,
};
use zip::CompressionMethod;

/// `POST /skills/{SKILL}/versions/uploads` asking for a link.
async fn presign(http: &Function, zip: &[u8]) -> Answered {
    let body = json!({"sha256": sha256_hex(zip), "size": zip.len()});
    call(http, with_json(event(OWNER, "POST", &format!("/skills/{SKILL}/versions/uploads"), &[]), &body)).await
}

/// `POST /skills/{SKILL}/versions` publishing the staged `upload`.
async fn publish(http: &Function, upload: &str) -> Answered {
    let body = json!({"upload": upload});
    call(http, with_json(event(OWNER, "POST", &format!("/skills/{SKILL}/versions"), &[]), &body)).await
}

/// PUTs `bytes` to a link with the headers it names; the status S3 answered.
async fn put(link: &Value, bytes: Vec<u8>) -> u16 {
    let mut request = reqwest::Client::new().put(link["url"].as_str().expect("url")).body(bytes);
    for (name, value) in link["headers"].as_object().expect("headers") {
        request = request.header(name.as_str(), value.as_str().expect("a header value"));
    }
    request.send().await.expect("PUT the zip").status().as_u16()
}

/// Bytes that do not compress: a zip that holds them is as large as they are.
fn noise(size: usize, seed: u32) -> Vec<u8> {
    let mut state = seed | 1;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

#[tokio::test]
async fn a_zip_past_the_direct_bound_is_staged_with_a_presigned_put_and_then_published() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let skill_md = poderes("Publicada desde una subida firmada.");
    let data = noise(5 * 1024 * 1024, 7);
    let zip = zip_of(&[("SKILL.md", skill_md.as_bytes()), ("datos/tabla.bin", &data)]);
    let sha = sha256_hex(&zip);
    assert!(zip.len() > 4 * 1024 * 1024);

    let asked = presign(&http, &zip).await;
    assert_eq!(asked.status, 201, "{}", text(&asked));
    let link = asked.json();
    assert_eq!((link["upload"].as_str(), link["method"].as_str()), (Some(sha.as_str()), Some("PUT")), "{link}");
    assert_eq!(link["headers"]["content-length"], zip.len().to_string());
    assert_eq!(put(&link, zip.clone()).await, 200);
    let staged = format!("{OWNER}/skill-uploads/{sha}");
    assert_eq!(stack.get(&staged).await.as_deref(), Some(zip.as_slice()), "staged where the contract says");

    let published = publish(&http, &sha).await;
    assert_eq!(published.status, 201, "{}", text(&published));
    let body = published.json();
    assert_eq!(
        (body["version"].as_u64(), body["default"].as_bool(), body["created"].as_bool(), body["files"].as_u64()),
        (Some(1), Some(true), Some(true), Some(2)),
        "{body}"
    );
    assert_eq!(stack.get(&staged).await, None, "the staged zip is deleted once published");
    // Past 3 MiB a file is a 303 to a presigned link, as a workspace file is.
    let file = get(&http, OWNER, SKILL, "/versions/1/files/datos/tabla.bin").await;
    assert_eq!(file.status, 303, "{}", text(&file));
    let url = file.header("location").expect("a location").to_owned();
    let fetched = reqwest::get(&url).await.expect("follow the link");
    assert_eq!(fetched.status(), 200);
    assert!(fetched.bytes().await.expect("the linked bytes") == data, "the file comes back byte for byte");
    let read = get(&http, OWNER, SKILL, "/versions/1").await.json();
    assert_eq!(read["skill_md"].as_str(), Some(skill_md.as_str()));
    // Published once: naming the upload again finds nothing staged.
    let again = publish(&http, &sha).await;
    assert_eq!((again.status, again.code().as_str()), (400, "bad_request"), "{}", text(&again));

    // Declared as one zip, PUT as another of the same length (moto checks neither): refused when
    // published, deleted, and no version made.
    let stored = ZipStyle { method: CompressionMethod::Stored, ..ZipStyle::default() };
    let declared = zip_styled(&[("SKILL.md", poderes("Version anunciada.").as_bytes())], &stored);
    let sent = zip_styled(&[("SKILL.md", poderes("Version enviada!!.").as_bytes())], &stored);
    assert_eq!(declared.len(), sent.len());
    let declared_sha = sha256_hex(&declared);
    let link = presign(&http, &declared).await.json();
    assert_eq!(put(&link, sent).await, 200);
    let refused = publish(&http, &declared_sha).await;
    assert_eq!((refused.status, refused.code().as_str()), (400, "bad_request"), "{}", text(&refused));
    assert_eq!(stack.get(&format!("{OWNER}/skill-uploads/{declared_sha}")).await, None, "the mismatch is deleted");
    let listed = get(&http, OWNER, SKILL, "/versions").await.json();
    assert_eq!(listed["versions"].as_array().map(Vec::len), Some(1), "{listed}");

    // Bounds of the request for a link.
    for (body, status) in [
        (json!({"sha256": sha, "size": 50 * 1024 * 1024 + 1}), 413),
        (json!({"sha256": sha, "size": 0}), 400),
        (json!({"sha256": "xyz", "size": 10}), 400),
        (json!({"size": 10}), 400),
    ] {
        let sent = with_json(event(OWNER, "POST", &format!("/skills/{SKILL}/versions/uploads"), &[]), &body);
        let answer = call(&http, sent).await;
        assert_eq!(answer.status, status, "{body}: {}", text(&answer));
    }
}
