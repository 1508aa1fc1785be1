"""Where the chapters are, and each one's parameters (read from its ``parameters`` cell)."""
from __future__ import annotations

import ast
from pathlib import Path

from depthutils.core.errors import DepthError

ROOT = Path(__file__).resolve().parents[2]
CHAPTER_DIR = ROOT / "chapters"


def chapters() -> dict[str, Path]:
    """Chapter number ("01") -> notebook path, in book order."""
    return {p.name[:2]: p for p in sorted(CHAPTER_DIR.glob("[0-9][0-9]_*.ipynb"))}


def find_chapter(chapter: str) -> Path:
    """A chapter by number ("2", "02") or name ("future_effects", "02_future_effects"); a stem with an
    older number ("06_depth_across_scale", before the chapters were numbered in reading order) finds its
    chapter by name."""
    chs = chapters()
    key = str(chapter).strip().removesuffix(".ipynb")
    if key.isdigit() and key.zfill(2) in chs:
        return chs[key.zfill(2)]
    name = key[3:] if len(key) > 3 and key[:2].isdigit() and key[2] == "_" else key  # "06_depth_across_scale": an old stem
    for num, path in chs.items():
        if key == path.stem or name == path.stem[3:]:
            return path
    valid = ", ".join(f"{n} ({p.stem[3:]})" for n, p in chs.items())
    raise DepthError(f"Unknown chapter {chapter!r}; valid chapters are: {valid}.")


def parameters(path: Path) -> dict:
    """The chapter's parameters: name -> default, read from its cell tagged ``parameters``.

    Parsed with ``ast`` (papermill's line regex trips over values such as ``"5 + 7 = "``).
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    if cell is None:
        return {}
    out = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out
