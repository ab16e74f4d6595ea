//! Presigned uploads: the link S3 signs (length, SHA-256 and the staged tag in its signature), the
//! PUT a client makes with it, and a turn that attaches the staged file after checking its bytes.

use std::time::Duration;

use agent_core::store::ObjectStore;
use aws_store::{AwsStores, StoreSettings, STAGED_UPLOAD_TAG};
use base64::Engine;
use local_stack::model_server::Reply;
use local_stack::moto;
use local_stack::stack::{file_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};
use sha2::Digest;

use super::{attaching, call, sha256_hex, version, OWNER};

/// `POST /sessions/{session}/uploads` with `body`.
fn presign_event(user: &str, session: &str, body: Value) -> Value {
    let mut event = turn_event(Some(user), session, body);
    let path = format!("/sessions/{session}/uploads");
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event
}

/// PUTs `bytes` to a link with the headers it names; the status S3 answered.
async fn put(link: &Value, bytes: Vec<u8>) -> u16 {
    let mut request = reqwest::Client::new().put(link["url"].as_str().expect("url")).body(bytes);
    for (name, value) in link["headers"].as_object().expect("headers") {
        request = request.header(name.as_str(), value.as_str().expect("a header value"));
    }
    request.send().await.expect("PUT the upload").status().as_u16()
}

#[tokio::test]
async fn the_link_signs_the_length_the_checksum_and_the_tag_and_nothing_else() {
    let endpoint = moto::moto().endpoint.clone();
    let settings = StoreSettings {
        sessions_table: moto::unique_name("sessions"),
        skills_bucket: moto::unique_name("skills"),
        session_ttl_days: 1,
        s3_force_path_style: true,
    };
    let stores = AwsStores::from_sdk_config(&moto::sdk_config(&endpoint).await, &settings, None);
    moto::create_bucket(stores.objects.client(), &settings.skills_bucket).await;
    let bytes = b"escritura de compraventa".to_vec();
    let digest = sha2::Sha256::digest(&bytes);
    let key = "user-up/uploads/s1/abc";
    let link = stores
        .objects
        .presign_put(key, bytes.len() as u64, &hex::encode(digest), Duration::from_secs(900))
        .await
        .unwrap()
        .expect("S3 makes links");
    // Exactly what the client must send: no CRC32 or other checksum the SDK might add.
    let (tag, value) = STAGED_UPLOAD_TAG;
    let expected = vec![
        ("content-length".to_owned(), bytes.len().to_string()),
        ("x-amz-checksum-sha256".to_owned(), base64::engine::general_purpose::STANDARD.encode(digest)),
        ("x-amz-tagging".to_owned(), format!("{tag}={value}")),
    ];
    assert_eq!(link.headers, expected);
    assert!(
        link.url.contains("X-Amz-SignedHeaders=content-length%3Bhost%3Bx-amz-checksum-sha256%3Bx-amz-tagging"),
        "{}",
        link.url
    );
    assert!(link.url.contains("X-Amz-Expires=900") && link.url.starts_with(&endpoint), "{}", link.url);

    let mut request = reqwest::Client::new().put(&link.url).body(bytes.clone());
    for (name, value) in &link.headers {
        request = request.header(name, value);
    }
    assert_eq!(request.send().await.unwrap().status(), 200);
    assert_eq!(stores.objects.get(key).await.unwrap().expect("stored").bytes, bytes);
    let tags = stores.objects.client().get_object_tagging().bucket(&settings.skills_bucket).key(key).send().await;
    let tags: Vec<(String, String)> =
        tags.unwrap().tag_set().iter().map(|t| (t.key().to_owned(), t.value().to_owned())).collect();
    assert_eq!(tags, vec![(tag.to_owned(), value.to_owned())], "the lifecycle rule finds it by this tag");
    // moto 5.2 checks neither the signature nor the checksum: a PUT of other bytes, or of another
    // length, is stored too (S3 answers 400 BadDigest and 403 SignatureDoesNotMatch). The attach
    // step checks the length and the hash again, which the next test relies on.
}

#[tokio::test]
async fn a_presigned_upload_is_attached_once_its_bytes_match_the_declared_sha256() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let notes = "Datos del piso: 80 m², calle Mayor 3, Madrid.\n".repeat(50).into_bytes();
    let sha = sha256_hex(&notes);

    let asked =
        call(&http, presign_event(OWNER, "s1", json!({"name": "notas/datos.txt", "size": notes.len(), "sha256": sha})))
            .await;
    assert_eq!(asked.status, 201, "{}", String::from_utf8_lossy(&asked.bytes));
    let link = asked.json();
    assert_eq!(
        (link["upload"].as_str(), link["method"].as_str(), link["expires_in"].as_u64()),
        (Some(sha.as_str()), Some("PUT"), Some(900))
    );
    assert_eq!(link["headers"]["content-length"], notes.len().to_string());
    assert!(link["url"].as_str().unwrap().starts_with(&stack.endpoint), "{link}");
    assert_eq!(put(&link, notes.clone()).await, 200);
    let staged = format!("{OWNER}/uploads/s1/{sha}");
    assert_eq!(stack.get(&staged).await.as_deref(), Some(notes.as_slice()));

    stack.model.push([Reply::text("Son los datos del piso.")]);
    let turn = turn_event(Some(OWNER), "s1", attaching("¿Qué dicen?", &[(&sha, "notas/datos.txt")]));
    let (status, body) = status_and_body(&http.call(turn).await);
    assert_eq!(status, 200, "{body}");
    let request = stack.model.requests().pop().expect("a model call").to_string();
    assert!(request.contains("/workspace/notas/datos.txt (text/plain"), "{}", &request[..request.len().min(3000)]);
    let file = call(&http, file_event(Some(OWNER), "s1", "notas/datos.txt")).await;
    assert_eq!((file.status, file.bytes == notes), (200, true));
    assert_eq!(stack.get(&staged).await, None, "the staged object is moved beside the workspace's files");

    // Declared as one file, put as another (moto does not check): the turn refuses it, deletes what
    // was staged, and changes nothing.
    let declared = b"el documento que se anuncia".to_vec();
    let sent = b"el documento que se envia!!".to_vec();
    assert_eq!(declared.len(), sent.len());
    let declared_sha = sha256_hex(&declared);
    let body = json!({"name": "doc.txt", "size": declared.len(), "sha256": declared_sha});
    let link = call(&http, presign_event(OWNER, "s1", body)).await.json();
    assert_eq!(put(&link, sent).await, 200);
    let before = version(&stack, OWNER, "s1").await;
    let turn = turn_event(Some(OWNER), "s1", attaching("mira", &[(&declared_sha, "doc.txt")]));
    let (status, body) = status_and_body(&http.call(turn).await);
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("do not have that SHA-256"), "{body}");
    assert_eq!(stack.get(&format!("{OWNER}/uploads/s1/{declared_sha}")).await, None, "the mismatch is deleted");
    assert_eq!(version(&stack, OWNER, "s1").await, before);

    // Bounds of the request itself.
    for (body, status) in [
        (json!({"name": "big.bin", "size": 10 * 1024 * 1024 + 1, "sha256": sha}), 413),
        (json!({"name": "empty.bin", "size": 0, "sha256": sha}), 400),
        (json!({"name": "a.bin", "size": 5, "sha256": "xyz"}), 400),
        (json!({"name": "../a.bin", "size": 5, "sha256": sha}), 400),
        (json!({"name": "a.bin", "size": 5, "sha256": sha, "user_id": "x"}), 400),
    ] {
        let answer = call(&http, presign_event(OWNER, "s1", body.clone())).await;
        assert_eq!(answer.status, status, "{body}: {}", String::from_utf8_lossy(&answer.bytes));
    }
}
