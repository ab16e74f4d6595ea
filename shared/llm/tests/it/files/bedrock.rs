//! Bedrock's Converse: `image` and `document` blocks after a user message's text and inside a
//! `toolResult`, documents named from their files; models other than Claude and Nova get notes.

use super::*;

fn image(bytes: &[u8]) -> Value {
    json!({"image": {"format": "png", "source": {"bytes": b64(bytes)}}})
}

fn document(name: &str, bytes: &[u8]) -> Value {
    json!({"document": {"format": "pdf", "name": name, "source": {"bytes": b64(bytes)}}})
}

#[tokio::test]
async fn bedrock_sends_a_users_png_and_pdf_and_a_tool_results_png() {
    let request = request_with_files();
    let body = sent_body(ProviderKind::Bedrock, CLAUDE_ON_BEDROCK, FileInputSetting::Auto, &request, false).await;
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"text": "Compare the scan with the deed."}, image(PNG), document("deed", PDF)]},
            {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "call_1", "name": "read_file", "input": {"path": "/workspace/out/chart.png"}}}
            ]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": "call_1", "content": [{"text": "Read /workspace/out/chart.png"}, image(PNG)]}}
            ]}
        ])
    );
    let user = &body["messages"][0]["content"];
    assert_eq!(decoded(&user[1]["image"]["source"]["bytes"]), PNG);
    assert_eq!(decoded(&user[2]["document"]["source"]["bytes"]), PDF);
    let result = &body["messages"][2]["content"][0]["toolResult"]["content"];
    assert_eq!(decoded(&result[1]["image"]["source"]["bytes"]), PNG);
}

#[tokio::test]
async fn bedrock_document_names_are_allowed_unique_and_come_with_text() {
    let named = |path: &str, digit| file(path, MediaType::Pdf, digit);
    let files = vec![
        named("/workspace/Título  final_v2.pdf", 'd'),
        named("/workspace/old/Título  final_v2.pdf", 'e'),
        named("/workspace/.pdf", 'f'),
    ];
    let request = ChatRequest {
        messages: vec![Message::User { content: String::new(), files: files.clone() }],
        files: bytes_of(&files),
        ..Default::default()
    };
    let nova = "us.amazon.nova-pro-v1:0";
    let body = sent_body(ProviderKind::Bedrock, nova, FileInputSetting::Auto, &request, false).await;
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"text": "/workspace/Título  final_v2.pdf\n/workspace/old/Título  final_v2.pdf\n/workspace/.pdf"},
            document("T-tulo final-v2", PDF),
            document("T-tulo final-v2 (2)", PDF),
            document("-pdf", PDF)
        ])
    );
}

#[tokio::test]
async fn bedrock_models_that_take_no_files_get_notes() {
    let llama = "meta.llama3-70b-instruct-v1:0";
    let body = sent_body(ProviderKind::Bedrock, llama, FileInputSetting::Auto, &request_with_files(), false).await;
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"text": "Compare the scan with the deed.\n\n\
            [image /workspace/scan.png (image/png, 68 bytes, 1×1): this model cannot see images]\n\
            [document /workspace/deed.pdf (application/pdf, 308 bytes, 1 page): this model cannot read PDF documents]"}])
    );
    assert_eq!(
        body["messages"][2]["content"][0]["toolResult"]["content"],
        json!([{"text": "Read /workspace/out/chart.png\n\n\
            [image /workspace/out/chart.png (image/png, 68 bytes, 1×1): this model cannot see images]"}])
    );
}

#[tokio::test]
async fn bedrock_sends_a_note_for_missing_bytes() {
    let mut request = request_with_files();
    request.files = bytes_of(&[chart()]);
    let body = sent_body(ProviderKind::Bedrock, CLAUDE_ON_BEDROCK, FileInputSetting::Auto, &request, false).await;
    assert_eq!(
        body["messages"][0]["content"],
        json!([{"text": "Compare the scan with the deed.\n\n\
            [image /workspace/scan.png (image/png, 68 bytes, 1×1): the file's bytes are not available]\n\
            [document /workspace/deed.pdf (application/pdf, 308 bytes, 1 page): the file's bytes are not available]"}])
    );
    let result = &body["messages"][2]["content"][0]["toolResult"]["content"];
    assert_eq!(result, &json!([{"text": "Read /workspace/out/chart.png"}, image(PNG)]));
}
