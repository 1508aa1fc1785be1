"""Public-domain English text and the training-batch mixer.

The English text is read from a corpus folder (default ``../shared/corpora``
relative to the repository root: ``kjv.txt`` and ``tinyshakespeare.txt``); it
is never copied into the repository.  The last 5 % of each file is held out
for the text-loss measurement in the model card.

A training batch is a deterministic function of ``(seed, step)``: documents
``[BOS] text [EOS]`` are drawn from the mix below and packed into rows of
``seq_len + 1`` tokens.  Resuming at step *k* therefore sees exactly the
batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import random
from pathlib import Path

CORPUS_FILES = ["kjv.txt", "tinyshakespeare.txt"]
HELDOUT_FRACTION = 0.05

#: Document mix (probability of each document kind).  Arithmetic and facts are
#: oversampled heavily relative to English text.
MIX = {"addition": 0.55, "multihop": 0.31, "word_problem": 0.07, "text": 0.07}
TEXT_DOC_TOKENS = 96  # English text comes in windows of this many tokens


def load_texts(corpus_dir: Path, split: str = "train") -> list[tuple[str, str]]:
    """Return ``[(text, filename)]`` for the train (first 95 %) or heldout split."""
    out = []
    for name in CORPUS_FILES:
        path = Path(corpus_dir) / name
        if not path.is_file():
            raise FileNotFoundError(f"corpus file missing: {path} (pass --corpus DIR)")
        text = path.read_text(encoding="utf-8")
        cut = text.rfind("\n", 0, int(len(text) * (1 - HELDOUT_FRACTION))) + 1
        out.append((text[:cut] if split == "train" else text[cut:], name))
    return out


class BatchMaker:
    """Builds packed token batches from the task mix and the English text."""

    def __init__(self, tokenizer, corpus_dir: Path, style: str = "direct",
                 batch_size: int = 16, seq_len: int = 256, seed: int = 1234, mix=None):
        import numpy as np

        self.tok = tokenizer
        self.style, self.batch_size, self.seq_len, self.seed = style, batch_size, seq_len, seed
        self.mix = dict(mix or MIX)
        self.bos, self.eos = tokenizer.bos_token_id, tokenizer.eos_token_id
        texts = load_texts(corpus_dir, "train")
        self.text_ids = np.concatenate([
            np.asarray(tokenizer(t, add_special_tokens=False)["input_ids"], dtype=np.int32)
            for t, _ in texts])

    def _text_doc(self, rng: random.Random) -> list[int]:
        start = rng.randrange(len(self.text_ids) - TEXT_DOC_TOKENS)
        return self.text_ids[start:start + TEXT_DOC_TOKENS].tolist()

    def batch(self, step: int):
        """The ``(batch_size, seq_len + 1)`` LongTensor for training step ``step``."""
        import torch

        from depthutils.ladder import tasks

        rng = random.Random(f"{self.seed}:{self.style}:{step}")
        need = self.batch_size * (self.seq_len + 1)
        kinds, weights = list(self.mix), list(self.mix.values())
        stream: list[int] = []
        while len(stream) < need:
            draws = rng.choices(kinds, weights, k=64)
            task_texts = [tasks.sample_task(rng, k, self.style).text for k in draws if k != "text"]
            enc = iter(self.tok(task_texts, add_special_tokens=False)["input_ids"]) if task_texts else iter(())
            for k in draws:
                body = self._text_doc(rng) if k == "text" else next(enc)
                stream += [self.bos, *body, self.eos]
        return torch.tensor(stream[:need], dtype=torch.long).view(self.batch_size, self.seq_len + 1)

    def pairs(self, step: int) -> list:
        """``[(inputs, targets, None)]`` of training step ``step``: the batch without its last and first token,
        every target weighed alike."""
        batch = self.batch(step)
        return [(batch[:, :-1], batch[:, 1:], None)]
