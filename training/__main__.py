"""Command line: the same functions the Airflow training task calls.

    python -m training train --root file:///data --dataset flights [--version latest]
    python -m training train --version-uri gs://bucket/datasets/flights/<version>
    python -m training show --root file:///data --dataset flights
    python -m training tune --root file:///data --dataset flights [--trials 20 --minutes 30]
    python -m training bench-input --version-uri file:///data/datasets/flights/<version>
    python -m training score --root file:///data --dataset flights [--version V | --raw FILE ...]

``train`` writes every model and prints the gate's verdict; it exits 0 whether or not the
model is blessed, 3 when it is not and --fail-unblessed is set, 1 when the data cannot be
trained on or evaluated (the message says what to change). TensorFlow is imported only after
the arguments are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from training.config import AUTOTUNE, BenchConfig, InputConfig, TrainConfig

if TYPE_CHECKING:  # the CLI starts light: the type only annotates
    from training.record import Trained

ROOT_ENV = "PIPELINE_STORAGE_ROOT"
EXIT_REFUSED = 1  # bad input or a split that cannot be evaluated: nothing was trained
EXIT_NOT_BLESSED = 3  # --fail-unblessed and the model, written, is not blessed


def _add_version_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("dataset version (give --version-uri, or --root and --dataset)")
    g.add_argument("--version-uri", help="URI of a published version: <root>/datasets/<name>/<id>")
    g.add_argument("--root", default=os.environ.get(ROOT_ENV),
                   help=f"storage root URI (default: ${ROOT_ENV})")
    g.add_argument("--dataset", default="flights", help="dataset name (default: flights)")
    g.add_argument("--version", default="latest", help="version id or 'latest' (default)")


def _add_input_args(p: argparse.ArgumentParser) -> None:
    d = InputConfig()
    g = p.add_argument_group("input pipeline (defaults suit one host reading 128 MiB shards)")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help="examples per batch (%(default)s)")
    g.add_argument("--shuffle-buffer", type=int, default=d.shuffle_buffer,
                   help="examples in the shuffle buffer, 0 = off (%(default)s)")
    g.add_argument("--cycle-length", type=int, default=d.cycle_length,
                   help="shards read at once; -1 = one per CPU core (%(default)s)")
    g.add_argument("--read-buffer-bytes", type=int, default=d.read_buffer_bytes,
                   help="TFRecord read buffer per shard (%(default)s)")
    g.add_argument("--read-chunk", type=int, default=d.read_chunk,
                   help="records a parallel reader hands over at once (%(default)s)")
    g.add_argument("--cache", default=None,
                   help="cache parsed batches: 'memory' or a local folder (default: off)")
    g.add_argument("--ram-budget-bytes", type=int, default=None, help="tf.data autotune RAM budget")
    g.add_argument("--staging-dir", default=None,
                   help="copy shards here first, verified against the manifest's sha256")
    g.add_argument("--data-seed", type=int, default=None,
                   help="fix shard order and shuffles (deterministic, slightly slower)")


def _add_gate_args(t: argparse.ArgumentParser, d: TrainConfig) -> None:
    """The gate's knobs: how a model is judged and when it becomes current."""
    t.add_argument("--gate-confidence", type=float, default=d.gate_confidence,
                   help="one-sided level of the gate's paired loss test (%(default)s)")
    t.add_argument("--promote-tolerance", type=float, default=d.promote_tolerance,
                   help="a new current model may lose this much to the old (%(default)s)")
    t.add_argument("--min-eval-examples", type=int, default=d.min_eval_examples,
                   help="fewer test examples refuse the run (%(default)s)")
    t.add_argument("--fail-unblessed", action="store_true",
                   help=f"exit {EXIT_NOT_BLESSED} when the model is not blessed (default: exit 0; "
                        "the model is written either way and only a blessed one becomes current)")


def _folds(text: str) -> int:
    """``--folds``: a count of 2 or more, or 0 / off for no k-fold."""
    value = 0 if text.strip().lower() == "off" else int(text)
    if value < 0 or value == 1:
        raise argparse.ArgumentTypeError(f"expected 0 or off (no k-fold) or 2 or more, got {text}")
    return value


def _add_budget_args(t: argparse.ArgumentParser, d: TrainConfig) -> None:
    """What a run may spend: families fitted, epochs or steps, boosting rounds, a small table's
    k-fold. A flag left at its default leaves the spec's ``training:`` key of that name."""
    g = t.add_argument_group("budget (the spec's training: block sets these too; a flag wins)")
    g.add_argument("--family", choices=["auto", "trees", "mlp"], default=d.model.family,
                   help="model family; auto fits both and keeps the better on eval (%(default)s)")
    g.add_argument("--epochs", type=int, default=d.epochs, help="upper bound (%(default)s)")
    g.add_argument("--step-budget", type=int, default=None,
                   help="optimizer steps of the run (default: from the train size)")
    g.add_argument("--max-rounds", type=int, default=d.model.max_rounds,
                   help="boosting rounds at most; early stopping usually ends sooner (%(default)s)")
    g.add_argument("--folds", type=_folds, default=d.folds,
                   help="a table under 1,000 rows: k of its repeated k-fold, which chooses the "
                        "family and judges it; 0 or off: chosen on eval, judged on test (%(default)s)")
    g.add_argument("--repeats", type=int, default=d.repeats,
                   help="repeats of that k-fold (%(default)s)")


def _add_score_args(sub: Any) -> None:
    c = sub.add_parser("score", help="the current model's predictions for a version's window, "
                       "or for raw rows with no label yet, published under predictions/")
    c.add_argument("--root", default=os.environ.get(ROOT_ENV),
                   help=f"storage root URI (default: ${ROOT_ENV})")
    c.add_argument("--dataset", default="flights", help="dataset name (default: flights)")
    c.add_argument("--version", default="latest", help="version id or 'latest' (default)")
    c.add_argument("--raw", nargs="+", default=(), metavar="FILE",
                   help="score these raw files of the spec's primary source instead (the label "
                        "may be absent); rows failing the spec's checks are quarantined")
    c.add_argument("--spec", help="spec name or path for --raw (default: the dataset's)")
    c.add_argument("--models-root", help="default: <root>/models")
    c.add_argument("--batch-size", type=int, default=8192, help="rows per batch (%(default)s)")
    c.add_argument("--run-id", help="recorded in the predictions' manifest (default: cli-<time>)")


def run_score(args: argparse.Namespace) -> int:
    """Score, publish, print where and what."""
    from training.score.run import ScoreOptions, score

    if not args.root:
        raise SystemExit(f"give --root (or ${ROOT_ENV})")
    if args.batch_size < 1:
        raise SystemExit(f"--batch-size {args.batch_size}: expected a positive number of rows")
    # a path on the command line is a local file, relative to where the command runs (the
    # scoring form's paths are under the storage root: training.score.run.raw_uris)
    raw = tuple(p if "://" in p else os.path.abspath(p) for p in args.raw)
    done = score(ScoreOptions(
        root=args.root, dataset=args.dataset, version=args.version, raw=raw,
        models_root=args.models_root, batch_size=args.batch_size, spec=args.spec,
        run_id=args.run_id or time.strftime("cli-%Y%m%dT%H%M%SZ", time.gmtime())))
    m, dist = done.manifest, done.manifest.get("distribution") or {}
    print(f"predictions: {done.uri}" + ("" if done.created else " (already published)"))
    print(f"  rows {m.get('rows')}, scored {m.get('scored')}, quarantined {m.get('quarantined')}"
          f"; model {m['model']['version']}/{m['model']['run']}")
    print(f"  PSI {dist.get('psi', float('nan')):.4f} against the model's test predictions: "
          + ("DRIFTED" if dist.get("drifted") else "no drift"))
    return 0


def _add_tune_parser(sub: Any) -> None:
    u = sub.add_parser("tune", help="search both families' settings on eval; later trainings "
                       "use the best (models/<dataset>/tuned.json)")
    _add_version_args(u)
    u.add_argument("--models-root", help="default: <root>/models")
    u.add_argument("--trials", type=int, default=None,
                   help="trials at most (default: the spec's tune.trials, else 20)")
    u.add_argument("--minutes", type=float, default=None,
                   help="no trial starts after this (default: the spec's tune.minutes, else 30)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m training", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train, evaluate against the baseline, publish the model")
    _add_version_args(t)
    _add_input_args(t)
    d = TrainConfig()
    t.add_argument("--models-root", help="default: <root>/models")
    t.add_argument("--run", help="run folder name; reuse it to resume (default: cli-<UTC time>)")
    t.add_argument("--steps-per-epoch", type=int, default=None, help="default: one pass")
    t.add_argument("--patience", type=int, default=d.patience, help="early stopping (%(default)s)")
    t.add_argument("--learning-rate", type=float, default=d.model.learning_rate)
    t.add_argument("--min-margin", type=float, default=d.min_margin,
                   help="accuracy and AUC must beat the baseline by this (%(default)s)")
    t.add_argument("--precision", choices=["auto", "mixed_float16", "float32"], default=d.precision)
    t.add_argument("--devices", default="", help="comma-separated devices to mirror over, "
                   "e.g. /gpu:0,/gpu:1 (default: every visible GPU, else the CPU)")
    t.add_argument("--jit-compile", action="store_true", help="XLA-compile the train step")
    t.add_argument("--steps-per-execution", type=int, default=d.steps_per_execution)
    t.add_argument("--measure-stall-batches", type=int, default=0,
                   help="measure the stall ratio on this many batches first (default: off)")
    t.add_argument("--seed", type=int, default=d.seed, help="weight init seed (%(default)s)")
    t.add_argument("--overwrite", action="store_true", help="retrain a finished run")
    t.add_argument("--class-weights", choices=["auto", "balanced", "none"], default=d.class_weights,
                   help="auto: balanced when the largest class is 5x the smallest")
    t.add_argument("--lr-schedule", choices=["cosine", "constant"], default=d.model.lr_schedule)
    _add_gate_args(t, d)
    _add_budget_args(t, d)
    _add_tune_parser(sub)
    s = sub.add_parser("show", help="the dataset's current (blessed) model")
    s.add_argument("--root", default=os.environ.get(ROOT_ENV),
                   help=f"storage root URI (default: ${ROOT_ENV})")
    s.add_argument("--models-root", help="default: <root>/models")
    s.add_argument("--dataset", default="flights", help="dataset name (default: flights)")
    _add_score_args(sub)
    b = sub.add_parser("bench-input", help="examples/s: raw read ceiling, ours, naive; stall ratio")
    _add_version_args(b)
    _add_input_args(b)
    bd = BenchConfig()
    b.add_argument("--split", default=bd.split)
    b.add_argument("--batches", type=int, default=bd.batches, help="timed batches (%(default)s)")
    b.add_argument("--warmup-batches", type=int, default=bd.warmup_batches)
    b.add_argument("--naive-batches", type=int, default=bd.naive_batches)
    b.add_argument("--stall-batches", type=int, default=bd.stall_batches)
    b.add_argument("--repeats", type=int, default=bd.repeats,
                   help="timed runs per pipeline, round-robin; the best counts (%(default)s)")
    b.add_argument("--json", help="also write the figures to this file")
    b.add_argument("--cores", type=int, default=None,
                   help="run on this many of the CPUs this process may use (default: all); "
                        "the stall ratio per core count comes from one run per count")
    return parser


def input_config(args: argparse.Namespace) -> InputConfig:
    return InputConfig(
        batch_size=args.batch_size, shuffle_buffer=args.shuffle_buffer,
        cycle_length=args.cycle_length if args.cycle_length > 0 else AUTOTUNE,
        read_buffer_bytes=args.read_buffer_bytes, read_chunk=args.read_chunk, cache=args.cache,
        ram_budget_bytes=args.ram_budget_bytes, staging_dir=args.staging_dir, seed=args.data_seed,
    )


def version_uri(args: argparse.Namespace) -> str:
    if args.version_uri:
        return args.version_uri
    if not args.root:
        raise SystemExit(f"give --version-uri, or --root (or ${ROOT_ENV}) and --dataset")
    from etl import versions

    return versions.resolve(args.root, args.dataset, args.version)


def models_root(args: argparse.Namespace, vuri: str) -> str:
    """--models-root, else <root>/models, the root taken from the version URI's layout."""
    if args.models_root:
        return args.models_root
    parts = vuri.rstrip("/").rsplit("/", 3)  # <root>/datasets/<name>/<version>
    if len(parts) != 4 or parts[1] != "datasets":
        raise SystemExit(f"{vuri}: not <root>/datasets/<name>/<version>; pass --models-root")
    return f"{parts[0]}/models"


def train_config(args: argparse.Namespace) -> TrainConfig:
    """The run's settings from the ``train`` flags; one left at its default leaves the spec's
    ``training:`` key (``training.run.choice.spec_overrides``)."""
    config = replace(
        TrainConfig(), input=input_config(args), epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch, patience=args.patience, min_margin=args.min_margin,
        precision=args.precision, jit_compile=args.jit_compile,
        devices=tuple(d.strip() for d in args.devices.split(",") if d.strip()),
        steps_per_execution=args.steps_per_execution, seed=args.seed,
        measure_stall_batches=args.measure_stall_batches, overwrite=args.overwrite,
        step_budget=args.step_budget, class_weights=args.class_weights,
        gate_confidence=args.gate_confidence, promote_tolerance=args.promote_tolerance,
        min_eval_examples=args.min_eval_examples, fail_unblessed=args.fail_unblessed,
        folds=args.folds, repeats=args.repeats,
    )
    return config.with_overrides(learning_rate=args.learning_rate, lr_schedule=args.lr_schedule,
                                 family=args.family, max_rounds=args.max_rounds)


def run_train(args: argparse.Namespace) -> Trained:
    from training.run.train import train

    vuri = version_uri(args)
    config = train_config(args)
    run = args.run or time.strftime("cli-%Y%m%dT%H%M%SZ", time.gmtime())
    trained = train(vuri, models_root(args, vuri), run, config)
    print_result(trained)
    return trained


def run_tune(args: argparse.Namespace) -> None:
    from etl import versions
    from training.outputs import TuneConfig
    from training.run.tune import tune

    vuri = version_uri(args)
    budget = TuneConfig.of(versions.read_manifest(vuri), args.trials, args.minutes)
    tuned = tune(vuri, models_root(args, vuri), budget)
    print(f"tuned {tuned.dataset} on {tuned.version}: {len(tuned.trials)} trials in "
          f"{tuned.seconds:.0f} s")
    print(f"  best: {tuned.family}, {tuned.metric} {tuned.eval:.4f} by {tuned.judged}; at defaults: "
          + (", ".join(f"{f} {v:.4f}" for f, v in tuned.default_eval.items()) or "not run"))
    for key, value in tuned.settings.items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    print(f"  written to {models_root(args, vuri)}/{tuned.dataset}/tuned.json: later "
          "trainings use these settings until tuned again")


def print_result(trained: Trained) -> None:
    """The model's folder, its key test metrics against the baseline, the verdict."""
    from training.tasks import TASKS

    record = trained.metrics
    print(f"model: {trained.model_uri}")
    # the task's key metrics; runs from before tasks were recorded are binary (tabular)
    task = record.task or ("multiclass" if record.kind == "image" else "binary")
    for name in TASKS[task].card_metrics:
        value = record.test.value(name)
        if not isinstance(value, (int, float)):  # older runs: fewer
            continue
        base = record.baseline.value(name)
        print(f"  test {name:<9} {value:.4f}   baseline "
              + (f"{base:.4f}" if isinstance(base, (int, float)) else "-"))
    print(trained.blessing.summary())
    print("current model: " + ("this one" if trained.promoted else "unchanged"))


def run_show(args: argparse.Namespace) -> int:
    """Print the dataset's current model (what ``models/<name>/current.json`` names)."""
    from training.judge.current import read_current

    if not (args.models_root or args.root):
        raise SystemExit(f"give --models-root, or --root (or ${ROOT_ENV})")
    root = args.models_root or f"{args.root.rstrip('/')}/models"
    current, _ = read_current(root, args.dataset)
    if current is None:
        print(f"{args.dataset}: no current model (no run has been blessed yet)")
        return 0
    print(f"{args.dataset}: version {current.version}, run {current.run}, {current.metric} "
          f"{current.value:.4f}, blessed at {current.blessed_at}\n  {current.model_uri}")
    return 0


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    from training.run.bench import bench_input, format_table

    cfg = BenchConfig(batch_size=args.batch_size, batches=args.batches, split=args.split,
                      warmup_batches=args.warmup_batches, naive_batches=args.naive_batches,
                      stall_batches=args.stall_batches, repeats=args.repeats, seed=args.data_seed)
    result = bench_input(version_uri(args), cfg, input_config(args))
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, sort_keys=True)
    return result


def restrict_cores(cores: int) -> None:
    """Pin this process to its first ``cores`` allowed CPUs; TensorFlow, imported after, sizes
    its thread pools and tf.data's autotuning by the CPUs it may run on."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= cores <= len(allowed):
        raise SystemExit(f"--cores {cores}: expected 1 to {len(allowed)}, the CPUs this "
                         "process may use")
    os.sched_setaffinity(0, allowed[:cores])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "cores", None) is not None:
        restrict_cores(args.cores)  # before TensorFlow is imported
    from etl import logs

    logs.configure(logging.INFO)  # ours at INFO; TensorFlow, absl, gcsfs... at WARNING
    if args.command == "show":
        return run_show(args)
    logs.import_quietly("tensorflow")  # absl's C++ INFO lines while it loads stay out too
    from etl.errors import PipelineError
    from training.judge.gate import ModelNotBlessedError

    try:
        if args.command == "score":
            return run_score(args)
        {"train": run_train, "tune": run_tune, "bench-input": run_bench}[args.command](args)
    except ModelNotBlessedError as err:
        print_result(err.result)
        return EXIT_NOT_BLESSED
    except (PipelineError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
