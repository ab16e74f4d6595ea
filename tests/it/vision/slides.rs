//! A picture a skill's script made in the sandbox: the `slides` test skill builds a deck with
//! python-pptx and renders its thumbnails (LibreOffice, pdftoppm, Pillow) with `execute` over the
//! sandbox image, then the model reads the grid with `read_file` and is shown it.

use image::ImageFormat;
use local_stack::model_server::Reply;
use local_stack::stack::{file_event, repo_root, upload_dir, Stack};
use serde_json::{json, Value};

use super::fixtures;
use super::{http, sent_files, turn, Provider, Sent};

const USER: &str = "user-slides";

fn execute(command: &str) -> Reply {
    Reply::tool("execute", json!({ "command": command, "timeout": 180 }))
}

/// The pixels of `rgb` whose colour is near `(r, g, b)`: the bars of the deck's third slide.
fn near(image: &image::RgbImage, (r, g, b): (u8, u8, u8)) -> usize {
    let close = |a: u8, b: u8| a.abs_diff(b) < 40;
    image.pixels().filter(|pixel| close(pixel[0], r) && close(pixel[1], g) && close(pixel[2], b)).count()
}

#[tokio::test]
async fn thumbnails_a_skills_script_rendered_in_the_sandbox_are_shown_to_the_model() {
    let stack = Stack::new().await;
    let skill = repo_root().join("tests/skills/slides");
    upload_dir(&stack.s3, &stack.bucket, &skill, &format!("{USER}/skills/slides/")).await.expect("upload the skill");
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "slides"})),
        execute("python /skills/slides/scripts/make_deck.py deck.pptx"),
        execute("python /skills/slides/scripts/thumbnail.py deck.pptx"),
        Reply::tool("read_file", json!({"file_path": "/workspace/thumbnails.jpg"})),
        Reply::text("Three slides: a title, a list and a bar chart."),
    ]);
    let sandbox = local_stack::image::local_sandbox_env();
    let sandbox: Vec<(&str, &str)> = sandbox.iter().map(|(key, value)| (*key, value.as_str())).collect();
    let function = http(&stack, Provider::Anthropic, &sandbox).await;
    let (status, answer) = turn(&function, USER, "s1", json!({"message": "Make a deck and show me"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["executions"], 2, "{answer}");

    let requests = stack.model.requests();
    assert_eq!(requests.len(), 5);
    let results = tool_results_of(&requests[4]);
    assert!(results[1].contains("wrote deck.pptx with 3 slides"), "{}", results[1]);
    let size = results[2]
        .split("wrote thumbnails.jpg: 3 slides, ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|size| size.split_once('x'))
        .map(|(width, height)| (width.parse::<u32>().unwrap(), height.parse::<u32>().unwrap()))
        .unwrap_or_else(|| panic!("the script says the grid's size: {}", results[2]));

    // The grid as the sandbox wrote it, downloaded from the workspace.
    let download = function.call(file_event(Some(USER), "s1", "thumbnails.jpg")).await;
    assert_eq!(download["statusCode"], 200, "{download}");
    let grid = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(download["body"].as_str().unwrap()).expect("base64")
    };
    assert_eq!(fixtures::decoded(&grid), (ImageFormat::Jpeg, size.0, size.1));

    // The read shows it: the result says so, and the next request carries the grid itself (within
    // the long edge, so unchanged) in Anthropic's tool result, with no other file.
    let said = format!(
        "Showing the image /workspace/thumbnails.jpg (image/jpeg, {}×{}, {}).",
        size.0,
        size.1,
        agent_core::message::human_size(grid.len() as u64)
    );
    assert_eq!(results[3], said);
    assert_eq!(sent_files(&requests[3]), [], "nothing is shown before the read");
    assert_eq!(
        sent_files(&requests[4]),
        [Sent { media_type: "image/jpeg".into(), document: false, bytes: grid.clone() }]
    );
    let shown = image::load_from_memory(&grid).expect("the grid decodes").to_rgb8();
    for (colour, name) in [((0x1F, 0x4E, 0xC8), "blue"), ((0xD0, 0x3A, 0x2F), "red"), ((0x2E, 0x9E, 0x44), "green")] {
        assert!(near(&shown, colour) > 2_000, "the {name} bar of the third slide is drawn: {}", near(&shown, colour));
    }
}

/// The texts of the tool results of an Anthropic request, in order.
fn tool_results_of(request: &Value) -> Vec<String> {
    let mut results = Vec::new();
    for message in request["messages"].as_array().expect("messages") {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] != "tool_result" {
                continue;
            }
            results.push(match &block["content"] {
                Value::String(text) => text.clone(),
                blocks => blocks.as_array().expect("blocks").iter().filter_map(|b| b["text"].as_str()).collect(),
            });
        }
    }
    results
}
