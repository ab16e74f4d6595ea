# Installs one skill bundle with the image's own Python and pip, offline, inside the walls every
# command has (an unprivileged uid, the seccomp filter, the call's memory bound, a read-only image
# root, no network). The handler has already checked each wheel's name, pin and hash; this checks
# each one's zip directory (a wheel's own .dist-info/WHEEL, safe member names, no links) and counts
# the members against the bounds before anything is unpacked, then pip installs exactly those wheel
# files (no requirements file, no index, no dependency resolution, never a build) into the target
# folder, compiled (the folder is read-only to commands). Prints one JSON line: what was installed,
# or why not.
import json
import os
import re
import stat
import subprocess
import sys
import zipfile

source, target = sys.argv[1], sys.argv[2]
max_files, max_bytes, max_wheels = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def fail(reason):
    print(json.dumps({"error": reason}))
    sys.exit(0)


def normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def safe_member(name):
    parts = name.split("/")
    return (
        not name.startswith("/")
        and "\\" not in name
        and "\x00" not in name
        and all(part not in ("", ".", "..") for part in parts[:-1])
        and parts[-1] not in (".", "..")
    )


wheels = sorted(os.listdir(source))
if not wheels or len(wheels) > max_wheels:
    fail(f"the bundle has {len(wheels)} wheels; it must have 1 to {max_wheels}")
files = size = 0
for name in wheels:
    if not name.endswith(".whl"):
        fail(f"{name} is not a wheel")
    distribution, version = name[: -len(".whl")].split("-")[:2]
    dist_info = normalized(f"{distribution}-{version}") + ".dist-info/"
    try:
        with zipfile.ZipFile(os.path.join(source, name)) as wheel:
            members = wheel.infolist()
            metadata = [
                member.filename for member in members
                if member.filename.count("/") == 1 and member.filename.endswith(".dist-info/WHEEL")
            ]
            if not any(normalized(found[: -len(".dist-info/WHEEL")]) + ".dist-info/" == dist_info for found in metadata):
                fail(f"{name} is not a wheel: it has no {dist_info}WHEEL")
            for member in members:
                if not safe_member(member.filename):
                    fail(f"{name} holds a member outside its folder")
                if stat.S_ISLNK(member.external_attr >> 16):
                    fail(f"{name} holds a symbolic link")
                files += 1
                size += member.file_size
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        fail(f"{name} is not a readable wheel ({err})")
if files > max_files:
    fail(f"the wheels hold {files} files, over {max_files}")
if size > max_bytes:
    fail(f"the wheels unpack to {size} bytes, over {max_bytes}")

pip = [
    sys.executable, "-I", "-m", "pip", "install", "--isolated", "--no-index", "--no-deps",
    "--only-binary=:all:", "--target", target, "--no-cache-dir", "--disable-pip-version-check",
    "--no-input", "--quiet", "--no-warn-script-location", "--break-system-packages",
    "--root-user-action=ignore",
] + [os.path.join(source, name) for name in wheels]
ran = subprocess.run(pip, capture_output=True, text=True)
if ran.returncode != 0:
    lines = [line for line in (ran.stderr + ran.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")] or lines
    fail("pip could not install the bundle: " + " ".join(errors[-3:])[:800])
print(json.dumps({"wheels": len(wheels), "files": files, "bytes": size}))
