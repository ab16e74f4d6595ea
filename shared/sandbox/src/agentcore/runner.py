"""Runs one command of the agent runtime's `agentcore` sandbox inside an AgentCore Code Interpreter
session (the Rust backend writes this file with `writeFiles` and runs it with `executeCommand`).

The backend writes the call's files under `<stage>/tree` next to this script, and `call.json` with
the command and its bounds. This script puts the tree in place of the previous call's (so every
call starts from the files it was sent), points the fixed layout root (`/tmp/agent`) at it, runs
`bash -c <command>` in the workspace with bounded time, output, files and resources, kills what
the command left running, lists the workspace with each file's size and sha256, and prints one
JSON report on stdout. The command's own output never reaches stdout: it is read from a pipe and
only its head and tail are reported.

Python 3.6 or later; only the standard library.
"""

import base64
import hashlib
import json
import os
import resource
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The folder `writeFiles` writes into: the stage's parent.
BASE = os.path.dirname(HERE)
# The environment of the interpreter that a command may keep; everything else (credentials of an
# execution role included) stays out.
KEPT_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "JAVA_HOME", "NODE_PATH", "TZ")
WATCH_EVERY = 0.25
DRAIN_WAIT = 2.0


def main():
    started = time.monotonic()
    report = {"v": 1}
    try:
        # Claimed by a rename, so that a second run of the same stage (a retried request) finds
        # nothing to run.
        claimed = os.path.join(HERE, "call.claimed.json")
        os.rename(os.path.join(HERE, "call.json"), claimed)
        with open(claimed, "rb") as handle:
            call = json.loads(handle.read().decode("utf-8"))
        tree = setup(call)
    except Exception as err:  # noqa: BLE001 - every setup failure is reported, not raised.
        report["error"] = "setup: %s: %s" % (type(err).__name__, err)
        finish(report)
        return
    report["tree"] = tree
    try:
        run(call, tree, report)
        entries, complete = listing(os.path.join(tree, "workspace"), call)
        report["entries"] = entries
        report["complete"] = complete
    except Exception as err:  # noqa: BLE001
        report["error"] = "run: %s: %s" % (type(err).__name__, err)
    report["runner_ms"] = int((time.monotonic() - started) * 1000)
    finish(report)


def finish(report):
    remove(HERE)
    sys.stdout.write(json.dumps(report, separators=(",", ":")))
    sys.stdout.flush()


def setup(call):
    """Replaces the previous call's tree with the staged one and points the layout root at it."""
    staged = os.path.join(HERE, "tree")
    tree = os.path.join(BASE, call["tree_name"])
    for name in os.listdir(BASE):
        # Stages and trees of earlier calls that ended before cleaning up.
        if name.startswith(call["stage_prefix"]) and os.path.join(BASE, name) != HERE:
            remove(os.path.join(BASE, name))
    if os.path.lexists(tree):
        # Renamed first, so that the new tree takes its place even when some of it cannot go.
        old = os.path.join(BASE, "%sold-%d" % (call["stage_prefix"], os.getpid()))
        os.rename(tree, old)
        remove(old)
    if os.path.isdir(staged):
        os.rename(staged, tree)
    else:
        # A call without files writes no tree.
        os.makedirs(tree)
    for name in ("workspace", "skills", "tmp", "bin"):
        os.makedirs(os.path.join(tree, name), exist_ok=True)
    for name in call["skills"]:
        os.makedirs(os.path.join(tree, "skills", name), exist_ok=True)
    if call["ticket"]:
        os.makedirs(os.path.join(tree, "ticket"), exist_ok=True)
    for path in call["empty"]:
        target = os.path.join(tree, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "wb").close()
    # `python` is this interpreter when PATH has none (`exec` keeps a virtual environment's path).
    if not shutil.which("python", path=os.environ.get("PATH", "")):
        wrapper = os.path.join(tree, "bin", "python")
        with open(wrapper, "w") as handle:
            handle.write('#!/bin/sh\nexec %s "$@"\n' % shlex.quote(sys.executable))
        os.chmod(wrapper, 0o755)
    for name in ("skills", "ticket"):
        read_only(os.path.join(tree, name))
    link(tree, call["root"])
    return tree


def link(tree, root):
    """Points `root` at `tree`, replacing whatever is there."""
    parent = os.path.dirname(root)
    os.makedirs(parent, exist_ok=True)
    if os.path.lexists(root) and not os.path.islink(root):
        remove(root)
    fresh = "%s.new-%d" % (root, os.getpid())
    if os.path.lexists(fresh):
        os.unlink(fresh)
    os.symlink(tree, fresh)
    os.replace(fresh, root)


def read_only(top):
    if not os.path.isdir(top):
        return
    for folder, folders, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o444)
    for folder, folders, files in os.walk(top, topdown=False):
        os.chmod(folder, 0o555)


def remove(path):
    """Removes a file or a folder, giving folders their owner's permissions back first; what
    cannot be removed is left."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode):
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    try:
        os.chmod(path, 0o700)
        names = os.listdir(path)
    except OSError:
        names = []
    for name in names:
        remove(os.path.join(path, name))
    try:
        os.rmdir(path)
    except OSError:
        pass


def command_env(call, tree):
    root = call["root"]
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    tmp = root + "/tmp"
    env.update(
        {
            "PATH": root + "/bin:" + env.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": root + "/workspace",
            "PWD": root + "/workspace",
            "LANG": "C.UTF-8",
            "TMPDIR": tmp,
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": tmp + "/matplotlib",
            "XDG_CACHE_HOME": tmp + "/.cache",
            "OPENBLAS_NUM_THREADS": "1",
        }
    )
    return env


def tasks_of_own_uid():
    """Threads that run as this uid now: RLIMIT_NPROC counts them too."""
    uid = os.getuid()
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/status" % pid) as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"].strip())
        except (OSError, KeyError, ValueError):
            continue
    return count


def limiter(call, timeout):
    limits = call["limits"]
    processes = limits["processes"] + (0 if os.getuid() == 0 else tasks_of_own_uid())
    values = [
        (resource.RLIMIT_CPU, min(limits["cpu_seconds"], int(timeout) + 2)),
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_NPROC, processes),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ]

    def apply():
        for kind, value in values:
            try:
                _, hard = resource.getrlimit(kind)
                if hard != resource.RLIM_INFINITY:
                    value = min(value, hard)
                resource.setrlimit(kind, (value, value))
            except (OSError, ValueError):
                pass

    return apply


class Output:
    """The head, the last bytes after it, and a count of all."""

    def __init__(self, head, tail):
        self.head_max, self.tail_max = head, tail
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def push(self, data):
        self.total += len(data)
        if len(self.head) < self.head_max:
            take = self.head_max - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_max:
                del self.tail[: len(self.tail) - self.tail_max]


def over_bounds(workspace, call):
    entries, size = 0, 0
    folders = [workspace]
    while folders:
        folder = folders.pop()
        try:
            listed = list(os.scandir(folder))
        except OSError:
            continue
        for entry in listed:
            entries += 1
            if entries > call["max_entries"]:
                return "files"
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    size += entry.stat(follow_symlinks=False).st_size
                    if size > call["max_bytes"]:
                        return "disk"
            except OSError:
                continue
    return None


def exited(pid):
    """Whether the command's leader has exited, leaving it unreaped (its group id stays ours)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def run(call, tree, report):
    # The backend gives the time left of the call's timeout as the argument, once the files are
    # written; `call.json` holds the whole timeout.
    timeout_ms = int(sys.argv[1]) if len(sys.argv) > 1 else call["timeout_ms"]
    timeout = max(1, min(timeout_ms, call["timeout_ms"])) / 1000.0
    output = Output(call["head_bytes"], call["tail_bytes"])
    workspace = call["root"] + "/workspace"
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", call["command"]],
        cwd=workspace,
        env=command_env(call, tree),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        close_fds=True,
        start_new_session=True,
        preexec_fn=limiter(call, timeout),
    )
    pipe = proc.stdout.fileno()
    os.set_blocking(pipe, False)
    deadline = started + timeout
    watched = started
    stop = None
    pipe_open = True
    while True:
        now = time.monotonic()
        if now >= deadline:
            stop = "timeout"
            break
        if pipe_open:
            ready, _, _ = select.select([pipe], [], [], min(0.05, deadline - now))
            if ready:
                pipe_open = read_some(pipe, output)
        else:
            time.sleep(min(0.05, deadline - now))
        if output.total > call["limits"]["output_hard_bytes"]:
            stop = "output"
            break
        if exited(proc.pid):
            break
        if now - watched >= WATCH_EVERY:
            watched = now
            stop = over_bounds(os.path.join(tree, "workspace"), call)
            if stop:
                break
    duration = time.monotonic() - started
    # Whatever of the command's group is still running goes while the leader is unreaped.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    drain_until = time.monotonic() + DRAIN_WAIT
    while pipe_open and time.monotonic() < drain_until:
        ready, _, _ = select.select([pipe], [], [], 0.05)
        if ready:
            pipe_open = read_some(pipe, output)
    proc.stdout.close()
    report["stop"] = stop
    report["exit_code"] = proc.returncode if proc.returncode >= 0 else None
    report["signal"] = -proc.returncode if proc.returncode < 0 else None
    report["duration_ms"] = int(duration * 1000)
    report["output"] = {
        "total": output.total,
        "head": base64.b64encode(bytes(output.head)).decode("ascii"),
        "tail": base64.b64encode(bytes(output.tail)).decode("ascii"),
    }


def read_some(pipe, output):
    """Reads what is there; false once the pipe has ended."""
    while True:
        try:
            data = os.read(pipe, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        output.push(data)


def sha256_of(path, limit):
    """The file's sha256 and size, never following a link; None for the hash past `limit`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")
        if info.st_size > limit:
            return None, info.st_size
        digest = hashlib.sha256()
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                return None, size
            digest.update(chunk)
        return digest.hexdigest(), size
    finally:
        os.close(fd)


def listing(workspace, call):
    """Every entry under the workspace that is not a folder (and the folders that could not be
    read), in a walk that never follows links and stops past `max_entries`."""
    entries = []
    seen = 0
    folders = [(workspace, "")]
    while folders:
        folder, prefix = folders.pop()
        try:
            children = sorted(os.scandir(folder), key=lambda entry: os.fsencode(entry.name))
        except OSError:
            entries.append({"k": "u", "p": prefix.rstrip("/")})
            continue
        for child in children:
            seen += 1
            if seen > call["max_entries"]:
                return entries, False
            raw = os.fsencode(child.name)
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                entries.append({"k": "n", "p": prefix + raw.decode("utf-8", "replace")})
                continue
            path = prefix + name
            try:
                if child.is_symlink():
                    entries.append({"k": "l", "p": path})
                elif child.is_dir(follow_symlinks=False):
                    folders.append((child.path, path + "/"))
                elif child.is_file(follow_symlinks=False):
                    digest, size = sha256_of(child.path, call["max_file_bytes"])
                    entries.append({"k": "f", "p": path, "s": size, "h": digest})
                else:
                    entries.append({"k": "o", "p": path})
            except OSError as err:
                entries.append({"k": "e", "p": path, "m": err.strerror or str(err)})
    return entries, True


if __name__ == "__main__":
    main()
