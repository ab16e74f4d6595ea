//! Images and PDFs in requests: each provider sends a user's files and a tool result's files in its
//! own wire format, with the very bytes, and sends a note instead of a file the model cannot take
//! or whose bytes the request lacks.

use std::sync::Arc;

use agent_ports::{ChatModel, ChatRequest, FileBytes, FileInput, FileRef, ImageTokens, MediaType, Message, ToolCall};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use llm::{AnthropicModel, BedrockModel, FileInputSetting, LlmConfig, OpenAiModel, ProviderKind, RecordingModel};
use serde_json::{json, Value};

use crate::fixtures::Collect;
use local_stack::model_server::{ModelServer, Reply};

mod anthropic;
mod bedrock;
mod openai;

/// A valid 1×1 RGBA PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0b, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x00, 0x02, 0x00, 0x00, 0x05, 0x00, 0x01, 0x7a, 0x5e, 0xab, 0x3f, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A valid one-page PDF, its cross-reference offsets exact.
const PDF: &[u8] = concat!(
    "%PDF-1.4\n",
    "1 0 obj\n<</Type/Catalog/Pages 2 0 R>>\nendobj\n",
    "2 0 obj\n<</Type/Pages/Kids[3 0 R]/Count 1>>\nendobj\n",
    "3 0 obj\n<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>\nendobj\n",
    "xref\n0 4\n0000000000 65535 f \n0000000009 00000 n \n0000000054 00000 n \n0000000105 00000 n \n",
    "trailer\n<</Size 4/Root 1 0 R>>\nstartxref\n168\n%%EOF\n",
)
.as_bytes();

const MODEL: &str = "test-model";
const CLAUDE_ON_BEDROCK: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";

/// A file as the core shows it. The adapters look its bytes up by `sha256` and never hash them,
/// so a distinct made-up digest per file will do.
fn file(path: &str, media_type: MediaType, digit: char) -> FileRef {
    let (size, width, height, pages) = match media_type {
        MediaType::Pdf => (PDF.len(), None, None, Some(1)),
        _ => (PNG.len(), Some(1), Some(1), None),
    };
    FileRef {
        path: path.into(),
        sha256: digit.to_string().repeat(64),
        media_type,
        size: size as u64,
        width,
        height,
        pages,
    }
}

fn scan() -> FileRef {
    file("/workspace/scan.png", MediaType::Png, 'a')
}

fn deed() -> FileRef {
    file("/workspace/deed.pdf", MediaType::Pdf, 'b')
}

fn chart() -> FileRef {
    file("/workspace/out/chart.png", MediaType::Png, 'c')
}

/// The bytes of these files, by digest.
fn bytes_of(files: &[FileRef]) -> Arc<FileBytes> {
    let bytes = |file: &FileRef| if file.media_type == MediaType::Pdf { PDF } else { PNG };
    Arc::new(files.iter().map(|file| (file.sha256.clone(), Arc::from(bytes(file)))).collect())
}

/// A user's PNG and PDF, a tool call, and the tool's result showing a PNG.
fn request_with_files() -> ChatRequest {
    let plot = ToolCall::new("call_1", "read_file", json!({"path": "/workspace/out/chart.png"}));
    ChatRequest {
        messages: vec![
            Message::User { content: "Compare the scan with the deed.".into(), files: vec![scan(), deed()] },
            Message::Assistant { content: String::new(), tool_calls: vec![plot] },
            Message::Tool {
                tool_call_id: "call_1".into(),
                name: "read_file".into(),
                content: "Read /workspace/out/chart.png".into(),
                files: vec![chart()],
            },
        ],
        files: bytes_of(&[scan(), deed(), chart()]),
        ..Default::default()
    }
}

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes base64, or a `data:` URL's base64, to the bytes it carries.
fn decoded(data: &Value) -> Vec<u8> {
    let text = data.as_str().expect("a base64 string");
    let text = text.split_once(";base64,").map_or(text, |(_, data)| data);
    STANDARD.decode(text).expect("valid base64")
}

/// Sends `request` to `model` of `provider` under `setting`, buffered or streamed, and returns
/// the body the server received.
async fn sent_body(
    provider: ProviderKind,
    model: &str,
    setting: FileInputSetting,
    request: &ChatRequest,
    streamed: bool,
) -> Value {
    let server = ModelServer::start_with(vec![Reply::text("Seen.")]).await;
    let base = match provider {
        ProviderKind::OpenAi => server.base_url.clone(),
        _ => server.endpoint(),
    };
    let mut config = crate::fixtures::config(provider, base, model);
    config.api_key = Some("sk-files-test".into());
    config.file_input = setting;
    // The cache's markers are the cache tests' subject (`cache::`), not these.
    config.prompt_cache.disabled = true;
    let model: Box<dyn ChatModel> = match provider {
        ProviderKind::OpenAi => Box::new(OpenAiModel::new(&config).unwrap()),
        ProviderKind::Anthropic => Box::new(AnthropicModel::new(&config).unwrap()),
        ProviderKind::Bedrock => {
            Box::new(BedrockModel::from_sdk_config(&crate::bedrock::sdk_config(), &config).unwrap())
        }
        ProviderKind::Replay => unreachable!("replay sends nothing"),
    };
    let reply = if streamed {
        model.complete_streaming(request, &Collect::new(server.first_delta())).await
    } else {
        model.complete(request).await
    };
    assert_eq!(reply.unwrap().content, "Seen.");
    let mut received = server.received();
    assert_eq!(received.len(), 1);
    received.remove(0).body
}

fn text_only() -> FileInputSetting {
    FileInputSetting::Only { images: false, documents: false }
}

/// Streamed calls send the files as buffered ones do.
#[tokio::test]
async fn streamed_calls_carry_the_same_files() {
    let request = request_with_files();
    for (provider, model) in
        [(ProviderKind::OpenAi, MODEL), (ProviderKind::Anthropic, MODEL), (ProviderKind::Bedrock, CLAUDE_ON_BEDROCK)]
    {
        let buffered = sent_body(provider, model, FileInputSetting::Auto, &request, false).await;
        let streamed = sent_body(provider, model, FileInputSetting::Auto, &request, true).await;
        assert_eq!(streamed["messages"], buffered["messages"], "{provider}");
    }
}

/// The recording wrapper and a replay built from the configuration say what the model can be shown.
#[tokio::test]
async fn built_models_and_wrappers_tell_their_file_input() {
    let server = ModelServer::start().await;
    let mut config = crate::fixtures::config(ProviderKind::Bedrock, server.endpoint(), "meta.llama3-70b-instruct-v1:0");
    let llama = BedrockModel::from_sdk_config(&crate::bedrock::sdk_config(), &config).unwrap();
    assert_eq!(llama.file_input(), FileInput::TEXT_ONLY, "auto knows Llama on Bedrock takes no files");
    config.file_input = FileInputSetting::Only { images: true, documents: false };
    let told = BedrockModel::from_sdk_config(&crate::bedrock::sdk_config(), &config).unwrap();
    let tmp = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let recording = RecordingModel::new(Arc::new(told), tmp.join("llm-files-unused.jsonl"));
    assert_eq!(recording.file_input(), FileInput { documents: false, ..FileInput::all(ImageTokens::PixelsOver750) });

    let replay_file = tmp.join(format!("llm-files-{}.jsonl", std::process::id()));
    std::fs::write(&replay_file, "").unwrap();
    let mut replay = LlmConfig::replay(&replay_file);
    assert_eq!(llm::build(&replay).await.unwrap().file_input(), FileInput::TEXT_ONLY);
    replay.file_input = FileInputSetting::Only { images: true, documents: true };
    assert_eq!(llm::build(&replay).await.unwrap().file_input(), FileInput::all(ImageTokens::PixelsOver750));
    let _ = std::fs::remove_file(replay_file);
}
