"""Command line: ``python -m depthutils.ladder {tokenizer,prompts,train,evaluate,all,list}``.

    python -m depthutils.ladder train ladder-8      # train (resumes if interrupted)
    python -m depthutils.ladder evaluate ladder-8   # write README.md + card.json
    python -m depthutils.ladder all                 # whole ladder, in order
    python -m depthutils.ladder sweep               # the depth-necessity sweep, two runs at a time, and its table

On a shared machine export OMP_WAIT_POLICY=PASSIVE first (see train.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from depthutils.ladder import registry


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m depthutils.ladder", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, default=registry.DEFAULT_CORPUS_DIR,
                   help="folder with kjv.txt and tinyshakespeare.txt (default: %(default)s)")
    p.add_argument("--ckpt", type=Path, default=registry.DEFAULT_CKPT_DIR,
                   help="checkpoint root, outside the repo (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    p.add_argument("--device", default="cpu",
                   help="where training steps run: cpu or cuda (default: %(default)s)")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("tokenizer", help="train the BPE tokenizer into data/models/_tokenizer")
    sub.add_parser("prompts", help="write the evaluation sets to data/prompts")
    t = sub.add_parser("train", help="train one model (resumes from its checkpoint)")
    t.add_argument("name", choices=list(registry.SPECS))
    t.add_argument("--steps", type=int, default=None, help="override the spec's step count")
    t.add_argument("--out", type=Path, default=None,
                   help="output folder (default: data/models/NAME; an objectives run that is not shipped: "
                        "beside its checkpoint)")
    e = sub.add_parser("evaluate", help="evaluate a model and write its card")
    e.add_argument("name")
    sub.add_parser("book-prompts", help="choose data/prompts/book_prompts.json with the default model")
    sub.add_parser("all", help="tokenizer, prompts, every model in order, cards, book prompts")
    sub.add_parser("list", help="list the shipped models")
    sw = sub.add_parser("sweep", help="train the sweep's runs missing from its table, the fewest layers first (resumes; one thread per run), each "
                        "added to it as it ends")
    sw.add_argument("--jobs", type=int, default=2, help="runs at a time (default: %(default)s)")
    args = p.parse_args(argv)

    if args.cmd == "list":
        for row in registry.list_models():
            print(f"{row['alias']:<22} {row['folder']:<16} layers={row['layers']:<3} "
                  f"params={row['params']:<9} unique={row['params_unique']:<9} "
                  f"{row['description']}")
        return
    if args.cmd == "tokenizer":
        from depthutils.ladder.tokenizer import train_tokenizer
        train_tokenizer(args.corpus, registry.TOKENIZER_DIR)
        return
    if args.cmd == "prompts":
        from depthutils.ladder.evaluate import write_eval_sets
        write_eval_sets()
        return
    if args.cmd == "train":
        from depthutils.ladder.runs import out_dir
        from depthutils.ladder.train import train
        default = out_dir(args.name, args.ckpt) if args.name in registry.OBJECTIVE_RUNS else None
        train(args.name, args.corpus, args.ckpt, steps=args.steps, threads=args.threads,
              out_dir=args.out or default, device=args.device)
        return
    if args.cmd == "evaluate":
        from depthutils.ladder.evaluate import write_card
        write_card(args.name, args.corpus)
        return
    if args.cmd == "book-prompts":
        from depthutils.ladder.evaluate import choose_book_prompts
        choose_book_prompts()
        return
    if args.cmd == "sweep":
        import torch

        from depthutils.ladder.runs import is_trained, train_runs
        from depthutils.ladder.sweep import TABLE, missing, write_table
        torch.set_num_threads(1)  # the table's measurements, beside the runs' own processes
        todo = sorted(missing(), key=lambda name: registry.SPECS[name]["layers"])  # the shortest runs first
        for name in [n for n in todo if is_trained(n, args.ckpt)]:  # trained, not yet in the table
            write_table(args.ckpt, names=[name])
        failed = train_runs(todo, jobs=args.jobs, ckpt_root=args.ckpt, corpus_dir=args.corpus,
                            then=lambda name: write_table(args.ckpt, names=[name]))
        print(f"table: {TABLE}" + (f"; failed: {', '.join(failed)}" if failed else ""))
        return
    if args.cmd == "all":
        from depthutils.ladder.evaluate import choose_book_prompts, write_card, write_eval_sets
        from depthutils.ladder.train import train
        write_eval_sets()
        for name in registry.ORDER:
            train(name, args.corpus, args.ckpt, threads=args.threads, device=args.device)
            write_card(name, args.corpus)
        choose_book_prompts()


if __name__ == "__main__":
    main()
