"""A check leaves the model as it found it, whatever the student's code did, and the errors students meet
most come back as one sentence saying what to change.

Each crashing attempt below is followed by the reference solution's own check, which must pass, and by a
comparison of everything a student's code can change on the model with what it was before.
"""
from __future__ import annotations

import json
import re

import pytest
import torch
from torch.nn.modules import module as torch_module

from depthutils.book.runner import chapters
from depthutils.core.errors import DepthError
from depthutils.teaching import exercises


def fingerprint(lm) -> dict:
    """Everything a student's code can leave changed on ``lm``, in comparable form."""
    hf = lm.hf
    hooks = {name: tuple(len(getattr(m, h, {})) for h in ("_forward_hooks", "_forward_pre_hooks",
                                                          "_backward_hooks", "_backward_pre_hooks"))
             for name, m in hf.named_modules()}
    return {"grad": torch.is_grad_enabled(), "hooks": hooks,
            "global": (len(torch_module._global_forward_hooks), len(torch_module._global_forward_pre_hooks)),
            "forward": {name: type(m.__dict__.get("forward")).__name__ for name, m in hf.named_modules()},
            "training": any(m.training for m in hf.modules()),
            "requires_grad": tuple(p.requires_grad for p in hf.parameters()),
            "weights": float(sum(p.detach().double().abs().sum() for p in hf.parameters())),
            "attn": hf.config._attn_implementation, "name": lm.name}


def hook_left(lm, input_ids, layer):
    lm.hf_layer(layer).register_forward_hook(lambda m, a, o: o * 0)
    raise RuntimeError("a student's bug")


def pre_hook_left(lm, input_ids, layer):
    lm.hf_layer(0).register_forward_pre_hook(lambda m, args: (args[0] * 0, *args[1:]))
    raise RuntimeError("a student's bug")


def global_hook_left(lm, input_ids, layer):
    torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: None)
    raise RuntimeError("a student's bug")


def crash_in_trace(lm, input_ids, layer):
    with lm.nn.trace(input_ids):
        lm.layer(layer).output[:] = 0
        lm.layer(layer).output[99999].save()  # an index error inside the trace
    raise RuntimeError("not reached")


def grad_off(lm, input_ids, layer):
    torch.set_grad_enabled(False)
    raise RuntimeError("a student's bug")


def eager(lm, input_ids, layer):
    lm.hf.set_attn_implementation("eager")
    raise RuntimeError("a student's bug")


def forward_replaced(lm, input_ids, layer):
    mod = lm.hf_layer(layer).mlp
    mod.forward = lambda *a, **k: 0
    raise RuntimeError("a student's bug")


def weights_edited(lm, input_ids, layer):
    with torch.no_grad():
        lm.hf_layer(layer).mlp.down_proj.weight.zero_()
    raise RuntimeError("a student's bug")


def training_and_grads(lm, input_ids, layer):
    lm.hf.train()
    for p in lm.hf.parameters():
        p.requires_grad_(False)
    lm.name = "renamed"
    raise RuntimeError("a student's bug")


CRASHES = [hook_left, pre_hook_left, global_hook_left, crash_in_trace, grad_off, eager, forward_replaced,
           weights_edited, training_and_grads]


@pytest.mark.parametrize("attempt", CRASHES, ids=lambda f: f.__name__)
def test_a_crashed_attempt_leaves_the_model_as_it_was(attempt, capsys):
    lm = exercises._model("default")
    before = fingerprint(lm)
    with pytest.raises(Exception):
        exercises.check("layer_output", attempt)
    assert fingerprint(lm) == before
    exercises.check("layer_output", exercises.solution("layer_output"))
    assert "✔" in capsys.readouterr().out


def test_gradients_switched_off_do_not_break_the_next_ig_check(capsys):
    """Integrated gradients needs gradients: a student's attempt that switched them off and crashed must
    not make the reference solution fail its check."""
    def attempt(lm, input_ids, layer, predict_positions, answer_ids, steps):
        torch.set_grad_enabled(False)
        lm.hf_layer(layer).register_forward_hook(lambda m, a, o: o + 1)
        raise RuntimeError("a student's bug")
    with pytest.raises(RuntimeError):
        exercises.check("ig_riemann", attempt)
    assert torch.is_grad_enabled()
    exercises.check("ig_riemann", exercises.solution("ig_riemann"))
    assert "✔" in capsys.readouterr().out


# ------------------------------------------------------------------------- errors said in one sentence
def one_sentence(err) -> str:
    msg = str(err.value)
    assert "\n" not in msg and "Traceback" not in msg and len(msg) < 400, msg
    assert err.value.__cause__ is None and (err.value.__context__ is None or err.value.__suppress_context__), \
        "the library's traceback is hidden"
    return msg


def test_out_of_order_read_says_what_to_change():
    def out_of_order(lm, input_ids, layer):
        with lm.nn.trace(input_ids):
            lm.layer(layer + 1).output.save()
            out = lm.layer(layer).output.save()
        return out
    with pytest.raises(DepthError) as err:
        exercises.check("layer_output", out_of_order)
    msg = one_sentence(err)
    assert "in the order the model runs them" in msg and "layer_output" in msg


def test_value_used_without_save_says_what_to_change():
    def no_save(lm, input_ids, layer):
        with lm.nn.trace(input_ids):
            out = lm.layer(layer).output
        return out
    with pytest.raises(DepthError) as err:
        exercises.check("layer_output", no_save)
    assert ".save()" in one_sentence(err)


@pytest.mark.parametrize("fn, phrase", [
    (lambda lm, ids, layer: None, "rename `ids` to `input_ids`"),
    (lambda lm, input_ids: None, "add `layer`"),
    (lambda lm, input_ids, layer, extra: None, "remove (or give a default to) `extra`"),
])
def test_renamed_parameter_says_what_to_change(fn, phrase):
    with pytest.raises(DepthError) as err:
        exercises.check("layer_output", fn)
    msg = one_sentence(err)
    assert phrase in msg and "input_ids" in msg, msg


def test_a_type_error_inside_the_students_code_is_not_misnamed():
    """Only a signature that does not accept the arguments is reported as a parameter problem."""
    def body_bug(lm, input_ids, layer):
        return len(3)
    with pytest.raises(TypeError, match="has no len"):
        exercises.check("layer_output", body_bug)


def test_exercises_are_numbered_per_chapter(capsys):
    """Chapter N's exercises are N.2 (core, after the prediction exercise N.1), then N.3, … (stretch)."""
    numbers = {ex.id: ex.number for ex in exercises.EXERCISES.values()}
    by_chapter = {}
    for ex in exercises.EXERCISES.values():
        n, k = ex.number.split(".")
        assert int(n) == int(ex.chapter[:2]) and int(k) >= 2, (ex.id, ex.number)
        by_chapter.setdefault(int(n), []).append(int(k))
    assert all(2 in ks for ks in by_chapter.values()), by_chapter  # every chapter has its core exercise N.2
    # every chapter has a core exercise N.2 and at least one harder stretch exercise after it
    assert set(by_chapter) == {int(num) for num in chapters()}, by_chapter
    assert all(len(ks) >= 2 and max(ks) > 2 for ks in by_chapter.values()), by_chapter
    stretch = [ex for ex in exercises.EXERCISES.values() if ex.number.split(".")[1] != "2"]
    assert all(ex.difficulty >= 3 for ex in stretch), [(ex.number, ex.difficulty) for ex in stretch]
    assert len(set(numbers.values())) == len(numbers)
    assert {f"{int(ex.chapter[:2])}.2" for ex in exercises.EXERCISES.values()} <= set(numbers.values())
    exercises.check("9.2", exercises.solution("9.2"))
    assert "✔ effective_depth_kl" in capsys.readouterr().out


def test_the_pages_title_each_exercise_with_its_number():
    """Each chapter's page titles every exercise N.1, N.2, … in order (N.1 predict, N.2 implement it, then any
    stretch exercise), unnumbered by the extension (whose numbers run across the book), and every number the
    checker knows is a title on its chapter's page."""
    by_chapter = {}
    for ex in exercises.EXERCISES.values():
        by_chapter.setdefault(ex.chapter, set()).add(ex.number)
    for path in chapters().values():
        nb = json.loads(path.read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        n = int(path.stem[:2])
        every = re.findall(r"```\{exercise(?:-start)?\}[^\n]*\n", text)
        titles = re.findall(r"```\{exercise(?:-start)?\} (\d+\.\d+) · [^\n]+\n:label: [^\n]+\n:nonumber:\n", text)
        assert titles == [f"{n}.{k + 1}" for k in range(len(every))], (path.name, every, titles)  # all, in order
        assert f"{n}.2" in by_chapter[path.stem] and by_chapter[path.stem] <= set(titles), (path.name, titles)
