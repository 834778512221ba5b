"""`repro downstream` and `downstream-table`; lm-eval (an extra) is imported only when used."""

from __future__ import annotations

from pathlib import Path

from repro.config import options
from repro.errors import ReproError
from repro.runtime import network


def _import():
    network.offline_unless_reachable()  # before lm-eval imports the hub's clients
    try:
        from repro.annex.downstream import compare, model, tasks
    except ImportError as e:
        raise ReproError(
            f"repro downstream needs lm-evaluation-harness ({e.name} is missing): "
            "pip install -e '.[downstream]'"
        ) from None
    return compare, model, tasks


def check_downstream(args) -> None:
    """The options and local files, checked before lm-eval and the hub."""
    options.check_positive(args, "limit", "batch_size")
    if args.num_fewshot is not None and args.num_fewshot < 0:
        raise ReproError(f"--num-fewshot: {args.num_fewshot} is negative")
    if not args.checkpoint.is_file():
        raise ReproError(f"--checkpoint {args.checkpoint}: no such file")
    if args.out.exists() and not args.out.is_dir():
        raise ReproError(f"--out {args.out}: a file, not a folder")
    # lm-eval silently skips an include path that is not a folder
    if args.include_path is not None and not args.include_path.is_dir():
        raise ReproError(f"--include-path {args.include_path}: no such folder")


def cmd_downstream(args) -> None:
    check_downstream(args)
    _, model, tasks = _import()
    lm = model.ReproLM(checkpoint=args.checkpoint, device=args.device, batch_size=args.batch_size)
    manager = tasks.load_tasks(args.task, args.include_path)
    results = tasks.run_tasks(
        lm, args.task, manager, args.out, limit=args.limit, num_fewshot=args.num_fewshot
    )
    for line in tasks.summary_lines(results):
        print(line)
    print(f"{args.out}: lm-eval's {tasks.RESULTS_JSON} and each item's scores ({tasks.ITEMS_JSON})")


def cmd_downstream_table(args) -> None:
    compare, _, _ = _import()
    table = compare.write_comparison(args.result_dirs, args.baseline, args.out)
    seeds = {compare.experiment_seed(d)[1] for d in args.result_dirs}
    experiments = table["experiment"].nunique()
    print(f"{args.out}: {len(table)} rows ({experiments} experiments, {len(seeds)} seeds)")


def add_commands(sub) -> None:
    p = sub.add_parser(
        "downstream",
        help="a checkpoint (ours or the authors') on lm-evaluation-harness tasks",
    )
    options.add_checkpoint(p)
    p.add_argument(
        "--task",
        action="append",
        required=True,
        help="an lm-eval task (repeat for several): hellaswag, lambada_openai, arc_easy, piqa, "
        "wikitext, ... (their data download from the Hugging Face hub on first use)",
    )
    p.add_argument("--out", type=Path, required=True, help="folder for results.json, items.json")
    p.add_argument("--include-path", type=Path, help="a folder of task YAML files of your own")
    p.add_argument("--limit", type=int, help="only the first N items of each task (a quick look)")
    p.add_argument("--num-fewshot", type=int, help="examples in the context (default: the task's)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass")
    options.add_device(p)
    p.set_defaults(func=cmd_downstream)

    p = sub.add_parser(
        "downstream-table",
        help="experiments' `repro downstream` results side by side, paired with the baseline's",
    )
    p.add_argument(
        "result_dirs",
        nargs="+",
        help="`repro downstream --out` folders, named as their experiments; seed k's in a "
        "seed<k>/ folder (seed<k>/<experiment>), paired with the baseline's of the same seed",
    )
    p.add_argument("--baseline", default="baseline", help="the folder to compare with")
    p.add_argument("--out", type=Path, required=True, help="the CSV to write")
    p.set_defaults(func=cmd_downstream_table)
