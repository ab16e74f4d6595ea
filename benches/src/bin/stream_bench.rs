//! The streaming benchmark: the compiled `stream-turn` function in Lambda's streaming response mode,
//! on moto, with a scripted OpenAI-compatible model that streams a 20-token answer at a known time
//! per token. For each turn it records what a Function URL's client sees first: the status and
//! headers (Lambda sends them once the prelude's delimiter is in, not at the prelude's first byte)
//! and the first event, `turn.started`; then the time from the model's first token leaving the
//! model server to its `message.delta` reaching the client (the runtime's overhead on top of the
//! model), and the turn's total time beyond the model's own.
//!
//! Run with `cargo xtask bench` (release build; needs moto_server on PATH), or alone with
//! `cargo run --release -p benches --bin stream-bench` after `cargo build --release -p stream-turn`.
//! `STREAM_BENCH_TURNS` and `STREAM_BENCH_TOKEN_MS` change the number of turns and the model's pace.

use std::time::{Duration, Instant};

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{sample_event, Stack};
use serde_json::json;

const TOKENS: usize = 20;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn percentile(values: &mut [Duration], fraction: f64) -> Duration {
    values.sort();
    let index = ((values.len() as f64 - 1.0) * fraction).round() as usize;
    values[index]
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

fn main() {
    let turns = env_number("STREAM_BENCH_TURNS", 20) as usize;
    let token = Duration::from_millis(env_number("STREAM_BENCH_TOKEN_MS", 50));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let stack = Stack::new().await;
        let identity = IdentityProvider::start().await;
        let function = Function::start("stream-turn", &stack.env(&identity.env())).await;
        stack.model.set_chunk_delay(token);
        let (mut headers, mut started, mut first_delta, mut overhead) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for turn in 0..turns {
            let words: Vec<String> = (0..TOKENS).map(|n| format!("palabra{n} ")).collect();
            stack.model.push([Reply::Chunks(words)]);
            let mut event = sample_event("stream-turn.json");
            event["rawPath"] = json!("/sessions/bench/turns");
            event["headers"]["authorization"] = json!(format!("Bearer {}", identity.token("user-bench")));
            event["body"] = json!(json!({"message": format!("Turno {turn}")}).to_string());
            let chunks_before = stack.model.sent_chunks().len();
            let sent = Instant::now();
            let mut stream = function.invoke_streaming(event, Duration::from_secs(120)).await;
            assert_eq!(stream.status().await, 200);
            let headers_at = stream.body_start().expect("the prelude's delimiter");
            let (mut started_at, mut delta_at) = (None, None);
            let mut completed = false;
            while let Some(event) = stream.next_event().await {
                match event.name.as_str() {
                    "turn.started" => started_at = Some(event.at),
                    "message.delta" if delta_at.is_none() => delta_at = Some(event.at),
                    "turn.completed" => completed = true,
                    "turn.failed" => panic!("turn {turn} failed: {}", event.data),
                    _ => {}
                }
            }
            let ended = Instant::now();
            assert!(completed, "turn {turn} did not complete");
            let chunks = stack.model.sent_chunks();
            let model_first = chunks[chunks_before];
            let model_time = token * TOKENS as u32;
            // The first turn pays the cold start (and the JWKS fetch); report warm turns.
            if turn == 0 {
                println!(
                    "cold turn: status and headers {}, turn.started {}, first delta {} after the model's first token",
                    ms(headers_at - sent),
                    ms(started_at.unwrap() - sent),
                    ms(delta_at.unwrap() - model_first)
                );
                continue;
            }
            headers.push(headers_at - sent);
            started.push(started_at.expect("turn.started") - sent);
            first_delta.push(delta_at.expect("a delta") - model_first);
            overhead.push((ended - sent).saturating_sub(model_time));
        }
        println!(
            "stream-bench: {} warm turns, a model streaming {TOKENS} tokens at {} per token ({} per answer)",
            headers.len(),
            ms(token),
            ms(token * TOKENS as u32)
        );
        println!("{:<52} {:>10} {:>10}", "", "median", "p90");
        for (name, values) in [
            ("request -> status and headers at the client", &mut headers),
            ("request -> turn.started at the client", &mut started),
            ("model's first token -> its message.delta at client", &mut first_delta),
            ("turn time beyond the model's own streaming", &mut overhead),
        ] {
            let median = percentile(values, 0.5);
            let p90 = percentile(values, 0.9);
            println!("{name:<52} {:>10} {:>10}", ms(median), ms(p90));
        }
    });
}
