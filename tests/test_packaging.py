"""The build that keeps working: installing the project in a fresh venv, as the README's commands do, makes its
build backend print no deprecation warning (setuptools announces what it will stop building this way, with a date).

pip shows the backend's output only when verbose; the install is the editable one of ``requirements.txt``, without
dependencies (they are the venv's business, not the build's). It needs the package index, as command 2 does.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what a build backend's deprecation looks like in pip's verbose output (setuptools: SetuptoolsDeprecationWarning,
#: "... is deprecated", "By 2027-Feb-18, you need to update your project")
DEPRECATION = re.compile(r"DeprecationWarning|is deprecated|you need to update your project", re.IGNORECASE)


def backend_deprecations(pip_output: str) -> list[str]:
    """The lines of ``pip install -v`` output that announce a deprecation."""
    return [line.strip() for line in pip_output.splitlines() if DEPRECATION.search(line)]


def test_the_pattern_catches_setuptools_warning():
    seen = ("  /tmp/pip-build-env-x/overlay/lib/python3.11/site-packages/setuptools/config/_apply_pyprojecttoml.py:82: "
            "SetuptoolsDeprecationWarning: `project.license` as a TOML table is deprecated\n"
            "          By 2027-Feb-18, you need to update your project and remove deprecated calls\n"
            "  running egg_info\n")
    assert len(backend_deprecations(seen)) == 2 and not backend_deprecations("  running egg_info\n")


def test_a_fresh_venv_installs_the_project_without_a_deprecation_warning(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-v", "--no-deps",
                           "--disable-pip-version-check", "-e", str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = backend_deprecations(proc.stdout + proc.stderr)
    assert not found, "the build backend warns: " + " | ".join(found[:4])
