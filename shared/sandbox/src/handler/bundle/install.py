# Installs one skill bundle with the image's own Python and pip, offline: the wheels' members are
# counted against the bounds from their zip directories before anything is unpacked, then pip
# installs exactly the pinned wheels (hashes required, no index, no dependency resolution) into
# the target folder, compiled (the folder is read-only to commands). Prints one JSON line: what was installed, or why not.
import json
import os
import subprocess
import sys
import zipfile

source, target = sys.argv[1], sys.argv[2]
max_files, max_bytes, max_wheels = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def fail(reason):
    print(json.dumps({"error": reason}))
    sys.exit(0)


wheels_dir = os.path.join(source, "wheels")
lock = os.path.join(source, "requirements.txt")
if not os.path.isfile(lock) or not os.path.isdir(wheels_dir):
    fail("the bundle has no requirements.txt or no wheels/ folder")
wheels = sorted(os.listdir(wheels_dir))
if len(wheels) > max_wheels:
    fail(f"the bundle has {len(wheels)} wheels, over {max_wheels}")
files = size = 0
for name in wheels:
    if not name.endswith(".whl"):
        fail(f"{name} is not a wheel")
    try:
        with zipfile.ZipFile(os.path.join(wheels_dir, name)) as wheel:
            for member in wheel.infolist():
                files += 1
                size += member.file_size
    except (zipfile.BadZipFile, OSError) as err:
        fail(f"{name} is not a readable wheel ({err})")
if files > max_files:
    fail(f"the wheels hold {files} files, over {max_files}")
if size > max_bytes:
    fail(f"the wheels unpack to {size} bytes, over {max_bytes}")

pip = [
    sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--require-hashes",
    "--only-binary=:all:", "--find-links", wheels_dir, "--target", target,
    "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--quiet",
    "--break-system-packages", "--root-user-action=ignore", "-r", lock,
]
ran = subprocess.run(pip, capture_output=True, text=True)
if ran.returncode != 0:
    lines = [line for line in (ran.stderr + ran.stdout).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")] or lines
    fail("pip could not install the bundle: " + " ".join(errors[-3:])[:800])
print(json.dumps({"wheels": len(wheels), "files": files, "bytes": size}))
