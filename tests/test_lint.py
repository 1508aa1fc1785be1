"""``ruff check`` on the package and the tests (the configuration is pyproject.toml's [tool.ruff]: pyflakes,
pycodestyle's errors and warnings, import order). Seconds."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is not installed here: pip install -r requirements.txt (pyproject's test extra pins it)"
    out = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, f"ruff check found problems (ruff check --fix sorts imports):\n{out.stdout[-4000:]}"
