//! One call's requests to the interpreter session: the files written, the runner run, its report
//! read, and the new files read back in batches; every answer bounded in bytes and events.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_ports::sandbox::ExecOutcome;
use aws_sdk_bedrockagentcore::primitives::Blob;
use aws_sdk_bedrockagentcore::types::{
    CodeInterpreterResult, CodeInterpreterStreamOutput, ContentBlock, InputContentBlock, ToolArguments, ToolName,
};

use super::call::{batches, sha256, Call, Plan, Report, Upload, Wanted, MAX_REPORT_BYTES, TREE_NAME};
use super::fault::{bounded, Failure, Fault, Kind};
use super::session::Interpreter;

/// One `readFiles` asks for at most this many bytes and files.
const READ_BATCH_BYTES: u64 = 2 << 20;
const READ_BATCH_FILES: usize = 200;
/// The most bytes and events accepted from one `writeFiles` (a short acknowledgement).
const MAX_ACK_BYTES: usize = 1 << 20;
const MAX_EVENTS: usize = 10_000;

impl Interpreter {
    /// One call in `session`: write, run, read back. A session found gone at the first request
    /// (before anything ran) is a [`Failure::Gone`].
    pub(super) async fn run(&self, session: &str, call: &Call, started: Instant) -> Result<ExecOutcome, Failure> {
        let blocks = call.uploads.iter().map(content_block).collect::<Result<Vec<_>, _>>().map_err(Failure::Fault)?;
        let arguments = ToolArguments::builder().set_content(Some(blocks)).build();
        let failed = match self.invoke(session, ToolName::WriteFiles, arguments, MAX_ACK_BYTES).await {
            Ok(results) => {
                tool_error(&results).map(|text| Fault { kind: Kind::Rejected, detail: format!("writeFiles: {text}") })
            }
            Err(fault) => Some(fault),
        };
        if let Some(fault) = failed {
            return Err(self.first_failure(session, fault).await);
        }

        // The session's setup and the files' transfer count against the command's timeout.
        let left = call.timeout.saturating_sub(started.elapsed()).max(call.timeout.min(Duration::from_secs(1)));
        let arguments = ToolArguments::builder().command(call.command_line(left)).build();
        let results = self
            .invoke(session, ToolName::ExecuteCommand, arguments, 2 * MAX_REPORT_BYTES)
            .await
            .map_err(Failure::Fault)?;
        let (stdout, stderr, exit) = command_result(&results);
        let report = Report::parse(&stdout).map_err(|err| {
            Failure::Fault(Fault::other(format!(
                "{err} (exit code {exit:?}; stderr: {}; stdout: {})",
                bounded(&stderr, 2000),
                bounded(&stdout, 500)
            )))
        })?;
        if let Some(error) = &report.error {
            return Err(Failure::Fault(Fault::other(format!("the runner failed: {}", bounded(error, 2000)))));
        }
        let (output, omitted_bytes) = report.output();
        let (exit_code, stopped, timed_out) = report.ending(call.timeout, &call.limits);
        let plan = Plan::new(&report, call, call.limits.result_bytes);
        let read = self.read_back(session, &plan.wanted).await;
        Ok(ExecOutcome {
            output,
            omitted_bytes,
            exit_code,
            stopped,
            timed_out,
            changes: plan.finish(&read),
            duration: Duration::from_millis(report.duration_ms),
            session: None,
        })
    }

    /// A failed first request: the session is gone when the service says so, or when it refused
    /// the request and the session is no longer ready.
    pub(super) async fn first_failure(&self, session: &str, fault: Fault) -> Failure {
        match fault.kind {
            Kind::NotFound => Failure::Gone(fault),
            Kind::Rejected => match self.describe(session).await {
                Ok(state) if state.ready => Failure::Fault(fault),
                Ok(_) => Failure::Gone(fault),
                Err(described) if matches!(described.kind, Kind::NotFound | Kind::Rejected) => Failure::Gone(fault),
                Err(_) => Failure::Fault(fault),
            },
            Kind::Throttled | Kind::Other => Failure::Fault(fault),
        }
    }

    /// The wanted files' bytes by sha256. A batch that fails is logged and its files are not
    /// kept: the command ran, and its output still matters.
    pub(super) async fn read_back(&self, session: &str, wanted: &[Wanted]) -> HashMap<[u8; 32], Arc<Vec<u8>>> {
        let hashes: HashSet<[u8; 32]> = wanted.iter().map(|file| file.sha256).collect();
        let mut read = HashMap::new();
        for batch in batches(wanted, READ_BATCH_BYTES, READ_BATCH_FILES) {
            let bytes: u64 = batch.iter().map(|file| file.size).sum();
            let paths = batch.iter().map(|file| format!("{TREE_NAME}/workspace/{}", file.path)).collect();
            let arguments = ToolArguments::builder().set_paths(Some(paths)).build();
            // Text decoded lossily may be up to three times its bytes (U+FFFD for each); room for
            // that and for messages.
            let most = usize::try_from(bytes).unwrap_or(usize::MAX).saturating_mul(3).saturating_add(1 << 20);
            match self.invoke(session, ToolName::ReadFiles, arguments, most).await {
                // A result may be an error for one path and still carry the others: every
                // resource counts, and only bytes with a wanted sha256 are taken.
                Ok(results) => {
                    for block in results.into_iter().flat_map(|result| result.content) {
                        for bytes in block_bytes(block) {
                            let digest = sha256(&bytes);
                            if hashes.contains(&digest) {
                                read.entry(digest).or_insert_with(|| Arc::new(bytes));
                            }
                        }
                    }
                }
                Err(fault) => {
                    tracing::warn!(sandbox = "agentcore", error = %fault.detail, files = batch.len(), "could not read files back")
                }
            }
        }
        read
    }

    /// One tool call; its results, at most `max_bytes` of them.
    pub(super) async fn invoke(
        &self,
        session: &str,
        tool: ToolName,
        arguments: ToolArguments,
        max_bytes: usize,
    ) -> Result<Vec<CodeInterpreterResult>, Fault> {
        let what = format!("InvokeCodeInterpreter {tool}");
        let output = self
            .client
            .invoke_code_interpreter()
            .code_interpreter_identifier(&self.id)
            .session_id(session)
            .name(tool)
            .arguments(arguments)
            .send()
            .await
            .map_err(|err| Fault::from_sdk(&what, err))?;
        let mut stream = output.stream;
        let (mut results, mut bytes) = (Vec::new(), 0usize);
        while let Some(event) = stream.recv().await.map_err(|err| Fault::from_sdk(&what, err))? {
            if let CodeInterpreterStreamOutput::Result(result) = event {
                bytes = bytes.saturating_add(result_bytes(&result));
                if bytes > max_bytes || results.len() >= MAX_EVENTS {
                    return Err(Fault::other(format!(
                        "{what}: the answer is over {max_bytes} bytes or {MAX_EVENTS} events"
                    )));
                }
                results.push(result);
            }
        }
        Ok(results)
    }
}

fn content_block(upload: &Upload) -> Result<InputContentBlock, Fault> {
    let block = match upload {
        Upload::Text { path, text } => InputContentBlock::builder().path(path).text(text),
        Upload::Bytes { path, bytes } => InputContentBlock::builder().path(path).blob(Blob::new(bytes.as_slice())),
    };
    block.build().map_err(|err| Fault::other(format!("a file to write: {err}")))
}

/// The runner's stdout and stderr and the command's exit code, from the structured content (or
/// the text blocks when there is none).
fn command_result(results: &[CodeInterpreterResult]) -> (String, String, Option<i32>) {
    let text = || results.iter().flat_map(|result| result.content()).filter_map(ContentBlock::text).collect::<String>();
    match results.iter().rev().find_map(CodeInterpreterResult::structured_content) {
        Some(structured) => {
            let stdout = structured.stdout().filter(|stdout| !stdout.is_empty()).map_or_else(text, str::to_owned);
            (stdout, structured.stderr().unwrap_or_default().to_owned(), structured.exit_code())
        }
        None => (text(), String::new(), None),
    }
}

/// The text of the results that are errors, if any.
fn tool_error(results: &[CodeInterpreterResult]) -> Option<String> {
    let errors: Vec<&CodeInterpreterResult> = results.iter().filter(|result| result.is_error == Some(true)).collect();
    if errors.is_empty() {
        return None;
    }
    let text: String = errors.iter().flat_map(|result| result.content()).filter_map(ContentBlock::text).collect();
    Some(bounded(&text, 2000))
}

/// The files' bytes a content block carries (a resource's blob or text, or a block's data).
fn block_bytes(block: ContentBlock) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    if let Some(resource) = block.resource {
        if let Some(blob) = resource.blob {
            found.push(blob.into_inner());
        } else if let Some(text) = resource.text {
            found.push(text.into_bytes());
        }
    }
    if let Some(data) = block.data {
        found.push(data.into_inner());
    }
    found
}

/// The bytes a result holds, to bound what the service may send.
fn result_bytes(result: &CodeInterpreterResult) -> usize {
    let block = |block: &ContentBlock| {
        let resource = block.resource().map_or(0, |resource| {
            resource.text().map_or(0, str::len) + resource.blob().map_or(0, |blob| blob.as_ref().len())
        });
        block.text().map_or(0, str::len) + block.data().map_or(0, |data| data.as_ref().len()) + resource
    };
    let structured = result
        .structured_content()
        .map_or(0, |structured| structured.stdout().map_or(0, str::len) + structured.stderr().map_or(0, str::len));
    result.content().iter().map(block).sum::<usize>() + structured
}
