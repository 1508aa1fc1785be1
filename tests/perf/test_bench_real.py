"""bench's real-model rows (``depthutils.perf.real_table``): a model missing from the cache is skipped with one
sentence, and on a tiny model each headline call's layer-passes sit at (chapter 3) or just above (chapters 2
and 5: the suffix check, and IG's stopped last layer) the floor they are reported against."""
from __future__ import annotations

import pytest
from conftest import build_tiny

from depthutils.perf import real_table as bench_real


def test_a_model_not_in_the_cache_is_skipped_in_one_sentence(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    report = bench_real.real_rows(("smollm2-135m",))
    why = report["smollm2-135m"]["skipped"]
    assert "not in the cache" in why and "fetch smollm2-135m" in why and why.count(". ") == 0
    assert capsys.readouterr().out.strip() == f"[smollm2-135m] skipped: {why}"


@pytest.mark.parametrize("chapter", ["02", "03", "05"])
def test_rows_count_against_the_floor(tiny_root, monkeypatch, chapter):
    monkeypatch.setattr(bench_real, "N_FUTURE", 2)
    monkeypatch.setattr(bench_real, "N_LENS", 2)
    r = bench_real._measure(str(build_tiny("llama", tiny_root)), chapter, 1)
    assert r["seconds"] > 0 and r["peak_rss_mb"] > 0
    if chapter == "03":
        assert r["layer_passes"] == pytest.approx(r["floor_layer_passes"])
    else:
        assert r["floor_layer_passes"] < r["layer_passes"] < 1.5 * r["floor_layer_passes"]
    if chapter == "02":
        assert r["layer_passes"] < r["per_layer_path_layer_passes"]


def test_a_batch_row_names_its_batch_and_what_the_cost_model_counts_for_it(tiny_root):
    """``bench --only batch``: a given batch is the one reported, the budget's own pick is marked as such, and the
    planned bytes grow with the batch; the stack path has no batch to report."""
    import depthutils as du
    from depthutils.core.encoding import encode_all
    from depthutils.measures.shared_prefix import sample_positions

    lm = du.load_model(str(build_tiny("llama", tiny_root)), dtype="float32")
    prompts = du.data.load("gsm8k", 2)
    encs = encode_all(lm, prompts)[1]
    positions = [sample_positions(e.n_tokens, 123, 4) for e in encs]
    small, large = (bench_real._batch_facts(lm, encs, positions, b, "batched") for b in (3, 9))
    assert (small["batch"], large["batch"], small["picked"]) == (3, 9, False)
    assert 0 < small["planned_gb"] < large["planned_gb"]
    picked = bench_real._batch_facts(lm, encs, positions, None, "batched")
    assert picked["picked"] and 2 <= picked["batch"] <= 4 * lm.n_layers + 1
    assert bench_real._batch_facts(lm, encs, positions, 3, "stack") == {"method": "stack"}
