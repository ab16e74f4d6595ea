//! What showing a model an image costs a turn, over the embedded store: the CPU and storage
//! requests of a turn that attaches a 12-megapixel photo, and of the later turns whose history shows
//! it (each in a new process, each making three model calls), beside the same turns without a file.
//!
//! `cargo run --release -p benches --bin vision-bench`

use std::sync::Arc;
use std::time::Duration;

use agent_core::model::{FileInput, ImageTokens};
use agent_core::turn::{AgentConfig, Attachment, TurnService};
use agent_core::{ChatResponse, SessionId, ToolCall, UserId};
use agent_ports::testing::FnModel;
use benches::{cpu_time, request};
use image::{DynamicImage, ImageFormat, RgbImage};
use local_store::{MemoryObjectStore, MemorySessionStore};

/// Later turns measured per case.
const TURNS: u32 = 20;

/// A photo-like 4000 × 3000 JPEG: a gradient with noise, which compresses as a photo does.
fn photo() -> Vec<u8> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let image = RgbImage::from_fn(4000, 3000, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let noise = (seed % 48) as u32;
        image::Rgb([((x / 16 + noise) % 256) as u8, ((y / 12 + noise) % 256) as u8, ((x + y) / 28 % 256) as u8])
    });
    let mut bytes = std::io::Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(image).write_to(&mut bytes, ImageFormat::Jpeg).expect("encode the photo");
    bytes.into_inner()
}

/// A zero-latency model that sees images: two `ls` calls, then an answer.
fn model() -> Arc<FnModel> {
    Arc::new(
        FnModel::new(|request| {
            let calls = request.messages.iter().filter(|m| matches!(m, agent_core::Message::Tool { .. })).count();
            let step = |name: &str, arguments: serde_json::Value| {
                Ok(ChatResponse::calling(vec![ToolCall::new(format!("c{calls}"), name, arguments)]))
            };
            match calls % 3 {
                0 => step("ls", serde_json::json!({"path": "/workspace"})),
                1 => step("ls", serde_json::json!({"path": "/"})),
                _ => Ok(ChatResponse::text("done")),
            }
        })
        .keeping_no_requests()
        .seeing(FileInput::all(ImageTokens::PixelsOver750)),
    )
}

struct Figures {
    cpu: Duration,
    requests: f64,
    shown_reads: f64,
}

/// Runs `TURNS` turns of `session`, each in a new process (a new service: nothing held in memory).
async fn later_turns(objects: &Arc<MemoryObjectStore>, sessions: &Arc<MemorySessionStore>, session: &str) -> Figures {
    let user = UserId::parse("bench").unwrap();
    let (mut cpu, mut requests, mut shown) = (Duration::ZERO, 0usize, 0usize);
    for turn in 0..TURNS {
        let service = TurnService::new(sessions.clone(), objects.clone(), model(), AgentConfig::default());
        let recorded = objects.recorded().len();
        let calls = objects.calls.total() + sessions.calls.total();
        let before = cpu_time();
        service.run_turn(request(&user, session, format!("turn {turn}"))).await.expect("a turn");
        cpu += cpu_time() - before;
        requests += (objects.calls.total() + sessions.calls.total() - calls) as usize;
        shown += objects.recorded()[recorded..].iter().filter(|call| call.contains("/files/")).count();
    }
    let per = |n: usize| n as f64 / f64::from(TURNS);
    Figures { cpu: cpu / TURNS, requests: per(requests), shown_reads: per(shown) }
}

#[tokio::main]
async fn main() {
    let objects = Arc::new(MemoryObjectStore::recording());
    let sessions = Arc::new(MemorySessionStore::new());
    let user = UserId::parse("bench").unwrap();
    let photo = photo();
    let service = TurnService::new(sessions.clone(), objects.clone(), model(), AgentConfig::default());

    // The first turn of each session: one with no file, one attaching the photo.
    let before = cpu_time();
    service.run_turn(request(&user, "plain", "hello")).await.expect("a plain turn");
    let plain_first = cpu_time() - before;
    let session = SessionId::parse("photo").unwrap();
    let upload = service.upload(&user, &session, "photo.jpg", photo.clone()).await.expect("an upload");
    let calls = objects.calls.total() + sessions.calls.total();
    let mut attaching = request(&user, "photo", "what is in this photo?");
    attaching.attachments = vec![Attachment::new(&upload.upload, "photo.jpg").unwrap()];
    let before = cpu_time();
    service.run_turn(attaching).await.expect("the turn attaching the photo");
    let photo_first = cpu_time() - before;
    let photo_first_requests = objects.calls.total() + sessions.calls.total() - calls;

    let plain = later_turns(&objects, &sessions, "plain").await;
    let shown = later_turns(&objects, &sessions, "photo").await;
    println!("vision-bench: a 4000×3000 JPEG of {} bytes, {TURNS} later turns each, 3 model calls a turn", photo.len());
    println!("first turn, no file:            {:>9.2} ms CPU", plain_first.as_secs_f64() * 1000.0);
    println!(
        "first turn, attaching the photo: {:>9.2} ms CPU, {photo_first_requests} storage requests",
        photo_first.as_secs_f64() * 1000.0
    );
    println!(
        "later turn, no file:            {:>9.3} ms CPU, {:.1} storage requests",
        plain.cpu.as_secs_f64() * 1000.0,
        plain.requests
    );
    println!(
        "later turn showing the photo:   {:>9.3} ms CPU, {:.1} storage requests, {:.1} reads of the shown file",
        shown.cpu.as_secs_f64() * 1000.0,
        shown.requests,
        shown.shown_reads
    );
}
