"""The project's byte-level BPE tokenizer.

* pre-tokenizer: ``Sequence([Digits(individual_digits=True), ByteLevel(add_prefix_space=False)])``
  so every digit is its own token (a space before a digit is its own token too);
* special tokens ``<|bos|>``, ``<|eos|>``, ``<|pad|>``;
* a ``TemplateProcessing`` post-processor that prepends ``<|bos|>``
  automatically, so position 0 of every encoded prompt is BOS;
* saved as a ``PreTrainedTokenizerFast`` (``tokenizer.json`` +
  ``tokenizer_config.json``), loadable with ``AutoTokenizer`` too.
"""

from __future__ import annotations

import random
from pathlib import Path

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
VOCAB_SIZE = 2048


def train_tokenizer(corpus_dir: Path, out_dir: Path, vocab_size: int = VOCAB_SIZE,
                    n_task_examples: int = 20000, seed: int = 0):
    """Train the BPE on the training part of the corpus plus generated tasks.

    Returns the ``PreTrainedTokenizerFast`` (also saved to ``out_dir``).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from depthutils.ladder import corpus, tasks

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)

    rng = random.Random(seed)
    texts = [t for t, _ in corpus.load_texts(corpus_dir, split="train")]
    kinds = ["addition", "word_problem", "multihop"]
    texts += [tasks.sample_task(rng, kinds[i % 3], "direct" if i % 2 else "cot").text
              for i in range(n_task_examples)]
    tok.train_from_iterator(_chunks(texts), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS,
                                   pad_token=PAD, model_max_length=1024)
    save_tokenizer(fast, out_dir)
    return fast


def save_tokenizer(tok, out_dir: Path) -> None:
    """Save ``tok`` and name the class ``PreTrainedTokenizerFast`` in its config.

    (transformers 5 writes its internal backend name; the generic class name
    keeps the files loadable by ``AutoTokenizer`` across versions.)
    """
    import json

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(out_dir))
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")


def _chunks(texts, size: int = 4000):
    """Yield the texts in pieces (BPE training is line-agnostic)."""
    for text in texts:
        for i in range(0, len(text), size):
            yield text[i:i + size]


def load_tokenizer(path: Path):
    """Load a saved tokenizer as ``PreTrainedTokenizerFast``."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path))


