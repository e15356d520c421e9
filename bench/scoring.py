"""`make bench` part `scoring` (issue 41): `training score` on the scaled flights beside its
ceiling, the same SavedModel's serving signature on the same rows held in memory.

The model is the one nightly training makes of the scored window: trained at 1x on the same
days (default the flights year: about 2,000 trees; ``python -m training train``, the spec's
defaults, on the ``flights_grouped`` copy of the flights spec that the `training` part uses,
so that the copies of a flight share its split); it must be blessed, and is the dataset's
current model under that root's ``models/``. Then for each scale (default 4x and 16x) the
window is landed ``scale`` times into a fresh root and built (``etl run``), and ``python -m
training score --models-root <the 1x root's models>`` runs as a child process as an operator
runs it, measured from outside (wall, CPU-s, peak RSS and PSS of its process tree). Its rows/s
is the rows its predictions' manifest says it scored over the child's whole wall time:
interpreter start, imports, loading the model, reading the shards, the model's own test-split
reference for the drift verdict and writing the Parquet parts all count.

A small model, trained the same way on ``SMALL_DAYS`` only (one month: a few hundred trees),
scores the largest scale too, beside its own ceiling: its signature is several times faster,
so what score adds around the model (reading, parsing, writing, start-up) weighs most there.
Figures only; the target is the nightly model's.

The ceiling, in the same run: this process loads the same current model the way score does
(``training.score.model.served_model``), reads the same version's rows into memory as arrays
first (every split and shard in the manifest's order, cut in score's batches of
``BATCH_SIZE`` rows), and times one pass of ``ServedModel.outputs`` (the serving signature,
arrays in and out) over the first ``CEILING_ROWS`` of them after an untimed pass over the
same batches (the signature's rows/s does not change along a window; all of it would take
the large model as long as score itself).

Targets: score at >= 0.5x the ceiling's rows/s at the largest scale, and the score tree's peak
RSS flat with the data: largest scale over smallest <= 1.25x. ``python -m bench.scoring
[--scales 4,16] [--days first,last]`` runs it alone into ``bench/scoring.json``.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import measure, training
from bench.proctree import run_child

log = logging.getLogger("bench")
REPO = Path(__file__).resolve().parent.parent
DATASET = training.DATASET
SCALES = (4, 16)
BATCH_SIZE = 8192  # training score's default --batch-size
RATE_TARGET = 0.5  # score's rows/s over the ceiling's, at the largest scale
RSS_TARGET = 1.25  # the score tree's peak RSS, largest scale over smallest
RUN = "bench"
SMALL_DAYS = ("2013-01-01", "2013-01-31")  # the small model's training window, at 1x
CEILING_ROWS = 262_144  # rows the ceiling times (32 of score's batches)


def train_model(work: Path, name: str, days: tuple[str, str] | None,
                env: dict[str, str]) -> dict[str, Any]:
    """Land and build ``days`` at 1x, train there; the models root (its current model: this
    run's)."""
    from etl import storage
    from training.judge.current import read_current
    from training.record import read_model_record

    root = measure.fresh_flights_root(work, f"scoring-model-{name}", 1, days)
    etl = measure.etl_cli(root, *training.window(days), DATASET, env=env)
    child = run_child([sys.executable, "-m", "training", "train", "--root", root, "--dataset",
                       DATASET, "--run", RUN], cwd=REPO, env=env, timeout_s=4 * 3600)
    models = storage.join(root, "models")
    current = read_current(models, DATASET)[0] if child.returncode == 0 else None
    if current is None:
        raise RuntimeError(f"training at 1x left no current model (exit {child.returncode}): "
                           f"{(child.stderr or child.stdout)[-1500:]}")
    record = read_model_record(current.model_uri)
    return {"models_root": models, "model_uri": current.model_uri,
            "days": list(days) if days else "the flights year",
            "family": record.family if record else None,
            "trees": record.to_json().get("trees") if record else None,
            "trained_rows": sum(etl["splits"].values()), "training": child.figures()}


def in_memory_batches(model: Any, version_uri: str,
                      batch_size: int = BATCH_SIZE) -> list[dict[str, Any]]:
    """The version's rows as score reads them (every split's shards in the manifest's order,
    ``batch_size`` rows a batch), as numpy arrays of the model's features."""
    import tensorflow as tf

    from etl import versions
    from training.data.tabular import compression_type, local_or_remote_path, parse_batch

    manifest = versions.read_manifest(version_uri)
    batches = []
    for split in manifest.splits:
        for entry in manifest.splits[split].shards:
            path = local_or_remote_path(versions.shard_uri(version_uri, entry))
            ds = (tf.data.TFRecordDataset(path, compression_type=compression_type(manifest))
                  .batch(batch_size).map(parse_batch(manifest)))
            batches += [{n: b[n].numpy() for n in model.features} for b in ds]
    return batches


def ceiling(model: Any, batches: list[dict[str, Any]],
            max_rows: int = CEILING_ROWS) -> dict[str, Any]:
    """One timed pass of the serving signature over the first batches holding ``max_rows``
    rows, after an untimed one over the same (the first calls of a process, and the first of
    each batch shape, pay the runtime's set-up: at 1600 rows a cold pass ran 60x slower than
    a warm one)."""
    taken, rows = [], 0
    for batch in batches:
        if rows >= max_rows:
            break
        taken.append(batch)
        rows += len(next(iter(batch.values())))
    batches = taken
    for batch in batches:
        model.outputs(batch)
    start, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        model.outputs(batch)
    seconds = time.perf_counter() - start
    return {"rows": rows, "batches": len(batches), "seconds": seconds,
            "cpu_s": time.process_time() - cpu, "rows_per_s": rows / seconds}


def score_child(root: str, models_root: str, env: dict[str, str]) -> dict[str, Any]:
    """``python -m training score`` on the root's latest version, measured from outside; the
    rows its predictions' manifest says it scored."""
    from training.score.publish import read_published

    child = run_child([sys.executable, "-m", "training", "score", "--root", root, "--dataset",
                       DATASET, "--models-root", models_root, "--batch-size", str(BATCH_SIZE),
                       "--run-id", RUN], cwd=REPO, env=env, timeout_s=4 * 3600)
    found = [line.split(":", 1)[1].split(" (")[0].strip() for line in child.stdout.splitlines()
             if line.startswith("predictions:")]
    manifest = read_published(found[0]) if child.returncode == 0 and found else None
    if manifest is None:
        raise RuntimeError(f"training score failed (exit {child.returncode}): "
                           f"{(child.stderr or child.stdout)[-1500:]}")
    whole = child.figures()
    return {"rows": manifest["rows"], "scored": manifest["scored"],
            "rows_per_s": manifest["scored"] / whole["wall_s"], **whole,
            "publish_s": manifest.get("seconds"), "predictions_uri": found[0]}


def scored_beside_ceiling(root: str, version_uri: str, model: Any, models_root: str,
                          env: dict[str, str]) -> dict[str, Any]:
    """Score the root's version as a child with the models root's current model, then that
    model's ceiling on the same rows."""
    scored = score_child(root, models_root, env)
    log.info("scoring: %.0f rows/s, peak RSS %.0f MB; the ceiling", scored["rows_per_s"],
             scored["peak_rss_mb"])
    began = time.perf_counter()
    batches = in_memory_batches(model, version_uri)
    read_s = time.perf_counter() - began  # what score's parse costs; not in the ceiling
    read = sum(len(next(iter(b.values()))) for b in batches)
    top = {**ceiling(model, batches), "read_s": read_s, "read_rows": read}
    del batches
    if read != scored["scored"]:
        raise RuntimeError(f"score scored {scored['scored']} rows, the ceiling read {read}")
    return {"score": scored, "ceiling": top, "ratio": scored["rows_per_s"] / top["rows_per_s"]}


def one_scale(work: Path, scale: int, days: tuple[str, str] | None,
              models: dict[str, tuple[Any, str]], env: dict[str, str]) -> dict[str, Any]:
    """Land and build ``scale``x; each of ``models`` (name: loaded model, models root) scores
    it beside its ceiling."""
    name = f"scoring-{scale}x"
    root = measure.fresh_flights_root(work, name, scale, days)
    etl = measure.etl_cli(root, *training.window(days), DATASET, env=env)
    log.info("scoring at %dx: %d rows, %s", scale, sum(etl["splits"].values()), ", ".join(models))
    runs = {m: scored_beside_ceiling(root, etl["version_uri"], model, models_root, env)
            for m, (model, models_root) in models.items()}
    shutil.rmtree(work / name, ignore_errors=True)
    return {"scale": scale, "version_rows": sum(etl["splits"].values()), **runs["nightly"],
            **({"small_model": runs["small"]} if "small" in runs else {})}


def measure_all(work: Path, scales: tuple[int, ...] = SCALES,
                days: tuple[str, str] | None = None,
                small_days: tuple[str, str] | None = SMALL_DAYS) -> dict[str, Any]:
    """The models, every scale, then the targets (at the largest scale; RSS against the
    smallest); ``small_days`` None: no small model."""
    from training.score.model import served_model

    work.mkdir(parents=True, exist_ok=True)
    env = training.grouped_env(work)
    log.info("scoring: training the nightly model at 1x")
    trained = train_model(work, "nightly", days, env)
    small = None
    if small_days:
        log.info("scoring: training the small model at 1x on %s to %s", *small_days)
        small = train_model(work, "small", small_days, env)
    nightly = {"nightly": (served_model(trained["models_root"], DATASET),
                           trained["models_root"])}
    both = {**nightly, **({"small": (served_model(small["models_root"], DATASET),
                                     small["models_root"])} if small else {})}
    figures = {f"{s}x": one_scale(work, s, days, both if s == max(scales) else nightly, env)
               for s in sorted(scales)}
    for name in ("nightly", "small"):
        shutil.rmtree(work / f"scoring-model-{name}", ignore_errors=True)
    low, top = figures[f"{min(scales)}x"], figures[f"{max(scales)}x"]
    growth = top["score"]["peak_rss_mb"] / low["score"]["peak_rss_mb"] \
        if top is not low else None
    added = top["score"]["scored"] - low["score"]["scored"]
    marginal = added / (top["score"]["wall_s"] - low["score"]["wall_s"]) \
        if top is not low and top["score"]["wall_s"] > low["score"]["wall_s"] else None
    return {"window": list(days) if days else "the flights year", "dataset": DATASET,
            "batch_size": BATCH_SIZE, "ceiling_rows": CEILING_ROWS,
            "model": {k: v for k, v in trained.items() if k != "models_root"},
            "small_model": {k: v for k, v in small.items() if k != "models_root"}
            if small else None,
            "scales": figures,
            # score's wall as fixed + rows / rate, from the smallest and largest scales: the
            # rate its per-row work runs at once start-up and model loading are paid
            "score_marginal": {
                "rows_per_s": marginal,
                "fixed_s": None if marginal is None else
                low["score"]["wall_s"] - low["score"]["scored"] / marginal},
            "targets": {
                "score_over_ceiling": {
                    "value": top["ratio"], "target": RATE_TARGET, "op": ">=",
                    "at": f"{max(scales)}x", "met": top["ratio"] >= RATE_TARGET},
                "peak_rss_growth": {
                    "value": growth, "target": RSS_TARGET, "op": "<=",
                    "of": f"{max(scales)}x / {min(scales)}x",
                    "met": None if growth is None else growth <= RSS_TARGET}}}


def main() -> int:
    return measure.scaled_main(__doc__, measure_all, SCALES, "scoring")


if __name__ == "__main__":
    raise SystemExit(main())
