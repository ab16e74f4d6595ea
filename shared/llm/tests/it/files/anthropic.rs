//! Anthropic's Messages API: `image` and `document` blocks after a user message's text, and inside a
//! `tool_result` whose content becomes a list of blocks.

use super::*;

#[tokio::test]
async fn anthropic_sends_a_users_png_and_pdf_and_a_tool_results_png() {
    let body = sent_body(ProviderKind::Anthropic, MODEL, FileInputSetting::Auto, &request_with_files(), false).await;
    let source =
        |media_type: &str, bytes: &[u8]| json!({"type": "base64", "media_type": media_type, "data": b64(bytes)});
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Compare the scan with the deed."},
                {"type": "image", "source": source("image/png", PNG)},
                {"type": "document", "source": source("application/pdf", PDF)}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "/workspace/out/chart.png"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": [
                    {"type": "text", "text": "Read /workspace/out/chart.png"},
                    {"type": "image", "source": source("image/png", PNG)}
                ]}
            ]}
        ])
    );
    let user = &body["messages"][0]["content"];
    assert_eq!(decoded(&user[1]["source"]["data"]), PNG);
    assert_eq!(decoded(&user[2]["source"]["data"]), PDF);
    assert_eq!(decoded(&body["messages"][2]["content"][0]["content"][1]["source"]["data"]), PNG);
}

#[tokio::test]
async fn anthropic_text_only_sends_notes_and_no_file_block() {
    let body = sent_body(ProviderKind::Anthropic, MODEL, text_only(), &request_with_files(), false).await;
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"type": "text", "text": "Compare the scan with the deed.\n\n\
            [image /workspace/scan.png (image/png, 68 bytes, 1×1): this model cannot see images]\n\
            [document /workspace/deed.pdf (application/pdf, 308 bytes, 1 page): this model cannot read PDF documents]"}])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "call_1", "content": "Read /workspace/out/chart.png\n\n\
            [image /workspace/out/chart.png (image/png, 68 bytes, 1×1): this model cannot see images]"}]),
        "a tool result of text alone keeps its string content"
    );
}

#[tokio::test]
async fn anthropic_sends_a_note_for_missing_bytes() {
    let mut request = request_with_files();
    request.files = bytes_of(&[deed()]);
    let body = sent_body(ProviderKind::Anthropic, MODEL, FileInputSetting::Auto, &request, false).await;
    let user = &body["messages"][0]["content"];
    assert_eq!(
        user[0]["text"],
        "Compare the scan with the deed.\n\n\
         [image /workspace/scan.png (image/png, 68 bytes, 1×1): the file's bytes are not available]"
    );
    assert_eq!(user[1]["type"], "document");
    assert_eq!(user.as_array().unwrap().len(), 2, "{user}");
    assert_eq!(
        body["messages"][2]["content"][0]["content"],
        "Read /workspace/out/chart.png\n\n\
         [image /workspace/out/chart.png (image/png, 68 bytes, 1×1): the file's bytes are not available]"
    );
}
