"""The chapter runner: execute a chapter with papermill, or every chapter and then the HTML book.

``python -m depthutils run 02 --model ladder-4 -p n_examples 5 --out out/``
``python -m depthutils book [--model ID]``
"""
from __future__ import annotations

import ast
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from jupyter_core.paths import jupyter_runtime_dir
from traitlets.config import Config

from depthutils.book import overview
from depthutils.book.chapters import CHAPTER_DIR, ROOT, chapters, find_chapter, parameters
from depthutils.book.realruns import available
from depthutils.core.errors import DepthError
from depthutils.core.progress import JOBS_ENV
from depthutils.core.threads import TURNS_ENV, cores
from depthutils.data import check_n
from depthutils.models.real.catalog import REAL_MODELS

__all__ = ["CHAPTER_DIR", "ROOT", "chapters", "find_chapter", "parameters", "parse_value", "run_chapter",
           "build_book", "run_chapters", "default_jobs", "real_parameters", "kernel_config", "KERNEL_ENV", "PAGES", "COUNTS"]
BOOK_FILES = ("_config.yml", "_toc.yml", "intro.md", "instructors.md", "using_depthutils.md", "references.md",
              "references.bib", "favicon.png", "_static")
#: pages that are notebooks but not chapters: executed (no parameters) into the staged book at each build
PAGES = ("bigger_models.ipynb",)
#: settings for every kernel the runner, the book and nbval start: no progress bars in pages
#: chapter parameters that count something and must be positive whole numbers
COUNTS = {"n_examples", "baseline_n", "n_per_task", "aime_n", "steps", "batch_size"}
KERNEL_ENV = {"DEPTHUTILS_PROGRESS": "0", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}
#: AF_UNIX socket paths may not exceed 107 bytes: the runtime folder plus "kernel-<uuid>-ipc-<port>"
_IPC_ROOM = 107 - 60


def kernel_config() -> Config:
    """The chapters' kernels talk to papermill over Unix sockets (IPC), which are local to this machine:
    over TCP, ipykernel warns on stderr of every run that its traffic is unencrypted. Where the runtime
    folder's path is too long for a socket, they stay on TCP (and the warning). Each call names the sockets of one
    kernel (in the runtime folder, by a new UUID): jupyter_client's default, ``kernel-ipc-<n>`` in the working folder,
    is the same for two kernels started at once there, which then get each other's messages."""
    config = Config()
    runtime = jupyter_runtime_dir()
    if len(runtime) <= _IPC_ROOM:
        os.makedirs(runtime, exist_ok=True)
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = os.path.join(runtime, f"kernel-{uuid.uuid4()}-ipc")
    return config


def parse_value(text: str):
    """A ``-p NAME VALUE`` value: a Python literal when it parses as one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _writable(out: Path) -> Path:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise DepthError(f"Cannot write to the output folder {out} ({e.strerror}); pass --out with a folder you can write to.") from None
    return out


def _hide_injected(nb_path: Path) -> None:
    """Hide papermill's injected-parameters cell in the rendered page."""
    import nbformat

    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, nb_path)


def run_chapter(chapter: str, *, model: str | None = None, models: list[str] | None = None,
                params: dict | None = None, out: str | Path = "out", quiet: bool = False) -> Path:
    """Execute one chapter into ``out/<chapter>.ipynb``; its figures land in ``out/figures``.

    ``model`` sets a chapter's ``model`` (or, for a chapter that takes a list, ``models = [model]``);
    ``models`` sets the list of a chapter that takes one (chapter 9).
    """
    src = find_chapter(chapter)
    valid = parameters(src)
    params = dict(params or {})
    if models is not None:
        if "models" not in valid:
            raise DepthError(f"Chapter {src.stem} takes one model; use --model instead of --models.")
        params["models"] = list(models)
    if model is not None:
        if "model" not in valid and "models" not in valid:
            raise DepthError(f"Chapter {src.stem} runs models of its own and takes no --model; its parameters are: "
                             f"{', '.join(valid)}.")
        params["model" if "model" in valid else "models"] = model if "model" in valid else [model]
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise DepthError(f"Unknown parameter(s) {', '.join(unknown)} for chapter {src.stem}; "
                         f"valid parameters are: {', '.join(valid)}.")
    for name in COUNTS & set(params):  # caught here, where the chapter's own parameter name is known
        check_n(params[name], name)
    out = _writable(Path(out).resolve())
    params.setdefault("out_dir", str(out / "figures"))
    dest = out / src.name
    return _execute(src, dest, params, out, quiet)


def _execute(src: Path, dest: Path, params: dict, cwd: Path, quiet: bool = False) -> Path:
    """Run the notebook ``src`` into ``dest`` with papermill (``params`` injected), in the kernel settings of
    every chapter, and hide the injected cell on the page."""
    import papermill

    os.environ.update(KERNEL_ENV)
    logging.getLogger("papermill.translators").setLevel(logging.ERROR)  # its regex trips on "= " values
    t0 = time.time()
    try:
        papermill.execute_notebook(str(src), str(dest), parameters=params, kernel_name="python3",
                                   progress_bar=False, cwd=str(cwd), config=kernel_config())
    except papermill.PapermillExecutionError as e:
        raise DepthError(f"{'Chapter ' if src.parent.name == 'chapters' else ''}{src.stem} failed in cell {e.exec_count}: {e.ename}: {e.evalue} "
                         f"(the executed notebook is {dest}).") from None
    _hide_injected(dest)
    if not quiet:
        print(f"{src.stem}: executed in {time.time() - t0:.1f}s -> {dest}")
    return dest


def real_parameters(path: Path, included: list[str], sample: int | None = None) -> dict:
    """The parameters the book gives chapter ``path`` besides its defaults: the real models it runs
    (``real_models``) where the chapter takes them, and ``sample`` as its ``real_sample`` where it takes one
    (chapters 4 and 5; None: the chapter's default); a page says itself why it ran without one
    (:func:`depthutils.book.realruns.why_not_run`)."""
    takes = parameters(path)
    out = {"real_models": included} if "real_models" in takes else {}
    return {**out, "real_sample": sample} if sample is not None and "real_sample" in takes else out


def _run_in_share(run, num: str, kwargs: dict, jobs: int, turns: str):
    """One chapter of a book run with ``jobs`` chapters at once, in a process of its own: its kernel starts on
    ``cores() // jobs`` threads and takes the cores the others free (:mod:`depthutils.core.threads`), its real models'
    runs take turns with theirs on the lock file ``turns``, and its header says how many chapters ran beside it."""
    threads = str(max(1, cores() // jobs))
    os.environ.update({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, JOBS_ENV: str(jobs), TURNS_ENV: turns})
    return run(num, **kwargs)


def _runs_real(kwargs: dict) -> bool:
    """Whether a chapter run with ``run_chapter(**kwargs)`` runs a real model."""
    return bool(kwargs.get("params", {}).get("real_models"))


def default_jobs(todo: dict[str, dict]) -> int:
    """The chapters a book runs at once by default (see :func:`build_book`'s ``jobs``): one per core, or one when
    any of ``todo`` (``{chapter: run_chapter's keyword arguments}``) runs a real model."""
    return 1 if any(map(_runs_real, todo.values())) else cores()


def run_chapters(todo: dict[str, dict], jobs: int, run=run_chapter) -> None:
    """``run(num, **kwargs)`` (:func:`run_chapter`) for each of ``todo``, ``jobs`` at a time, each in a process of its
    own (its papermill and its kernel apart from the others': two papermill runs in one process get each other's
    kernel messages), chapters with real models first (they take longest); the first failure stops the rest and is
    raised. One job runs them one after the other in this process, on every core."""
    if jobs <= 1 or len(todo) <= 1:
        for num, kwargs in todo.items():
            run(num, **kwargs)
        return
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    order = sorted(todo, key=lambda num: not _runs_real(todo[num]))
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(
            max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_run_in_share, run, num, todo[num], jobs, str(Path(tmp) / "turns.lock"))
                   for num in order]
        wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            f.cancel()  # those not started yet
        for f in futures:
            if f.done() and not f.cancelled() and f.exception() is not None:
                raise f.exception()


def build_book(*, model: str | None = None, models: list[str] | None = None, real: bool = True,
               executed: str | Path | None = None, jobs: int | None = None) -> Path:
    """Execute every chapter into ``_build/src``, then build the HTML book into ``_build/html``.

    ``model`` runs every chapter on that model (chapter 9 on ``[model]``); ``models`` sets the
    list of the chapters that compare several models (chapter 9). ``real``: chapters 0–6 also run on every
    named real model that is cached or can be fetched now (:func:`depthutils.book.realruns.available`); the book
    says in one sentence why it leaves one out. ``executed``: a folder of chapters already executed with the
    book's parameters (the test run's nbval writes one, ``tests/nbval_book.py``): they are rendered as they
    are, and only a chapter missing there is executed. Once every chapter is in place, the staged intro gets the
    overview of their verdicts, a column per real model that ran in them (:func:`depthutils.book.overview.write`).
    ``jobs``: chapters executed at once, each in a process of its own with its share of the cores. Side by side, a
    chapter takes the cores the others free, and the real models' runs take turns (:mod:`depthutils.core.threads`).
    None (:func:`default_jobs`): one per core when no real model runs (the embedded models' chapters run faster as
    single-threaded processes side by side), one at a time on every core when one does: the real models' runs,
    most of such a book, take turns anyway, and a chapter waiting for its turn holds a job the embedded chapters could
    use (measured on 2 cores, both real models, an empty model cache: 2,900 s one at a time, 2,971 s two at once).
    ``python -m depthutils bench --only jobs`` times both ways on a machine.
    """
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise DepthError(f"jobs must be a whole number of chapters at once (≥ 1), got {jobs!r}.")
    build_dir = ROOT / "_build"
    stage = build_dir / "src"
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "chapters").mkdir(parents=True)
    for name in BOOK_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, stage / name)
        elif (ROOT / name).exists():
            shutil.copy(ROOT / name, stage / name)
    t0 = time.time()
    done = {p.name: p for p in Path(executed).glob("*.ipynb")} if executed is not None else {}
    if len(done) < len(chapters()):
        included, left_out = available() if real else (
            [], {name: f"{name} is left out: the book was built with --no-real." for name in REAL_MODELS})
        for name, why in left_out.items():
            print(f"book: {why}")
    todo = {}
    for num, path in chapters().items():
        if path.name in done:
            shutil.copy(done[path.name], stage / "chapters" / path.name)
            print(f"{path.stem}: rendered as executed in {done[path.name].parent}")
            continue
        takes_list, takes_one = "models" in parameters(path), "model" in parameters(path)
        todo[num] = dict(model=None if (takes_list and models) or not (takes_list or takes_one) else model,
                         params=real_parameters(path, included), models=models if takes_list else None,
                         out=stage / "chapters")
    run_chapters(todo, min(default_jobs(todo) if jobs is None else jobs, max(1, len(todo))))
    shown = overview.write(stage / "intro.md", stage / "chapters")
    print(f"book: the intro's overview shows the embedded models{''.join(', ' + n for n in shown)}")
    for name in PAGES:
        _execute(ROOT / name, stage / name, {}, stage)
    beside = Path(sys.executable).with_name("jupyter-book")  # the one installed with this Python
    jb = str(beside) if beside.exists() else shutil.which("jupyter-book")
    if jb is None:
        raise DepthError("jupyter-book is not installed; run pip install -r requirements.txt.")
    cmd = [jb, "build", str(stage), "--path-output", str(build_dir.parent), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise DepthError(f"jupyter-book build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    html = build_dir / "html"
    _dedupe_thebe(html)
    _local_mathjax(html / "_static" / "mathjax")
    print(f"book: built {html / 'index.html'} in {time.time() - t0:.0f}s")
    return html


def _local_mathjax(dest: Path) -> None:
    """Copy MathJax 3 (the pinned ``django-static-mathjax`` wheel, Apache-2.0) into the built book's
    ``_static/mathjax``, so the chapters' formulas render offline, where the CDN that Sphinx loads MathJax from
    is unreachable (``_config.yml`` points ``mathjax_path`` at this copy). After the build, not as a static
    path: Jupyter Book adds every script of a static path to every page, and MathJax's other bundles then
    clash with the one Sphinx loads."""
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise DepthError("MathJax is not installed; run pip install -r requirements.txt (django-static-mathjax).")
    es5 = Path(list(spec.submodule_search_locations)[0]) / "static" / "mathjax" / "es5"
    shutil.copytree(es5, dest, dirs_exist_ok=True)


def _dedupe_thebe(html: Path) -> None:
    """Drop the second copy of sphinx-thebe's inline config script that Jupyter Book 1 writes into
    every page; the browser otherwise logs "Identifier 'THEBE_JS_URL' has already been declared"."""
    for page in html.rglob("*.html"):
        text = page.read_text()
        start = text.find("<script>const THEBE_JS_URL")
        if start < 0:
            continue
        tag = text[start:text.index("</script>", start) + len("</script>")]
        first = text.index(tag) + len(tag)
        page.write_text(text[:first] + text[first:].replace(tag, ""))


def refresh_sources(only: str | None = None) -> None:
    """Re-execute the source notebooks in place, so that nbval compares against fresh outputs.

    Outputs of cells tagged ``nbval-ignore-output`` (figures) are dropped from the
    source, and execution metadata is cleared, to keep the notebooks small in git.
    """
    import tempfile

    import nbformat
    import papermill

    os.environ.update(KERNEL_ENV)
    targets = [find_chapter(only)] if only else list(chapters().values())
    for src in targets:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / src.name
            papermill.execute_notebook(str(src), str(out), kernel_name="python3", progress_bar=False,
                                       cwd=str(CHAPTER_DIR), config=kernel_config())
            nb = nbformat.read(out, as_version=4)
        tidy(nb)
        nbformat.write(nb, src)
        print(f"refreshed {src.name}")


def tidy(nb) -> None:
    """Prepare an executed chapter as a source notebook: numbered cells, no figures, no run metadata."""
    nb.metadata.pop("papermill", None)
    count = 0
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count  # nbval skips a cell without one ("unrun reference cell")
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            cell.outputs = []
        for o in cell.outputs:
            if o.get("output_type") == "execute_result":
                o["execution_count"] = count
