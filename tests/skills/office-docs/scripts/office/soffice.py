"""Runs LibreOffice headless with the environment it needs in a sandbox (no display)."""
import os
import subprocess
import sys


def soffice_env():
    env = os.environ.copy()
    env["SAL_USE_VCLPLUGIN"] = "svp"
    return env


def run_soffice(args, **kwargs):
    return subprocess.run(["soffice"] + list(args), env=soffice_env(), **kwargs)


if __name__ == "__main__":
    sys.exit(run_soffice(sys.argv[1:]).returncode)
