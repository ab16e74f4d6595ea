//! The sandbox's bounds as a hostile command meets them, through the compiled http-turn with
//! `SANDBOX=local` over the image: one memory bound for all of a call's processes, small writable
//! places bounded by their filesystems, a read-only root, a seccomp filter over the kernel's doors
//! a command has no use for, and the files of a command brought back all or none.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, tool_results, turn_event, Stack};
use serde_json::{json, Value};

async fn http_with_sandbox(stack: &Stack, extra: &[(&str, &str)]) -> Function {
    let env = local_stack::image::local_sandbox_env();
    let mut all: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    all.extend_from_slice(extra);
    stack.http(&all).await
}

fn execute(command: &str) -> (String, Value) {
    ("execute".to_owned(), json!({ "command": command, "timeout": 120 }))
}

/// One turn whose model runs `commands` (in one step), then answers; their tool results.
async fn run(stack: &Stack, http: &Function, user: &str, session: &str, commands: &[&str]) -> Vec<String> {
    stack.model.push([Reply::Tools(commands.iter().map(|command| execute(command)).collect()), Reply::text("Done.")]);
    let before = stack.model.requests().len();
    let (status, body) =
        status_and_body(&http.call(turn_event(Some(user), session, json!({"message": "Run them"}))).await);
    assert_eq!(status, 200, "{body}");
    tool_results(&stack.model.requests()[before + 1])
}

#[tokio::test]
async fn a_calls_processes_share_one_memory_bound() {
    let stack = Stack::new().await;
    let http = http_with_sandbox(&stack, &[("SANDBOX_CALL_MEMORY_MIB", "512")]).await;
    // Four processes of 200 MiB each: each is under any per-process bound, together over 512 MiB.
    let four = "for i in 1 2 3 4; do python3 -c \"import time; b = b'x' * (200 << 20); time.sleep(20)\" & done; \
                wait; echo all-finished";
    let one = "python3 -c \"b = b'x' * (100 << 20); print('allocated', len(b))\"";
    let results = run(&stack, &http, "user-memory", "s1", &[four, one]).await;
    assert!(
        results[0].contains("[Command stopped: used more than 512 MiB of memory (all its processes together)]"),
        "{}",
        results[0]
    );
    assert!(!results[0].contains("all-finished"), "{}", results[0]);
    assert!(results[1].contains("allocated 104857600"), "{}", results[1]);
    assert!(results[1].contains("[Command succeeded with exit code 0]"), "{}", results[1]);
}

#[tokio::test]
async fn writable_places_are_small_and_the_root_is_read_only() {
    let stack = Stack::new().await;
    let http = http_with_sandbox(&stack, &[]).await;
    // 90 MiB in files of 30 MiB (each under the 32 MiB a file may have) into each writable place
    // of 64 MiB: the third write fails at once with ENOSPC, from the filesystem itself.
    let fill = |dir: &str| {
        format!(
            "for i in 1 2 3; do head -c 30M /dev/zero > {dir}/f$i.bin || echo \"{dir} write $i failed\"; done; \
             du -sm {dir} | cut -f1"
        )
    };
    let (workspace, tmp, shm) = (fill("."), fill("/tmp"), fill("/dev/shm"));
    let readonly = "for path in /x /usr/x /etc/x /dev/x /skills/x; do touch $path; done 2>&1; echo checked";
    // Sixty writers at once do not get past the bound either.
    let parallel =
        "for i in $(seq 1 60); do (head -c 2M /dev/zero > p$i.bin 2>/dev/null) & done; wait; du -sm . | cut -f1";
    let results = run(&stack, &http, "user-disk", "s1", &[&workspace, &tmp, &shm, readonly, parallel]).await;
    for (result, dir) in results.iter().zip([".", "/tmp", "/dev/shm"]) {
        assert!(result.contains("No space left on device"), "{dir}: {result}");
        assert!(result.contains(&format!("{dir} write 3 failed")), "{dir}: {result}");
        assert!(!result.contains(&format!("{dir} write 1 failed")), "{dir}: {result}");
        let used: u64 = result.lines().rev().find_map(|line| line.trim().parse().ok()).expect("du's figure");
        assert!((60..=65).contains(&used), "{dir} holds {used} MiB: {result}");
    }
    for path in ["/x", "/usr/x", "/etc/x", "/dev/x", "/skills/x"] {
        assert!(results[3].contains(&format!("touch: cannot touch '{path}': Read-only file system")), "{}", results[3]);
    }
    let used: u64 = results[4].lines().find_map(|line| line.trim().parse().ok()).expect("du's figure");
    assert!(used <= 65, "sixty writers wrote {used} MiB: {}", results[4]);
}

#[tokio::test]
async fn commands_find_the_kernels_extra_doors_shut_and_ordinary_work_runs() {
    let stack = Stack::new().await;
    let http = http_with_sandbox(&stack, &[]).await;
    let results = run(
        &stack,
        &http,
        "user-doors",
        "s1",
        &[
            "unshare -r true; echo \"unshare exit $?\"",
            "python3 -c 'import socket; socket.socket()'",
            "python3 -c 'import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)'",
            "python3 -c 'import socket; socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)'",
            "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
             print(\"mount\", libc.mount(b\"none\", b\"/tmp\", b\"tmpfs\", 0, None), os.strerror(ctypes.get_errno()))'",
            // Ordinary work: threads (clone3 falls back to clone), processes, AF_UNIX sockets, node.
            "python3 -c 'import threading, socket, multiprocessing as mp; t = threading.Thread(target=print, args=(\"thread ran\",)); \
             t.start(); t.join(); a, b = socket.socketpair(); a.send(b\"unix ok\"); print(b.recv(7).decode()); \
             print(\"pool\", mp.Pool(2).map(abs, [-1, -2]))'",
            "node -e \"require('child_process').execSync('true'); const { Worker } = require('worker_threads'); \
             new Worker('process.exit(0)', { eval: true }).on('exit', () => console.log('node worker ran'))\"",
        ],
    )
    .await;
    assert!(results[0].contains("Operation not permitted") && results[0].contains("unshare exit 1"), "{}", results[0]);
    for result in &results[1..4] {
        assert!(result.contains("PermissionError: [Errno 1] Operation not permitted"), "{result}");
        assert!(result.contains("[Command failed with exit code 1]"), "{result}");
    }
    assert!(results[4].contains("mount -1 Operation not permitted"), "{}", results[4]);
    let ordinary = &results[5];
    for line in ["thread ran", "unix ok", "pool [1, 2]", "[Command succeeded with exit code 0]"] {
        assert!(ordinary.contains(line), "{line}: {ordinary}");
    }
    assert!(results[6].contains("node worker ran"), "{}", results[6]);
}

#[tokio::test]
async fn a_commands_files_over_what_it_may_bring_back_come_back_none_of_them() {
    const USER: &str = "user-all-or-none";
    let stack = Stack::new().await;
    let http = http_with_sandbox(&stack, &[]).await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/keep.txt", "content": "kept\n"})),
        Reply::tool(
            "execute",
            json!({"command": "rm keep.txt; head -c 2000000 /dev/urandom > a.bin; head -c 2000000 /dev/urandom > b.bin; \
                              head -c 1000000 /dev/urandom > c.bin; echo made"}),
        ),
        Reply::tool("execute", json!({"command": "head -c 1000000 /dev/urandom > small.bin; ls"})),
        Reply::text("Done."),
    ]);
    let (status, body) =
        status_and_body(&http.call(turn_event(Some(USER), "s1", json!({"message": "Make three files"}))).await);
    assert_eq!(status, 200, "{body}");
    let results = tool_results(&stack.model.requests()[3]);
    let over = &results[1];
    assert!(over.contains("made"), "{over}");
    assert!(over.contains("none of the command's changes were brought back"), "{over}");
    assert!(over.contains("3 files of 5000000 bytes together, past the 4400000 bytes"), "{over}");
    assert!(!over.contains("Files written"), "{over}");
    // The next command still finds the workspace as it was: keep.txt, none of the three.
    assert!(results[2].starts_with("keep.txt\nsmall.bin\n"), "{}", results[2]);
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    let kept: Vec<&str> =
        session["workspace"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(kept, ["/workspace/keep.txt", "/workspace/small.bin"]);
}
