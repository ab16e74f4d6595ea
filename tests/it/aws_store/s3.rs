//! The S3 adapter: listing past a page, missing keys and stable ETags, presigned links.

use std::time::Duration;

use agent_core::store::{ObjectStore, StoreError};
use local_stack::moto;

use super::world;

#[tokio::test]
async fn s3_list_follows_pagination_past_1000_keys() {
    let world = world().await;
    let objects = world.stores.objects.clone();
    const KEYS: usize = 1003;

    // Uploaded concurrently in bounded batches: moto handles a few dozen requests at once well.
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..KEYS {
        let objects = objects.clone();
        pending.spawn(async move { objects.put(&format!("u1/skills/cat/k{i:04}.md"), vec![b'x'; i % 7]).await });
        if pending.len() >= 32 {
            pending.join_next().await.unwrap().unwrap().unwrap();
        }
    }
    while let Some(result) = pending.join_next().await {
        result.unwrap().unwrap();
    }
    objects.put("u1/tickets/t1/a.txt", b"other prefix".to_vec()).await.unwrap();
    objects.put("u2/skills/cat/k0000.md", b"other tenant".to_vec()).await.unwrap();

    world.counter.reset();
    let listed = objects.list("u1/skills/").await.unwrap();
    // The default page is 1000 keys, so 1003 keys take exactly two ListObjectsV2 calls.
    assert_eq!(world.counter.operations().get("S3.ListObjectsV2"), Some(&2), "{:?}", world.counter.operations());
    assert_eq!(listed.len(), KEYS);
    for (i, meta) in listed.iter().enumerate() {
        assert_eq!(meta.key, format!("u1/skills/cat/k{i:04}.md"));
        assert_eq!(meta.size, (i % 7) as u64);
        assert!(!meta.etag.is_empty() && !meta.etag.contains('"'), "{:?}", meta.etag);
    }
    assert_eq!(objects.list("u2/").await.unwrap().len(), 1);
    assert!(objects.list("nobody/").await.unwrap().is_empty());
}

#[tokio::test]
async fn s3_get_of_a_missing_key_is_none_and_etags_are_stable() {
    let world = world().await;
    let objects = &world.stores.objects;
    assert_eq!(objects.get("u1/skills/none/SKILL.md").await.unwrap(), None);

    objects.put("u1/skills/a/SKILL.md", b"# A".to_vec()).await.unwrap();
    let first = objects.get("u1/skills/a/SKILL.md").await.unwrap().expect("object");
    assert_eq!(first.bytes, b"# A");
    assert!(!first.etag.is_empty() && !first.etag.contains('"'), "{:?}", first.etag);
    let listed = objects.list("u1/skills/a/").await.unwrap();
    assert_eq!(listed[0].etag, first.etag, "list and get agree on the ETag");
    assert_eq!(objects.get("u1/skills/a/SKILL.md").await.unwrap().unwrap().etag, first.etag);

    // Same bytes, same ETag; new bytes, new ETag: what the skill cache keys on.
    objects.put("u1/skills/a/SKILL.md", b"# A".to_vec()).await.unwrap();
    assert_eq!(objects.get("u1/skills/a/SKILL.md").await.unwrap().unwrap().etag, first.etag);
    objects.put("u1/skills/a/SKILL.md", b"# A, edited".to_vec()).await.unwrap();
    let edited = objects.get("u1/skills/a/SKILL.md").await.unwrap().unwrap();
    assert_ne!(edited.etag, first.etag);
    assert_eq!(edited.bytes, b"# A, edited");
}

#[tokio::test]
async fn s3_presigned_links_read_the_object_without_credentials_and_send_no_request() {
    let world = world().await;
    let objects = &world.stores.objects;
    let key = "auth0|alice/workspaces/s1/blobs/abc";
    objects.put(key, b"contenido binario \x00\xff".to_vec()).await.unwrap();
    world.counter.reset();

    let url =
        objects.presign_get(key, Duration::from_secs(300), &Default::default()).await.unwrap().expect("S3 makes links");
    assert_eq!(world.counter.total(), 0, "signing is local: {:?}", world.counter.operations());
    assert!(url.starts_with(&moto::moto().endpoint), "the configured endpoint, path-style: {url}");
    assert!(url.contains("X-Amz-Expires=300") && url.contains("X-Amz-Signature="), "{url}");
    let fetched = reqwest::get(&url).await.expect("follow the link");
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), b"contenido binario \x00\xff");

    let missing = objects
        .presign_get("auth0|alice/none", Duration::from_secs(60), &Default::default())
        .await
        .unwrap()
        .expect("a link");
    assert_eq!(reqwest::get(&missing).await.unwrap().status(), 404, "a link to nothing reads nothing");
    // Past S3's one-week maximum the SDK refuses; that is a backend error, never a panic.
    let too_long = objects.presign_get(key, Duration::from_secs(8 * 86_400), &Default::default()).await;
    assert!(matches!(too_long, Err(StoreError::Backend(_))), "{too_long:?}");
}
