//! The image's Chromium under the sandbox's bounds, as a webapp-testing skill drives it: through the
//! compiled http-turn, with `SANDBOX=local` over the image and with `SANDBOX=lambda` (the compiled
//! sandbox function in process isolation), the model writes a page and a Playwright script, runs
//! it, and the screenshot it saved comes back as a PNG of the viewport's size.

use local_stack::lambda::Function;
use local_stack::lambda_invoke::InvokeApi;
use local_stack::model_server::Reply;
use local_stack::stack::{status_and_body, tool_results, turn_event, Stack};
use serde_json::json;

use crate::sandbox_image::download;

/// What a skill's author writes, as the webapp-testing skills do: Playwright's own
/// `chromium.launch()`, with no flags (Playwright passes `--no-sandbox`, and Debian's launcher
/// `--disable-dev-shm-usage` for the small `/dev/shm`), and a screenshot. It prints as it goes, so
/// a command stopped half-way still says how far it got.
const SCRIPT: &str = r#"from pathlib import Path
from playwright.sync_api import sync_playwright

with sync_playwright() as p:
    browser = p.chromium.launch()
    page = browser.new_page(viewport={"width": 640, "height": 360})
    page.goto(Path("page.html").resolve().as_uri())
    print("title:", page.title(), flush=True)
    print("heading:", page.inner_text("h1"), flush=True)
    page.screenshot(path="shot.png")
    browser.close()
    print("closed", flush=True)
"#;

const PAGE: &str = "<!doctype html><html><head><title>Informe</title></head>\
    <body style=\"margin:0;background:#fdf1e6;font-family:sans-serif\">\
    <h1 style=\"color:#10416b;padding:24px\">Rendered in the sandbox</h1>\
    <div style=\"margin:24px;width:200px;height:120px;background:#2a9d8f\"></div></body></html>";

/// Runs the turn on `http` for `user` and returns the screenshot's bytes.
async fn render(stack: &Stack, http: &Function, user: &str) -> Vec<u8> {
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/page.html", "content": PAGE})),
        Reply::tool("write_file", json!({"file_path": "/workspace/shot.py", "content": SCRIPT})),
        Reply::tool("execute", json!({"command": "python3 shot.py", "timeout": 120})),
        Reply::text("The screenshot is in /workspace/shot.png"),
    ]);
    let (status, body) =
        status_and_body(&http.call(turn_event(Some(user), "s1", json!({"message": "Screenshot the page"}))).await);
    assert_eq!(status, 200, "{body}");
    let result = tool_results(&stack.model.requests()[3]).pop().expect("the execute result");
    assert!(result.contains("title: Informe\nheading: Rendered in the sandbox\nclosed\n"), "{result}");
    assert!(result.contains("[Command succeeded with exit code 0]"), "{result}");
    assert!(result.contains("Files written: /workspace/shot.png"), "{result}");
    let png = download(http, user, "s1", "shot.png").await;
    if let Some(dir) = std::env::var_os("KEEP_SCREENSHOTS") {
        std::fs::write(std::path::Path::new(&dir).join(format!("{user}.png")), &png).expect("keep the screenshot");
    }
    png
}

/// A PNG of 640 by 360 pixels (its IHDR), of a size a rendered page has.
fn assert_rendered(png: &[u8]) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (640, 360));
    assert!((2_000..500_000).contains(&png.len()), "{} bytes", png.len());
}

#[tokio::test]
async fn playwright_renders_a_page_to_png_in_the_local_sandbox() {
    let stack = Stack::new().await;
    let env = local_stack::image::local_sandbox_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    let http = stack.http(&env).await;
    assert_rendered(&render(&stack, &http, "user-browser-local").await);
}

#[tokio::test]
async fn playwright_renders_a_page_to_png_in_the_lambda_sandbox() {
    let stack = Stack::new().await;
    let api = InvokeApi::start().await;
    let http = stack
        .http(&[("SANDBOX", "lambda"), ("SANDBOX_FUNCTION", "sandbox"), ("AWS_ENDPOINT_URL_LAMBDA", &api.endpoint)])
        .await;
    assert_rendered(&render(&stack, &http, "user-browser-lambda").await);
    assert!(api.calls().iter().all(|call| call.status == 200), "{:?}", api.calls());
}
