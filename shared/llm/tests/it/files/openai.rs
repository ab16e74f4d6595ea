//! OpenAI's Chat Completions: a user message's files as `image_url` and `file` parts after its text;
//! a tool message stays text, and the files of a run of tool results follow it in one user message.

use super::*;

fn image_part(bytes: &[u8]) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(bytes))}})
}

#[tokio::test]
async fn openai_sends_a_users_png_and_pdf_as_parts() {
    let body = sent_body(ProviderKind::OpenAi, MODEL, FileInputSetting::Auto, &request_with_files(), false).await;
    let user = &body["messages"][0];
    assert_eq!(
        user,
        &json!({"role": "user", "content": [
            {"type": "text", "text": "Compare the scan with the deed."},
            image_part(PNG),
            {"type": "file", "file": {"filename": "deed.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(PDF))}}
        ]})
    );
    assert!(user["content"][1]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
    assert_eq!(decoded(&user["content"][1]["image_url"]["url"]), PNG);
    assert_eq!(decoded(&user["content"][2]["file"]["file_data"]), PDF);
}

#[tokio::test]
async fn openai_shows_tool_files_in_one_user_message_after_the_tool_run() {
    let calls = vec![
        ToolCall::new("call_1", "read_file", json!({"path": "/workspace/out/chart.png"})),
        ToolCall::new("call_2", "read_file", json!({"path": "/workspace/notes.md"})),
        ToolCall::new("call_3", "read_file", json!({"path": "/workspace/deed.pdf"})),
    ];
    let shown = |id: &str, file: FileRef| Message::Tool {
        tool_call_id: id.into(),
        name: "read_file".into(),
        content: format!("Read {}", file.path),
        files: vec![file],
    };
    let request = ChatRequest {
        system: "sys".into(),
        messages: vec![
            Message::user("Look at the chart, the notes and the deed."),
            Message::Assistant { content: String::new(), tool_calls: calls },
            shown("call_1", chart()),
            Message::tool("call_2", "read_file", "# Notes"),
            shown("call_3", deed()),
            Message::user("And?"),
        ],
        files: bytes_of(&[chart(), deed()]),
        ..Default::default()
    };
    let body = sent_body(ProviderKind::OpenAi, MODEL, FileInputSetting::Auto, &request, false).await;
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|message| message["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "tool", "user", "user"]);
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "Read /workspace/out/chart.png"})
    );
    assert_eq!(messages[4], json!({"role": "tool", "tool_call_id": "call_2", "content": "# Notes"}));
    assert_eq!(messages[5], json!({"role": "tool", "tool_call_id": "call_3", "content": "Read /workspace/deed.pdf"}));
    assert_eq!(
        messages[6]["content"],
        json!([
            {"type": "text", "text": "Files shown by the tool results above:\n\
                - /workspace/out/chart.png (image/png, from tool call call_1)\n\
                - /workspace/deed.pdf (application/pdf, from tool call call_3)"},
            image_part(PNG),
            {"type": "file", "file": {"filename": "deed.pdf", "file_data": format!("data:application/pdf;base64,{}", b64(PDF))}}
        ])
    );
    assert_eq!(decoded(&messages[6]["content"][1]["image_url"]["url"]), PNG);
    assert_eq!(decoded(&messages[6]["content"][2]["file"]["file_data"]), PDF);
    assert_eq!(messages[7], json!({"role": "user", "content": "And?"}));
}

#[tokio::test]
async fn openai_text_only_sends_notes_and_no_part() {
    let body = sent_body(ProviderKind::OpenAi, MODEL, text_only(), &request_with_files(), false).await;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "no user message follows the tool result: {body}");
    assert_eq!(
        messages[0]["content"],
        "Compare the scan with the deed.\n\n\
         [image /workspace/scan.png (image/png, 68 bytes, 1×1): this model cannot see images]\n\
         [document /workspace/deed.pdf (application/pdf, 308 bytes, 1 page): this model cannot read PDF documents]"
    );
    assert_eq!(
        messages[2]["content"],
        "Read /workspace/out/chart.png\n\n\
         [image /workspace/out/chart.png (image/png, 68 bytes, 1×1): this model cannot see images]"
    );
}

#[tokio::test]
async fn openai_sends_a_note_for_missing_bytes() {
    let mut request = request_with_files();
    request.files = bytes_of(&[scan()]);
    let images_only = FileInputSetting::Only { images: true, documents: false };
    let body = sent_body(ProviderKind::OpenAi, MODEL, images_only, &request, false).await;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[0]["content"],
        json!([
            {"type": "text", "text": "Compare the scan with the deed.\n\n\
                [document /workspace/deed.pdf (application/pdf, 308 bytes, 1 page): this model cannot read PDF documents]"},
            image_part(PNG)
        ])
    );
    assert_eq!(
        messages[2]["content"],
        "Read /workspace/out/chart.png\n\n\
         [image /workspace/out/chart.png (image/png, 68 bytes, 1×1): the file's bytes are not available]"
    );
    assert_eq!(messages.len(), 3, "a tool file without bytes shows no user message: {body}");
}
