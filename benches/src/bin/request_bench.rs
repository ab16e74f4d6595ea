//! What one storage request costs the function's CPU: a warm turn makes six (docs/performance-process.md).
//!
//! On one thread with a current-thread runtime, as the turn functions run, it sends 400 of each
//! request a warm turn sends, after 50 to warm up, and reports the calling thread's CPU per request
//! (`CLOCK_THREAD_CPUTIME_ID`: the client and its connection tasks run on that thread; moto and the
//! keep-alive proxy in front of it do not): S3 `GetObject`, `GetObject` answered 304 (the catalog's
//! conditional read), `PutObject` of a small workspace file, DynamoDB `Query` of one item; each
//! through the AWS SDK clients as `aws-store` builds them, and the same `GetObject` as a plain
//! `reqwest` GET (unsigned), which is what the HTTP exchange itself costs. Each figure is the median
//! of 3 rounds. The functions' allocator is linked in.
//!
//! Run with `cargo run --release -p benches --bin request-bench` (moto_server on PATH).

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use local_stack::faults::FaultProxy;
use local_stack::moto::{create_sessions_table, sdk_config, unique_name};
use local_stack::stack::Stack;

// The functions' allocator (mimalloc) is agent-app's: linking the crate makes it this binary's too.
use agent_app as _;

/// Requests measured per kind and round, after [`WARM_UP`] unmeasured ones.
const REQUESTS: u32 = 400;
const WARM_UP: u32 = 50;
const ROUNDS: usize = 3;

/// A 600-byte object, about a skill's reference file's first lines.
const OBJECT: &str = "request-bench/object";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let (endpoint, bucket, table, _stack, _proxy) = runtime.block_on(async {
        let stack = Stack::new().await;
        // AWS keeps connections open between requests; moto's server closes each one.
        let proxy = FaultProxy::start(&stack.endpoint).await;
        stack.put(OBJECT, vec![b'x'; 600]).await;
        let table = unique_name("request-bench");
        create_sessions_table(&stack.dynamodb, &table).await;
        stack
            .dynamodb
            .put_item()
            .table_name(&table)
            .item("pk", AttributeValue::S("u#s".into()))
            .item("sk", AttributeValue::S("meta".into()))
            .item("messages", AttributeValue::S("m".repeat(600)))
            .send()
            .await
            .expect("an item");
        (proxy.endpoint.clone(), stack.bucket.clone(), table, stack, proxy)
    });
    println!("request-bench: CPU per request on the calling thread, median of {ROUNDS} rounds of {REQUESTS}");
    let mut rows: Vec<(&str, Vec<Duration>)> = Vec::new();
    for _ in 0..ROUNDS {
        let (endpoint, bucket, table) = (endpoint.clone(), bucket.clone(), table.clone());
        let round = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(round(&endpoint, &bucket, &table))
        })
        .join()
        .expect("a round");
        for (name, figure) in round {
            match rows.iter_mut().find(|(row, _)| *row == name) {
                Some((_, figures)) => figures.push(figure),
                None => rows.push((name, vec![figure])),
            }
        }
    }
    for (name, mut figures) in rows {
        figures.sort();
        println!("  {name:<44} {:>8.1} µs", figures[figures.len() / 2].as_secs_f64() * 1e6);
    }
}

/// One round: each kind of request, timed on this thread.
async fn round(endpoint: &str, bucket: &str, table: &str) -> Vec<(&'static str, Duration)> {
    let config = sdk_config(endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    let plain = reqwest::Client::new();
    let url = format!("{endpoint}/{bucket}/{OBJECT}");
    let mut figures = Vec::new();
    figures.push((
        "S3 GetObject (SDK)",
        per_request(|| async {
            let object = s3.get_object().bucket(bucket).key(OBJECT).send().await.expect("the object");
            object.body.collect().await.expect("its bytes");
        })
        .await,
    ));
    let etag = s3.head_object().bucket(bucket).key(OBJECT).send().await.expect("the object").e_tag.expect("an etag");
    figures.push((
        "S3 GetObject answered 304 (SDK)",
        per_request(|| async {
            let answer = s3.get_object().bucket(bucket).key(OBJECT).if_none_match(&etag).send().await;
            assert!(answer.is_err(), "an unchanged object is not sent again");
        })
        .await,
    ));
    figures.push((
        "S3 PutObject (SDK)",
        per_request(|| async {
            let body = aws_sdk_s3::primitives::ByteStream::from(b"Notes of the turn.\n".to_vec());
            s3.put_object().bucket(bucket).key("request-bench/put").body(body).send().await.expect("a put");
        })
        .await,
    ));
    figures.push((
        "DynamoDB Query of one item (SDK)",
        per_request(|| async {
            let page = dynamodb
                .query()
                .table_name(table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", AttributeValue::S("u#s".into()))
                .consistent_read(true)
                .send()
                .await
                .expect("a page");
            assert_eq!(page.count, 1);
        })
        .await,
    ));
    figures.push((
        "the same GET, plain reqwest (unsigned)",
        per_request(|| async {
            let response = plain.get(&url).send().await.expect("a response");
            response.bytes().await.expect("its bytes");
        })
        .await,
    ));
    figures
}

/// The calling thread's CPU per call of `request`, over [`REQUESTS`] calls after [`WARM_UP`].
async fn per_request<F, Fut>(mut request: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARM_UP {
        request().await;
    }
    let before = thread_cpu();
    for _ in 0..REQUESTS {
        request().await;
    }
    (thread_cpu() - before) / REQUESTS
}

/// The calling thread's CPU time, user and system.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
