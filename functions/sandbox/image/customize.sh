#!/bin/sh
# The last step of the sandbox image's build (an mmdebstrap customize hook; "$1" is the new root
# filesystem). The Python wheels and the npm packages were fetched by `cargo xtask sandbox image`
# from requirements.txt and package-lock.json and copied in; this installs them with the image's own
# pip, offline, and lays out what every command expects.
set -eu
root="$1"

# The pinned Python packages, with the image's pip and Python (console scripts get its shebang),
# into /usr/local beside Debian's own (which stay, for the Debian packages that need them). The
# builder's pip settings are not the image's.
for name in $(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/\1/p'); do unset "$name"; done
chroot "$root" python3 -m pip install --no-index --find-links /tmp/image-wheels --no-deps --ignore-installed \
  --no-cache-dir --break-system-packages --root-user-action=ignore --disable-pip-version-check \
  --quiet -r /tmp/image-wheels/requirements.txt
rm -rf "$root/tmp/image-wheels"
chroot "$root" python3 -m pip check

# Playwright's Python driver looks for its own browser build under PLAYWRIGHT_BROWSERS_PATH; point
# the builds it knows at Debian's chromium, so `p.chromium.launch()` works as on a developer's machine.
browsers="$root/usr/local/lib/python3.13/dist-packages/playwright/driver/package/browsers.json"
if [ -f "$browsers" ]; then
  chroot "$root" python3 - <<'PY'
import json, os
data = json.load(open("/usr/local/lib/python3.13/dist-packages/playwright/driver/package/browsers.json"))
for browser in data["browsers"]:
    name, revision = browser["name"], browser["revision"]
    if name == "chromium":
        target = f"/opt/ms-playwright/chromium-{revision}/chrome-linux64/chrome"
    elif name == "chromium-headless-shell":
        target = f"/opt/ms-playwright/chromium_headless_shell-{revision}/chrome-headless-shell-linux64/chrome-headless-shell"
    else:
        continue
    os.makedirs(os.path.dirname(target), exist_ok=True)
    for link in (target, target.replace("linux64", "linux").replace("chrome-headless-shell-linux/chrome-headless-shell", "chrome-linux/headless_shell")):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not os.path.lexists(link):
            os.symlink("/usr/bin/chromium", link)
    # Playwright checks that a build finished installing by this marker.
    open(os.path.join(os.path.dirname(os.path.dirname(target)), "INSTALLATION_COMPLETE"), "w").close()
PY
fi

# In a Lambda environment the sandbox preloads nss_wrapper, so that a uid without an account has
# one. Chromium needs no account, and its crash handler deadlocks under that preload (the browser
# then never ends and Playwright's `browser.close()` waits for ever): Debian's launcher reads this
# folder, and Chromium's processes start without it.
cat > "$root/etc/chromium.d/sandbox-no-nss-wrapper" <<'SH'
case "${LD_PRELOAD:-}" in
  */libnss_wrapper.so) unset LD_PRELOAD NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP ;;
esac
SH

# Where the sandbox mounts a call's folders (the root is read-only, so the mount points exist here).
# /opt/bundles takes a tmpfs per call, holding the installed bundles of the call's skills.
mkdir -p "$root/workspace" "$root/skills" "$root/ticket" "$root/opt/bundles"
chmod 0755 "$root/workspace" "$root/skills" "$root/ticket" "$root/opt/bundles"

# Nothing of the build stays: package lists, caches, the chroot's machine id.
rm -rf "$root/var/lib/apt/lists"/* "$root/var/cache/apt"/* "$root/root/.cache"
: > "$root/etc/machine-id"
