"""The prompts chapters 4 and 5 grade (depthutils.analysis.known_facts): a prompt the model does not answer is dropped,
a two-hop prompt counts only when the model knows both single hops, the ladder is tried on held-out prompts;
each check against a plain-transformers oracle (greedy decoding and teacher-forced argmax, one prompt at a time)."""
from __future__ import annotations

import pytest
import torch
from conftest import SHARED_DATA

import depthutils as du
from depthutils.analysis import known_facts as kf
from depthutils.book import claims
from depthutils.core.answers import given
from depthutils.core.errors import DepthError
from depthutils.core.prompts import Prompt, encode
from depthutils.models.real.catalog import cache_root

needs_data = pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data is not beside the project")

CONTEXTS = ["The spouse of the performer of Imagine is", "5 + 7 + 5 + 3 + 1 + 7 =", "She eats three for",
            "Janet's ducks lay", "The performer of", "Yoko Ono is", "per day. She", "every morning and",
            "The spouse of", "16 eggs per"]


def oracle_greedy(hf, tok, context: str, max_new: int, bos: bool = True) -> list[int]:
    """Greedy decoding with plain transformers, one token at a time, no cache, no batch; it stops after
    the model's end-of-sequence token."""
    eos = hf.generation_config.eos_token_id
    eos = {eos} if isinstance(eos, int) else set(eos or [])
    ids = encode(tok, Prompt(context, len(context)), prepend_bos=bos).input_ids
    new = []
    for _ in range(max_new):
        with torch.no_grad():
            nxt = int(hf(ids).logits[0, -1].argmax())
        new.append(nxt)
        if nxt in eos:
            break
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return new


def oracle_forced(hf, tok, context: str, answer: str, bos: bool = True) -> bool:
    """Teacher-forced: is every answer token the top prediction at the position before it?"""
    enc = encode(tok, Prompt.from_parts(context, answer), need_answer=True, prepend_bos=bos)
    with torch.no_grad():
        top = hf(enc.input_ids).logits[0].argmax(-1)
    return all(int(top[p]) == a for p, a in zip(enc.predict_positions, enc.answer_ids))


def answerable(hf, tok):
    """Contexts whose one-token greedy answer the model also gives teacher-forced (the joint tokenisation
    keeps the token), each with that answer: what a tiny random model 'knows'."""
    out = []
    for c in CONTEXTS:
        (nxt,) = oracle_greedy(hf, tok, c, 1)
        text = tok.decode([nxt])
        if text.strip() and text.strip().isalnum() and oracle_forced(hf, tok, c, text):
            out.append((c, text))
    return out


@needs_data
def test_mquake_compositions_are_p1_style_two_hop_prompts():
    pairs = kf.mquake_pairs()
    texts = {c.context: c for c in pairs}
    assert len(texts) == len(pairs) > 500
    hey = texts["The director of the performer of Hey Jude is"]
    assert hey.forms[0] == "Brian Epstein"
    assert [h.context for h in hey.hops] == ["Hey Jude was performed by", "The director of The Beatles is"]
    assert [h.forms[0] for h in hey.hops] == ["The Beatles", "Brian Epstein"]
    assert not any("{" in t or "origianl" in t or "univeristy" in t for t in texts)


def test_the_checks_agree_with_plain_transformers(tiny):
    lm, hf = tiny("llama")
    known = answerable(hf, lm.tokenizer)
    assert known, "the tiny model gives no clean one-token answer to any context: pick other contexts"
    cands = [kf.Candidate("multihop", c, [a.strip()], "test") for c, a in known]
    cands += [kf.Candidate("multihop", c, ["zzqx"], "test") for c in CONTEXTS[:3]]
    kf.check(lm, cands, max_new=3, batch_size=4, progress_bar=False)
    for c in cands:
        want = lm.tokenizer.decode(oracle_greedy(hf, lm.tokenizer, c.context, 3), skip_special_tokens=True)
        assert c.continuation == want
        assert c.greedy == (given(want, c.forms) is not None)
        if c.greedy:
            assert c.forced == oracle_forced(hf, lm.tokenizer, c.context, c.answer)
    assert [c.answered for c in cands] == [True] * len(known) + [False] * 3


def test_selection_drops_unanswered_prompts_and_needs_both_hops(tiny, monkeypatch):
    lm, hf = tiny("llama")
    known = answerable(hf, lm.tokenizer)
    assert len(known) >= 2, "the tiny model answers fewer than two contexts: pick other contexts"
    (c1, a1), (c2, a2) = known[:2]
    hop = lambda c, a: kf.Candidate("hop", c, [a.strip()], "test")  # noqa: E731
    wrong = lambda c: kf.Candidate("hop", c, ["zzqx"], "test")  # noqa: E731
    made = [kf.Candidate("arithmetic", CONTEXTS[1], ["zzqx"], "P1"),                        # not answered
            kf.Candidate("multihop", c1, ["zzqx"], "P1", [hop(c1, a1), hop(c2, a2)]),      # not answered
            kf.Candidate("multihop", c1, [a1.strip()], "x", [hop(c1, a1), wrong(c2)]),     # one hop unknown
            kf.Candidate("multihop", c2, [a2.strip()], "y", [hop(c1, a1), hop(c2, a2)])]   # graded
    monkeypatch.setattr(kf, "candidates", lambda **kw: made)
    fp = kf.prompts_for(lm, n=3, batch_size=3, progress_bar=False)
    assert set(fp.prompts) == {"multihop"}
    assert fp.prompts["multihop"].context == c2 and fp.prompts["multihop"].answer.strip() == a2.strip()
    assert fp.accuracy("multihop") == {"tried": 3, "answered": 2, "both": 1, "graded": 1}
    assert set(fp.untested) == {"arithmetic"} and "answers 0 of 1" in fp.untested["arithmetic"]
    table = fp.table()
    assert list(table["graded"]) == [False, False, False, True]
    assert list(table["knows hop 2"])[1:] == [None, False, True]  # an unanswered prompt's hops are not decoded
    # the verdict: an arithmetic part the model answers none of is not tested, with its accuracy
    r = du.residual_erasure(lm, fp.prompts["multihop"], progress_bar=False,
                            baseline=du.residual_means(lm, [CONTEXTS[0]], progress_bar=False))
    v = claims.context.verdict({"multihop": r}, "erasing the residual", facts=fp)
    assert "arithmetic: not tested" in v.value and any("answers 0 of 1" in n for n in v.notes)
    assert "answers 2 of 3 prompts tried (P1's and MQuAKE's) and knows both single hops of 1 of those" in \
        v.rows["prompts the model answers"]
    table = claims.paper_vs_run(v, [r.meta])
    assert f"`{c2}` → {a2.strip()} (y)" in table
    # nothing gradable at all: the claim is not tested, with the accuracy
    monkeypatch.setattr(kf, "candidates", lambda **kw: made[:3])
    none = kf.prompts_for(lm, batch_size=3, progress_bar=False)
    assert none.prompts == {} and set(none.untested) == {"arithmetic", "multihop"}
    v = claims.context.verdict({}, "erasing the residual", facts=none)
    assert v.outcome == "not tested" and "answers 1 of 2" in v.notes[-1]


def test_the_ladder_is_graded_on_held_out_prompts_it_answers():
    from depthutils.ladder.tasks import heldout_check

    lm = du.load_model("default")
    own = {"arithmetic": ("5 + 7 + 5 + 3 + 1 + 7 = ", "28"),
           "multihop": ("The spouse of the performer of Crystal Wings is", " Freya Vance")}
    fp = kf.prompts_for(lm, synthetic=own, n=12, n_arithmetic=12, tried=20, tried_arithmetic=14, seed=123,
                        progress_bar=False)
    assert (fp.prompts["arithmetic"].context, fp.prompts["multihop"].context) == (own["arithmetic"][0], own["multihop"][0])
    chains = [p for k, p in fp.prompts.items() if k.split("_")[0] == "arithmetic"]
    # at least ten held-out chains of 3-6 operands that the model solves (greedy and teacher-forced)
    assert len(chains) >= 10 and all(heldout_check("addition", p.context) for p in chains)
    assert all(3 <= p.context.count("+") + 1 <= 6 for p in chains)
    graded = [c for c in fp.candidates if c.graded]
    assert all(c.answered for c in graded) and fp.kinds() == ["arithmetic", "multihop"]
    # two-hop: held-out compositions only, each with both of its (trained) single facts known
    hops = [c for c in graded if c.kind == "multihop"]
    assert hops and all(heldout_check("multihop", c.context) and c.knows_hops for c in hops)
    assert all(len(c.hops) == 2 for c in fp.candidates if c.kind == "multihop")
    assert "held out of its training" in fp.summary()
    with pytest.raises(DepthError, match="synthetic"):
        kf.prompts_for(lm)


def test_bad_counts_are_refused(tiny):
    lm, _ = tiny("llama")
    with pytest.raises(DepthError, match="tried"):
        kf.prompts_for(lm, tried=0)


@needs_data
@pytest.mark.real("smollm2-135m")
def test_smollm2_answers_what_plain_transformers_says_it_answers():
    from transformers import AutoModelForCausalLM

    # the oracle's dtype; no start token: it then answers P1's chain (28)
    lm = du.load_model("smollm2-135m", dtype="float32", prepend_bos=False)
    fp = kf.prompts_for(lm, tried=4, tried_arithmetic=2, seed=1, progress_bar=False)
    assert fp.prompts["arithmetic"].context == kf.P1_ARITHMETIC[0] and fp.prompts["arithmetic"].answer == "28"
    hf = AutoModelForCausalLM.from_pretrained(cache_root() / "smollm2-135m", dtype=torch.float32).eval()
    for c in fp.candidates + [h for c in fp.candidates for h in c.hops if h.checked]:
        want = lm.tokenizer.decode(oracle_greedy(hf, lm.tokenizer, c.context, 6, bos=False), skip_special_tokens=True)
        assert c.greedy == (given(want, c.forms) is not None), c.context
        if c.greedy:
            assert c.forced == oracle_forced(hf, lm.tokenizer, c.context, c.answer, bos=False), c.context
