"""The chapter runner and the rendered book, read in headless Chromium.

The book is built once per session (``python -m depthutils book``, :func:`built_book`) unless
``_build/html`` is already newer than every chapter; the browser test serves it
on loopback and opens every chapter page.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import nbformat
import pytest
from nbval_book import EXECUTED, wait_for_chapters

from depthutils.book.runner import PAGES, ROOT, chapters, find_chapter, parameters
from depthutils.core.errors import DepthError
from depthutils.models.real.catalog import REAL_MODELS
from depthutils.perf import plan_page

HTML = ROOT / "_build" / "html"


def test_chapters_are_found_by_number_and_name():
    assert find_chapter("2") == find_chapter("02") == find_chapter("future_effects") == find_chapter("02_future_effects")
    # chapters are numbered in reading order; a stem with its older number still finds its chapter by name
    assert find_chapter("06_depth_across_scale") == find_chapter("09") == find_chapter("depth_across_scale")
    assert find_chapter("07_depth_score") == find_chapter("6")
    with pytest.raises(DepthError, match=r"Unknown chapter 'nine'; valid chapters are: 00 \(residual_stream\), 01 \(contributions\)"):
        find_chapter("nine")


def test_every_chapter_has_the_common_parameters():
    for path in chapters().values():
        p = parameters(path)
        assert {"device", "dtype", "remote", "out_dir", "max_tokens"} <= set(p), path.name
        assert p["max_tokens"] is None, path.name  # the default is the model's own context
        assert p.get("model", "default") == "default" and p["remote"] is False


#: paragraphs that state the papers' findings (their numbers are facts about the papers, not the run)
PAPER_MARKERS = ("**The paper's claim", "**What P1 saw", "**P2's answers", "**Learning goals")


def _run_numbers(text: str) -> list[str]:
    """Decimals and percentages in Markdown that are neither glued nor in a paper's paragraph."""
    import re

    hits = []
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith(PAPER_MARKERS):
            continue
        para = re.sub(r"\{glue(:\w+)?\}`[^`]*`", "", para)
        para = re.sub(r"```\{exercise(-start)?\} \d+\.\d+ ·", "", para)  # an exercise's number in its chapter
        para = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "", para, flags=re.S)  # a definition's constants (P2's 0.3)
        para = re.sub(r"(Llama|Qwen|Qwen2|Qwen3|OLMo|Gemma|Mistral|Phi|GPT)[- ]?[0-9.]+\w*", "", para)
        para = re.sub(r"`[^`]*`", "", para)  # code: parameter values and commands
        para = re.sub(r"\]\([^)]*\)", "]", para)  # a link's address (a DOI, an arXiv number)
        para = re.sub(r"95% (bootstrap|interval|CI)", "", para)  # an interval's level is a setting, not a result
        hits += re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])|\d+(?:\.\d+)?\s?%", para)
    return hits


def test_no_chapter_prose_hard_codes_a_number_about_the_run():
    bad = {}
    for path in chapters().values():
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown" and _run_numbers(cell.source):
                bad.setdefault(path.name, []).extend(_run_numbers(cell.source))
    assert not bad, f"numbers typed into chapter prose (glue them from the run): {bad}"


def test_the_number_check_can_fail():
    assert _run_numbers("In this run the ratio is 0.81 and 20% of prompts were cut.") == ["0.81", "20%"]
    assert _run_numbers("In this run the ratio is {glue:text}`fe_ratio` (`n_examples = 2.5`).") == []
    assert _run_numbers("**What P1 saw.** A drop from 0.9 to 0.2.") == []
    assert _run_numbers("A 95% bootstrap interval; 95% of prompts were cut.") == ["95%"]
    assert _run_numbers("```{exercise} 3.1 · Predict, then run\nAt 0.5 of the depth.") == ["0.5"]
    assert _run_numbers("$$\\mathrm{overlap}_l > 0.3$$ and on this run 0.42 of it.") == ["0.42"]


def test_every_chapter_ends_with_a_computed_verdict():
    for path in chapters().values():
        nb = nbformat.read(path, as_version=4)
        last = nb.cells[-1]
        assert last.cell_type == "code" and "report.verdict(" in last.source, path.name
        assert any(c.cell_type == "markdown" and c.source.startswith("## Verdict") for c in nb.cells[-2:])
        text = "".join(o.get("data", {}).get("text/markdown", "") for o in last.get("outputs", []))
        assert text.startswith('<div class="verdict-box">') and "**Verdict: " in text, path.name
        assert "*Criterion" in text and text.count("*Claim") >= 1, path.name


def test_no_chapter_states_a_verdict_twice():
    """A claim's verdict in full (its word, claim and criterion) is stated once, in its box: the paper table and the
    real-model sections point at it, and a chapter's several verdicts on one claim share one box."""
    for path in chapters().values():
        nb = nbformat.read(path, as_version=4)
        texts = [o.get("data", {}).get("text/markdown", "") for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", [])]
        text = "\n".join(texts)
        boxes = text.count('<div class="verdict-box">')
        assert boxes >= 1 and text.count("**Verdict: ") == boxes, path.name
        criteria = re.findall(r"^- \*Criterion[^*]*:\* (.*)$", text, flags=re.M)
        claims = re.findall(r"^- \*Claim[^*]*:\* (.*)$", text, flags=re.M)
        assert criteria and len(criteria) == len(set(criteria)) and len(claims) == len(set(claims)), path.name
        assert "the chapter's verdict.)" not in text and "**On the real models** (their" not in text, path.name
        paper_rows = re.findall(r"^\| claim[^|]*\|[^|]*\| ([^|]*) \|$", text, flags=re.M)
        assert all(row == "graded in the verdict box below" for row in paper_rows), (path.name, paper_rows)


def test_run_chapter_with_another_local_model(tmp_path):
    """`run 02 --model <another local model>`: here the 4-layer ladder model, by folder path."""
    from depthutils.ladder.registry import resolve_alias

    other = resolve_alias("ladder-4")
    proc = subprocess.run([sys.executable, "-m", "depthutils", "run", "02", "--model", str(other),
                           "-p", "n_examples", "2", "-p", "modes", '["future"]', "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # no kernel warning in a reader's terminal, but one line jupyter_client causes itself: it interrupts the kernel
    # before every shutdown, and on a busy machine (two test workers) the interrupt can land while the kernel finishes
    # its last message, which ipykernel logs
    said = [line for line in proc.stderr.splitlines() if "IPKernelApp" in line
            and line.strip() != "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel."]
    assert not said, proc.stderr[-2000:]
    nb = nbformat.read(tmp_path / "02_future_effects.ipynb", as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "remove-cell" in injected[0].metadata["tags"]
    assert str(other) in injected[0].source
    assert (tmp_path / "figures" / "fig3_future_effects_layer_future.png").stat().st_size > 10_000
    assert (tmp_path / "figures" / "fig3_future_effects_layer_future.pdf").exists()
    saved = json.loads((tmp_path / "figures" / "future_effects_layer_future.json").read_text())
    assert saved["meta"]["n_layers"] == 4 and saved["meta"]["n"] == 2


# ------------------------------------------------------------------------------------ browser

def _book_is_fresh() -> bool:
    index = HTML / "index.html"
    if not index.exists():
        return False
    sources = list(chapters().values()) + [ROOT / "intro.md", ROOT / "instructors.md", ROOT / "using_depthutils.md",
                                           ROOT / "references.md", ROOT / "references.bib",
                                           ROOT / "_toc.yml",
                                           ROOT / "_config.yml", ROOT / "depthutils" / "book" / "overview.py",
                                           ROOT / "depthutils" / "book" / "claim_table.py"] + \
        [ROOT / page for page in PAGES] + list(EXECUTED.glob("*.ipynb"))
    return index.stat().st_mtime > max(p.stat().st_mtime for p in sources)


def _executed_by_nbval() -> bool:
    """Whether this test run's nbval executed every chapter as the book does (tests/nbval_book.py)."""
    return all((EXECUTED / p.name).exists() and (EXECUTED / p.name).stat().st_mtime > p.stat().st_mtime
               for p in chapters().values())


#: this test run (every xdist worker of it shares the id; ``-n 0`` is one process)
TEST_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"


def built_book():
    """The rendered book's folder (:data:`HTML`), built unless it is newer than every source: the browser tests and
    the hygiene test (``tests/book/test_hygiene.py``) read one build. It waits for this run's chapters under nbval
    (another xdist worker may still run one), and one worker builds while another waits for it. A run builds at most
    once (``.book.run`` names the run whose book is there): a second build would rewrite the pages under a worker
    that is reading them."""
    from filelock import FileLock

    wait_for_chapters()
    HTML.parent.mkdir(parents=True, exist_ok=True)
    mark = HTML.parent / ".book.run"
    with FileLock(HTML.parent / ".book.lock"):
        ours = mark.exists() and mark.read_text() == TEST_RUN and (HTML / "index.html").exists()
        if not ours and not _book_is_fresh():
            render = ["--executed", str(EXECUTED)] if _executed_by_nbval() else []  # each chapter executes once
            proc = subprocess.run([sys.executable, "-m", "depthutils", "book", *render], capture_output=True,
                                  text=True, cwd=ROOT, timeout=3600)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        mark.write_text(TEST_RUN)
    return HTML


def test_a_run_builds_the_book_once(tmp_path, monkeypatch):
    """A second call in the same run never builds again, even when a source looks newer than the build (another
    worker may be reading the pages); the next run builds a stale book."""
    import test_book as me

    builds = []

    def build(cmd, **kw):
        builds.append(cmd)
        (tmp_path / "html").mkdir(exist_ok=True)
        (tmp_path / "html" / "index.html").write_text("<html></html>")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(me, "HTML", tmp_path / "html")
    monkeypatch.setattr(me, "wait_for_chapters", lambda: [])
    monkeypatch.setattr(me, "_book_is_fresh", lambda: False)  # a source touched after the build
    monkeypatch.setattr(me.subprocess, "run", build)
    assert me.built_book() == tmp_path / "html" and len(builds) == 1
    me.built_book()
    assert len(builds) == 1, "the run built the book twice"
    monkeypatch.setattr(me, "TEST_RUN", "another run")
    me.built_book()
    assert len(builds) == 2, "a stale book from another run was not built again"


@pytest.fixture(scope="module")
def book_url():
    built_book()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_chapters_are_numbered_in_the_order_of_the_sidebar():
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert [f for f in files if f.startswith("chapters/")] == [f"chapters/{p.stem}" for p in chapters().values()]
    assert "instructors" in files  # the instructor's page is in the book
    for num, path in chapters().items():
        title = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
        assert title.startswith(f"# {int(num)} · "), (path.name, title)


def test_every_page_of_the_toc_is_staged():
    """``book`` builds a staged copy (chapters, ``BOOK_FILES``, ``PAGES``): a page listed in ``_toc.yml`` but not
    staged would be missing from the build, and a staged page that is a file of the repository must exist."""
    import yaml

    from depthutils.book.runner import BOOK_FILES

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    staged = {f"chapters/{p.stem}" for p in chapters().values()} | {name.rsplit(".", 1)[0] for name in PAGES} \
        | {name[:-3] for name in BOOK_FILES if name.endswith(".md")}
    missing = [f for f in files if f not in staged]
    assert not missing, f"pages of _toc.yml the build does not stage: {missing}"
    assert all((ROOT / name).exists() for name in BOOK_FILES), BOOK_FILES
    assert "using_depthutils" in files  # the reference appendix is in the book


def test_the_publishing_workflow_builds_with_readme_command_1():
    """.github/workflows/book.yml cannot run here: parse it and check that it builds the book the README's way
    and publishes _build/html to GitHub Pages."""
    import re

    import yaml

    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    command_1 = re.search(r"# 1\. build the book.*\n(.+)\n", (ROOT / "README.md").read_text()).group(1).strip()
    steps = flow["jobs"]["build"]["steps"]
    assert any(step.get("run", "").strip() == command_1 for step in steps), command_1
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"].endswith("_build/html")
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in flow["jobs"]["deploy"]["steps"])
    assert flow["permissions"]["pages"] == "write" and flow["permissions"]["id-token"] == "write"


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (shutil.which("chromium") and shutil.which("chromedriver")) and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                       "chromium chromium-driver", shell=True, capture_output=True, timeout=900)
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver, "Debian's chromium and chromium-driver are needed: apt-get install chromium chromium-driver"
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(options=opts, service=Service(driver))
    b.set_window_size(1280, 1000)  # a reader's laptop
    b.execute_cdp_cmd("Network.enable", {})  # without it the next command is ignored
    b.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})  # each test reads the page as it is now
    yield b
    b.quit()


def _open(browser, url: str, wait: float = 60) -> None:
    """Load ``url`` and wait until the whole page is there (its footer, the last thing it has, is in the DOM); a page
    that is not is loaded once more, and then it fails with what the browser has. Under load a page was once read
    with none of its exercises or tables: from here on such a page says so instead of failing a check of its own."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    whole = ("return document.readyState === 'complete' && location.href === arguments[0] "
             "&& document.querySelector('footer.bd-footer') !== null")
    for _ in range(2):
        browser.get(url)
        try:
            WebDriverWait(browser, wait, poll_frequency=0.2).until(lambda b: b.execute_script(whole, url))
            return
        except TimeoutException:
            pass
    seen = browser.execute_script("return [location.href, document.readyState, document.documentElement.outerHTML.length]")
    raise AssertionError(f"{url} did not load whole in the browser, twice: it has {seen}")


def _png_bytes(src: str) -> bytes:
    """A figure's PNG as the page has it: inlined (a data URI) or served."""
    import base64
    import urllib.request

    if src.startswith("data:"):
        return base64.b64decode(src.split(",", 1)[1])
    with urllib.request.urlopen(src, timeout=30) as r:
        return r.read()


def _illegible(browser, figures: list[dict]) -> list[str]:
    """The page's figures whose smallest text, at the width the page shows them, is smaller than the page's own
    small print (its code and outputs), or whose tick labels overlap, as :func:`depthutils.book.plotstyle.save`
    recorded them in the PNG. A figure in a hidden tab or a closed solution is taken at the width it opens at."""
    import io

    from PIL import Image

    small_px, column = browser.execute_script("""
        const pre = document.querySelector('main div.cell_output pre, main div.cell_input pre');
        const column = document.querySelector('main div.cell_output') || document.querySelector('main');
        return [parseFloat(getComputedStyle(pre).fontSize), column.clientWidth];""")
    bad = []
    for f in figures:
        png = Image.open(io.BytesIO(_png_bytes(f["src"])))
        info, name = png.info, f["alt"][:50]
        if "depthutils:min_font_pt" not in info:
            bad.append(f"{name}: not saved by plotstyle.save")
            continue
        shown = f["shown"] or min(f["natural"], column)
        px = float(info["depthutils:min_font_pt"]) / 72 * shown / (png.size[0] / float(info["depthutils:dpi"]))
        if px < small_px - 0.5:
            bad.append(f"{name}: smallest text {px:.1f} px < {small_px:.0f} px")
        if info["depthutils:overlaps"] != "0":
            bad.append(f"{name}: {info['depthutils:overlaps']} overlapping tick labels")
    return bad


@pytest.mark.parametrize("stem", [p.stem for p in chapters().values()])
def test_chapter_page_in_a_browser(book_url, browser, stem):
    _open(browser, f"{book_url}/chapters/{stem}.html")
    browser.execute_script("return document.readyState")  # page loaded
    images = browser.execute_script(
        "return Array.from(document.querySelectorAll('main img')).map(i => [i.complete, i.naturalWidth, i.src.slice(0, 60)])")
    assert images, f"{stem}: no figures on the page"
    assert all(ok and width > 0 for ok, width, _ in images), f"{stem}: a figure did not load: {images}"
    text = browser.execute_script("return document.body.innerText")
    for junk in ("Traceback (most recent call last)", "it/s]", "%|", "Warning:", "WARNING", "{glue", "glue:text",
                 "PosixPath(", "<Figure size"):
        assert junk not in text, f"{stem}: the page shows {junk!r}"
    assert re.search(r"This chapter ran in \d+ s with its default parameters, on \S|A class run \(default parameters: "
                     r"the embedded models only\) takes about \d+ s here.*whole run, with those sections, took \d+ s, on \S",
                     text), f"{stem}: no line on its run time"
    # the verdict box names every pretrained model whose section ran on this page, with its outcome
    ran = [title for title in ("SmolLM2-135M", "Gemma 3 270M") if f"{title}'s grade is in the chapter's verdict box" in text]
    boxes = browser.execute_script("return Array.from(document.querySelectorAll('main div.verdict-box')).map(b => b.innerText)")
    assert boxes, f"{stem}: no verdict box"
    for title in ran:
        assert any(re.search(rf"{re.escape(title)}\s.*(shown|mixed|not tested)", b) for b in boxes), f"{stem}: {title} ran, its box does not grade it"
    # every figure: a caption, an alt text that says something, and a link to its full size
    figures = browser.execute_script("""
        return Array.from(document.querySelectorAll('main img')).map(i => {
          const fig = i.closest('figure'), link = i.closest('a');
          // textContent, not innerText: a figure inside a collapsed solution is hidden, and innerText of hidden text is ''
          return {alt: i.alt || '', caption: fig && fig.querySelector('figcaption') ? fig.querySelector('figcaption').textContent : '',
                  natural: i.naturalWidth, shown: i.clientWidth, href: link ? link.href : '', src: i.src};
        });""")
    for f in figures:
        assert len(f["alt"]) >= 20 and not re.fullmatch(r"[0-9a-f]{16,}(\.png)?", f["alt"]), f"{stem}: alt text {f['alt']!r}"
        assert len(f["caption"]) >= 40, f"{stem}: a figure without a caption ({f['src'][-40:]})"
        if f["natural"] > f["shown"] + 1:  # shown smaller than drawn (or in a hidden tab): it opens full size
            assert f["href"] == f["src"], f"{stem}: a reduced figure without a link to its full size"
    illegible = _illegible(browser, figures)
    assert not illegible, f"{stem}: figures that cannot be read at the width they are shown: {illegible}"
    # nothing runs past the page: outputs wrap, tables stay inside the text column (scrolling in their box)
    overflow = browser.execute_script("""
        const main = document.querySelector('main').getBoundingClientRect();
        const bad = [];
        document.querySelectorAll('main div.cell_output pre, main div.cell_input pre').forEach(p => {
          if (p.offsetParent && p.scrollWidth > p.clientWidth + 1) bad.push('pre: ' + p.innerText.slice(0, 60)); });
        document.querySelectorAll('main table').forEach(t => {
          const r = t.getBoundingClientRect();
          if (t.offsetParent && r.right > main.right + 1) bad.push('table: ' + t.innerText.slice(0, 60)); });
        document.querySelectorAll('main mjx-container[display="true"]').forEach(m => {
          if (m.scrollWidth > m.clientWidth + 1) bad.push('formula: ' + m.textContent.slice(0, 40)); });
        if (document.documentElement.scrollWidth > window.innerWidth + 1) bad.push('page');
        return bad;""")
    assert not overflow, f"{stem}: runs past the page: {overflow}"
    assert "Verdict: " in text and re.search(r"Criterion( \([^)]*\))?:", text), f"{stem}: no computed verdict on the page"
    assert "In this run" in text or "What this run shows" in text or "Reading this run" in text, stem
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"{stem}: console errors {errors}"


def test_sidebar_order_and_the_intros_verdict_table(book_url, browser):
    """The intro's overview: a row per verdict, a column per model that ran in the build (read from the staged
    chapters as the build read them), each cell an outcome and its number, and nothing cut off at 1280 px."""
    from depthutils.book import overview

    _open(browser, f"{book_url}/intro.html")
    titles = browser.execute_script(
        "return Array.from(document.querySelectorAll('nav.bd-docs-nav a.reference.internal')).map(a => a.innerText.trim())")
    numbers = [int(t.split(" ·")[0]) for t in titles if re.match(r"\d+ ·", t)]
    assert numbers == list(range(len(chapters()))), titles
    ran = overview.models_run(overview.read_run(ROOT / "_build" / "src" / "chapters"))
    outcome = re.compile(r"(shown|mixed|not shown|not tested)( · [+\-−]?\d+(\.\d+)?(e[+\-]\d+)?)?")
    for name, table_rows, reviewers in (("overview", overview.CLAIM_ROWS, False),
                                        ("overview-reviewers", overview.REVIEW_ROWS, True)):
        head, rows, cut = browser.execute_script("""
            const t = document.querySelector('main table#' + arguments[0] + ', main #' + arguments[0] + ' table');
            return t ? [Array.from(t.querySelectorAll('thead th')).map(c => c.innerText.trim().replace('\u2019', "'")),
                        Array.from(t.querySelectorAll('tbody tr')).map(r => Array.from(r.cells).map(c => c.innerText.trim())),
                        t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().right > innerWidth]
                     : [[], [], true];""", name)
        assert head == overview.head(reviewers, ran), head
        assert len(rows) == len(table_rows) and not cut, (rows, cut)
        first = 3 if reviewers else 4
        for row, cells in zip(table_rows, rows):
            assert outcome.fullmatch(cells[first]), cells
            for cell in cells[first + 1:]:  # a real model's cell: its outcome, or "not run" where it was left out
                assert (outcome.fullmatch(cell) or cell == "not run") if row.real else cell == "—", cells
            assert cells[2] not in ("", "—"), cells
    text = browser.execute_script("return document.querySelector('main').innerText")
    for name in REAL_MODELS:
        assert ("fetch " + name in text) == (name not in ran), name
    assert "{glue" not in text and "OVERVIEW" not in text and "% SUMMARY" not in text
    plain = text.replace("\u2019", "'")  # Sphinx's smart quotes
    assert "What held in this build" in plain and "P1's reviewers' questions" in plain
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('main table.overview td a')).map(a => a.getAttribute('href'))")
    assert {link.split("/")[-1].split(".")[0] for link in links} == {p.stem for p in chapters().values()}


@pytest.mark.parametrize("stem", [p.stem for p in chapters().values()])
def test_exercises_and_collapsed_solutions_in_a_browser(book_url, browser, stem):
    """Every chapter: at least two exercises, each with a solution that is collapsed until clicked, and an
    implement-it exercise whose checker ran (its tick is inside the solution)."""
    _open(browser, f"{book_url}/chapters/{stem}.html")
    found = browser.execute_script("""
        const ex = document.querySelectorAll('main .exercise');
        const sol = Array.from(document.querySelectorAll('main .solution'));
        return {exercises: ex.length, solutions: sol.length,
                collapsed: sol.filter(s => s.classList.contains('dropdown') || s.closest('details')).length,
                hidden: sol.filter(s => s.classList.contains('toggle-hidden')).length,
                text: sol.map(s => s.textContent).join(' ')};""")
    assert found["exercises"] >= 2 and found["solutions"] >= 2, (stem, found["exercises"], found["solutions"])
    assert found["collapsed"] == found["solutions"], f"{stem}: a solution is not collapsed"
    assert found["hidden"] == found["solutions"], f"{stem}: a solution's body shows before it is opened"
    assert "✔" in found["text"] and "match the library" in found["text"], f"{stem}: the solution's check did not run"


def test_instructors_page_in_a_browser(book_url, browser):
    _open(browser, f"{book_url}/instructors.html")
    rows = browser.execute_script("""
        const t = Array.from(document.querySelectorAll('main table')).find(t => t.innerText.includes('class run'));
        return t ? Array.from(t.querySelectorAll('tbody tr')).map(r => Array.from(r.cells).map(c => c.innerText.trim())) : [];""")
    assert len(rows) == len(chapters()), rows
    # every run time glued from the build: the class run (the chapter without its real-model sections) and the
    # whole chapter, which is never shorter
    assert all(re.fullmatch(r"\d+", r[1]) and re.fullmatch(r"\d+", r[2]) and int(r[1]) <= int(r[2]) for r in rows), rows
    text = browser.execute_script("return document.body.innerText")
    for part in ("A 90-minute session", "A three-session module", "Prerequisites", "common mistakes",
                 "python -m depthutils book --no-real", "python -m pytest", "other models", "install before class",
                 "10.2 answer_only_targets"):
        assert part in text, part
    assert "about as long" not in text and "no internet:" not in text


def test_bigger_models_page_shows_the_plans_in_a_browser(book_url, browser):
    """The page's two tables are the build's plans (a row per chapter of plan_page), and its sentences are
    filled in, not raw glue."""
    _open(browser, f"{book_url}/bigger_models.html")
    tables = browser.execute_script("""
        return Array.from(document.querySelectorAll('main table')).map(
            t => Array.from(t.querySelectorAll('tbody tr')).map(r => r.cells[0].innerText.trim()));""")
    assert len(tables) == 2 and all(len(t) == len(plan_page.PAGE_CHAPTERS) for t in tables), tables
    text = browser.execute_script("return document.body.innerText")
    assert "{glue" not in text and "H100" in text and "NDIF" in text
    assert "Llama-3.1-70B" in text and ("exceed one H100" in text or "fits" in text)


def _claims_of(stem: str) -> list:
    """The claims a chapter's "paper vs this run" table covers: its own, chapter 5 the context claim it shares
    with chapter 4; chapter 9's one table covers its three verdicts (size, chain of thought, difficulty)."""
    from depthutils.book.claim_table import CLAIMS

    return [c for c in CLAIMS.values() if c.chapter == stem[:2] or (stem[:2] == "05" and c.key == "context")]


@pytest.mark.parametrize("stem", [p.stem for p in chapters().values()])
def test_the_paper_vs_run_table_sets_the_same_statistic_side_by_side_in_a_browser(book_url, browser, stem):
    """In the "paper vs this run" table, the graded statistic has a row of its own (named by it), with
    the paper's value and this run's value in it; no table on the page shows raw LaTeX."""
    _open(browser, f"{book_url}/chapters/{stem}.html")
    tables = browser.execute_script("""
        return Array.from(document.querySelectorAll('main table')).map(t =>
          Array.from(t.querySelectorAll('tr')).map(r => Array.from(r.cells).map(c => c.textContent.trim())));""")
    paper = [t for t in tables if t and any("this run" in cell for cell in t[0])]
    assert paper, f"{stem}: no 'paper vs this run' table"
    labels = [row[0] for t in paper for row in t[1:]]
    for claim in _claims_of(stem):
        rows = [row for t in paper for row in t[1:] if row[0].startswith(claim.short)]
        assert rows, f"{stem}: no row for {claim.short!r} among {labels}"
        for row in rows:
            assert len(row) == 3 and row[1] and row[2] and row[2] != "—", f"{stem}: {row}"
    for t in tables:
        for row in t:
            for cell in row:
                assert not re.search(r"\$|\\\(|\\frac|\\sum|_\{|\^\{", cell), f"{stem}: raw LaTeX in a table: {cell!r}"


def test_every_citation_links_to_its_paper_in_a_browser(book_url, browser):
    """Every work cited is on the References page, with a link to it where the bibliography gives one (the arXiv
    abstract for an arXiv paper), and the intro's citations of P1 and P2 link to their entries there."""
    _open(browser, f"{book_url}/references.html")
    entries = browser.execute_script("""
        return Array.from(document.querySelectorAll('main [role="doc-biblioentry"]')).map(e => [e.id,
          Array.from(e.querySelectorAll('a')).map(a => a.href).filter(h => h.startsWith('http')), e.innerText]);""")
    bib = (ROOT / "references.bib").read_text()
    assert len(entries) == len(re.findall(r"^@", bib, flags=re.M)), entries  # every entry, each once
    arxiv = set(re.findall(r"eprint\s*=\s*\{([\d.]+)\}", bib))
    linked = {h.rsplit("/", 1)[-1] for _, links, _ in entries for h in links if "arxiv.org/abs/" in h}
    assert arxiv <= linked, arxiv - linked
    _open(browser, f"{book_url}/intro.html")
    cited = browser.execute_script(
        "return Array.from(document.querySelectorAll('main a.reference.internal')).map(a => a.getAttribute('href'))")
    for arxiv_id in ("2505.13898", "2512.14064"):  # P1 and P2
        entry = next(i for i, links, _ in entries if any(h.endswith(arxiv_id) for h in links))
        assert any(href.endswith(f"references.html#{entry}") for href in cited), (arxiv_id, cited)
