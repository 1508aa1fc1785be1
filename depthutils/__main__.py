"""Command line: ``python -m depthutils models``.

``models`` lists the embedded models and their aliases.
"""
from __future__ import annotations

import argparse
import sys


def cmd_models(args) -> int:
    from .ladder.registry import list_models

    rows = list_models()
    if not rows:
        print("No embedded models found under data/models.")
        return 1
    print(f"{'alias':<22} {'folder':<14} {'layers':>6} {'params':>10}  description")
    for r in rows:
        params = f"{r['params'] / 1e6:.2f}M" if r["params"] else "?"
        print(f"{r['alias']:<22} {r['folder']:<14} {r['layers']:>6} {params:>10}  {r['description']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m depthutils", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the embedded models and their aliases").set_defaults(func=cmd_models)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
