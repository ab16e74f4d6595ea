//! Section 6: the compiled `sandbox` function in the image, as Lambda runs it: a fresh
//! environment's start and first call, a warm environment's call.

use std::time::{Duration, Instant};

/// What section 6 measured.
pub(crate) struct ImageFigures {
    pub(crate) size: String,
    pub(crate) fresh: Vec<Duration>,
    pub(crate) warm: Vec<Duration>,
}

/// Starts the compiled `sandbox` function in the image (as the tests' Lambda stand-in does) a few
/// times for the fresh figure, and calls one environment `runs` times for the warm one.
pub(crate) async fn image_environment(runs: usize) -> ImageFigures {
    let root = local_stack::image::root();
    let request = serde_json::json!({
        "tenant": "bench", "session": "s1", "command": "true", "timeout_ms": 10_000, "workspace": [], "skills": []
    });
    let mut fresh = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let function = local_stack::lambda::Function::start_in_image("sandbox", &root, &[]).await;
        let answer = function.call(request.clone()).await;
        fresh.push(started.elapsed());
        assert_eq!(answer["exit_code"], 0, "{answer}");
    }
    let function = local_stack::lambda::Function::start_in_image("sandbox", &root, &[]).await;
    function.call(request.clone()).await;
    let mut warm = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let answer = function.call(request.clone()).await;
        warm.push(started.elapsed());
        assert_eq!(answer["exit_code"], 0, "{answer}");
    }
    let size = std::fs::read_to_string(root.parent().expect("the image's folder").join("ready"))
        .ok()
        .and_then(|ready| ready.lines().nth(1).and_then(|bytes| bytes.parse::<u64>().ok()))
        .map_or_else(|| "unknown".to_owned(), |bytes| format!("{} MB in files", bytes / 1_000_000));
    ImageFigures { size, fresh, warm }
}

/// The image's Python, as the commands see it.
pub(crate) fn image_python() -> String {
    let dir = std::env::temp_dir();
    let output = local_stack::image::run_in_image(&dir, "python3", &["--version"]);
    format!("the sandbox image's {}", String::from_utf8_lossy(&output.stdout).trim())
}
