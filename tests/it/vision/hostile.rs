//! Hostile files, read with `read_file` (one a step of one turn) and attached: each gives a tool
//! result or a line of the message that says what is wrong and what to do (or shows what can be
//! shown), the turn goes on and commits, and nothing is stored for a file that was refused.

use std::time::Duration;

use agent_core::message::human_size;
use base64::Engine;
use image::{DynamicImage, ImageFormat};
use local_stack::model_server::Reply;
use local_stack::stack::{file_event, tool_results, Stack};
use serde_json::json;

use super::fixtures;
use super::{http, sent_files, turn, upload, Provider, Sent};

const USER: &str = "user-hostile";
/// A context of 32,768 tokens leaves 28,672 for input, half of it (14,336) for files.
const CONTEXT_TOKENS: &str = "32768";
const FILE_TOKENS: usize = (32_768 - 4_096) / 2;

/// A PDF written by hand in ASCII alone, as some generators write them (no binary comment line):
/// valid, one page.
fn ascii_pdf() -> Vec<u8> {
    let content = "BT /F1 24 Tf 72 700 Td (Plain) Tj ET";
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_owned(),
        format!("<< /Length {} >>\nstream\n{content}\nendstream", content.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_owned(),
    ];
    let mut pdf = String::from("%PDF-1.4\n");
    let mut offsets = Vec::new();
    for (number, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.push_str(&format!("{} 0 obj\n{object}\nendobj\n", number + 1));
    }
    let xref = pdf.len();
    pdf.push_str(&format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1));
    for offset in offsets {
        pdf.push_str(&format!("{offset:010} 00000 n \n"));
    }
    pdf.push_str(&format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1));
    // Valid as written: its cross-reference table is read, not rebuilt.
    let loaded = lopdf::Document::load_mem(pdf.as_bytes()).expect("a valid PDF");
    assert_eq!((loaded.get_pages().len(), loaded.xref_recovery), (1, None));
    pdf.into_bytes()
}

#[tokio::test]
async fn hostile_files_read_answer_clear_tool_results_and_the_turn_commits() {
    let stack = Stack::new().await;
    let ticket = |name: &str| format!("{USER}/tickets/T-7/{name}");
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
    let whole = fixtures::png(200, 150, 9);
    let broken = whole[..whole.len() / 2].to_vec();
    let gif = fixtures::animated_gif(3_000);
    let pdf = fixtures::pdf(2);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("fake.png", b"this is not a picture\n".to_vec()),
        ("garbage.png", garbage),
        ("broken.png", broken),
        ("bomb.png", fixtures::bomb_png(20_000)),
        ("frames.gif", gif.clone()),
        ("book.pdf", fixtures::pdf(2_000)),
        ("long.pdf", fixtures::pdf(6)),
        ("locked.pdf", fixtures::encrypted_pdf()),
        ("cut.pdf", pdf[..pdf.len() - 40].to_vec()),
        ("ascii.pdf", ascii_pdf()),
        ("drawing.svg", fixtures::SVG.as_bytes().to_vec()),
    ];
    stack.put_many(files.iter().map(|(name, bytes)| (ticket(name), bytes.clone())).collect()).await;
    let function = http(&stack, Provider::OpenAi, &[("MAX_STEPS", "30"), ("LLM_CONTEXT_TOKENS", CONTEXT_TOKENS)]).await;

    // Another session of the same user shows a file; its path is no path of this session.
    let other = upload(&function, USER, "other", "secret.png", &fixtures::png(40, 30, 5)).await;
    stack.model.push([Reply::text("seen")]);
    let body = json!({"message": "look", "attachments": [{"upload": other, "name": "secret.png"}]});
    assert_eq!(turn(&function, USER, "other", body).await.0, 200);
    let other_files = stack.object_keys(&format!("{USER}/sessions/other/files/")).await;
    assert_eq!(other_files.len(), 1);
    let other_sha = other_files[0].rsplit('/').next().unwrap().to_owned();
    let outside = [
        "/workspace/../x".to_owned(),
        "/workspace/secret.png".to_owned(),
        format!("/workspace/../../sessions/other/files/{other_sha}"),
        format!("/sessions/other/files/{other_sha}"),
    ];

    let mut paths: Vec<String> = files.iter().map(|(name, _)| format!("/ticket/{name}")).collect();
    paths.extend(outside.iter().cloned());
    let before = stack.model.requests().len();
    stack.model.push(paths.iter().map(|path| Reply::tool("read_file", json!({"file_path": path}))));
    stack.model.push([Reply::text("Read what could be read.")]);
    let body = json!({"message": "Read every file of the ticket", "ticket_id": "T-7"});
    let (status, answer) = turn(&function, USER, "s1", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["reply"], "Read what could be read.");

    let requests = stack.model.requests_with_arrivals().split_off(before);
    assert_eq!(requests.len(), paths.len() + 1);
    let last = &requests.last().unwrap().0;
    let results = tool_results(last);
    let result = |path: &str| results[paths.iter().position(|p| p == path).expect("a path read")].clone();
    let step = |path: &str| {
        let index = paths.iter().position(|p| p == path).expect("a path read");
        requests[index + 1].1 - requests[index].1
    };

    // Not an image or not a complete one: text reads as text, other bytes keep the binary error.
    assert_eq!(result("/ticket/fake.png"), "@@ lines 1-1 of 1 @@\nthis is not a picture");
    assert_eq!(
        result("/ticket/garbage.png"),
        "Error: File '/ticket/garbage.png' is a binary file (4096 bytes) and cannot be read as text"
    );
    let broken = result("/ticket/broken.png");
    assert!(
        broken.starts_with("Error: /ticket/broken.png: the file's bytes start like a PNG image but do not decode")
            && broken.contains("it is damaged or truncated"),
        "a truncated PNG is refused, not sent on for the provider to refuse: {broken}"
    );
    // A decompression bomb is refused from its header, at once.
    assert_eq!(
        result("/ticket/bomb.png"),
        "Error: /ticket/bomb.png: the image is 20000×20000 pixels (400 megapixels), over the limit of 50 megapixels \
         decoded: make a smaller copy with a command (e.g. `convert in.png -resize 2000x2000 out.png`)"
    );
    assert!(step("/ticket/bomb.png") < Duration::from_secs(2), "{:?}", step("/ticket/bomb.png"));
    // Three thousand frames: the first one is shown, as a PNG, at once.
    let frames = result("/ticket/frames.gif");
    assert!(frames.starts_with("Showing the image /ticket/frames.gif (image/png, 16×16, "), "{frames}");
    assert!(
        frames.ends_with(&format!(
            "It was the first frame of a GIF, re-encoded as PNG (the file itself, {}, is unchanged).",
            human_size(gif.len() as u64)
        )),
        "{frames}"
    );
    assert!(step("/ticket/frames.gif") < Duration::from_secs(3), "{:?}", step("/ticket/frames.gif"));
    // PDFs: the page bound, the window's share, encryption, a cut end.
    assert_eq!(
        result("/ticket/book.pdf"),
        "Error: /ticket/book.pdf: the PDF has 2,000 pages, over the limit of 100: render the pages you need as images \
         with the pdf skill's scripts/convert_pdf_to_images.py (or `pdftoppm -png -r 100 -f 1 -l 10 in.pdf page`), \
         or split it (`qpdf in.pdf --pages . 1-100 -- part.pdf`) and read a part"
    );
    assert_eq!(
        result("/ticket/long.pdf"),
        format!(
            "Error: /ticket/long.pdf has 6 pages, about 15000 tokens, more than the {FILE_TOKENS} tokens a request may \
             spend on files with this model: render the pages you need as images with the pdf skill's \
             scripts/convert_pdf_to_images.py and read those, or split the PDF"
        )
    );
    assert!(
        result("/ticket/locked.pdf").starts_with(
            "Error: /ticket/locked.pdf: the PDF is encrypted, and a model is shown only unencrypted PDFs: make a \
             decrypted copy with `qpdf --decrypt in.pdf out.pdf`"
        ),
        "{}",
        result("/ticket/locked.pdf")
    );
    assert_eq!(
        result("/ticket/cut.pdf"),
        "Error: /ticket/cut.pdf: the PDF is damaged (it is truncated: its end has no %%EOF marker): ask for the file \
         again, or try to repair a copy with `qpdf in.pdf out.pdf` and read that"
    );
    // An SVG is text.
    assert_eq!(result("/ticket/drawing.svg"), format!("@@ lines 1-2 of 2 @@\n{}", fixtures::SVG.trim_end()));
    // Nothing outside the session is reached, however it is named.
    for path in &outside {
        assert_eq!(result(path), format!("Error: File '{path}' not found"));
    }

    // The GIF's first frame (red) is the one image shown.
    let sent = sent_files(last);
    let Sent { media_type, bytes, .. } = &sent[0];
    assert_eq!((media_type.as_str(), fixtures::decoded(bytes)), ("image/png", (ImageFormat::Png, 16, 16)));
    let frame = image::load_from_memory(bytes).unwrap();
    assert_eq!(DynamicImage::to_rgb8(&frame).get_pixel(8, 8).0, [255, 0, 0], "the first frame, red");
    let frame_key = format!("{USER}/sessions/s1/files/{}", super::sha256(bytes));
    assert!(stack.object_keys(&format!("{USER}/sessions/s1/")).await.contains(&frame_key));

    // A PDF written in ASCII alone is still a PDF (the vfs must not take it for text).
    let ascii = ascii_pdf();
    assert_eq!(
        result("/ticket/ascii.pdf"),
        format!("Showing the PDF document /ticket/ascii.pdf ({}, 1 page).", human_size(ascii.len() as u64)),
        "a PDF is a document whatever its bytes, not text"
    );
    // What the last request shows: the frame and the ASCII PDF, nothing else; and all that is
    // stored is those two, under their hashes.
    assert_eq!(sent.len(), 2, "{:?}", sent.iter().map(|file| &file.media_type).collect::<Vec<_>>());
    assert_eq!(sent[1], Sent { media_type: "application/pdf".into(), document: true, bytes: ascii });
    let mut stored = stack.object_keys(&format!("{USER}/sessions/s1/")).await;
    stored.sort();
    let mut expected: Vec<String> =
        sent.iter().map(|file| format!("{USER}/sessions/s1/files/{}", super::sha256(&file.bytes))).collect();
    expected.sort();
    assert_eq!(stored, expected);
}

/// The same files attached: the turn goes on, its message says why each is not shown, and only
/// what can be shown is.
#[tokio::test]
async fn hostile_files_attached_are_named_with_why_they_are_not_shown() {
    let stack = Stack::new().await;
    let function = http(&stack, Provider::Anthropic, &[]).await;
    let gif = fixtures::animated_gif(3_000);
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("bomb.png", fixtures::bomb_png(20_000)),
        ("book.pdf", fixtures::pdf(2_000)),
        ("locked.pdf", fixtures::encrypted_pdf()),
        ("frames.gif", gif.clone()),
    ];
    let mut attachments = Vec::new();
    for (name, bytes) in &files {
        let id = upload(&function, USER, "attached", name, bytes).await;
        attachments.push(json!({"upload": id, "name": name}));
    }
    stack.model.push([Reply::text("One frame seen.")]);
    let body = json!({"message": "Here they are", "attachments": attachments});
    let (status, answer) = turn(&function, USER, "attached", body).await;
    assert_eq!(status, 200, "{answer}");

    let request = stack.model.requests().pop().expect("a model call");
    let text = request["messages"][0]["content"][0]["text"].as_str().expect("the message's text").to_owned();
    let size = |name: &str| human_size(files.iter().find(|(n, _)| *n == name).unwrap().1.len() as u64);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..3], ["Here they are", "", "Attached files:"], "{text}");
    assert_eq!(
        lines[3],
        format!(
            "- /workspace/bomb.png (image/png, {}), not shown: /workspace/bomb.png: the image is 20000×20000 pixels \
             (400 megapixels), over the limit of 50 megapixels decoded: make a smaller copy with a command (e.g. \
             `convert in.png -resize 2000x2000 out.png`)",
            size("bomb.png")
        )
    );
    assert!(
        lines[4].starts_with(&format!(
            "- /workspace/book.pdf (application/pdf, {}), not shown: /workspace/book.pdf: the PDF has 2,000 pages, \
             over the limit of 100: render the pages you need as images with the pdf skill's \
             scripts/convert_pdf_to_images.py",
            size("book.pdf")
        )),
        "{}",
        lines[4]
    );
    assert!(lines[5].contains("not shown: /workspace/locked.pdf: the PDF is encrypted"), "{}", lines[5]);
    assert!(lines[6].starts_with("- Showing the image /workspace/frames.gif (image/png, 16×16, "), "{}", lines[6]);
    assert_eq!(lines.len(), 7, "{text}");

    // Only the frame is shown and stored; every file is in the workspace as uploaded.
    let sent = sent_files(&request);
    assert_eq!(sent.len(), 1);
    assert_eq!(fixtures::decoded(&sent[0].bytes), (ImageFormat::Png, 16, 16));
    let stored = stack.object_keys(&format!("{USER}/sessions/attached/")).await;
    assert_eq!(stored, [format!("{USER}/sessions/attached/files/{}", super::sha256(&sent[0].bytes))]);
    for (name, bytes) in &files {
        let download = function.call(file_event(Some(USER), "attached", name)).await;
        assert_eq!(download["statusCode"], 200, "{name}");
        let body = base64::engine::general_purpose::STANDARD.decode(download["body"].as_str().unwrap()).unwrap();
        assert!(body == *bytes, "{name} is in the workspace as uploaded");
    }
}
