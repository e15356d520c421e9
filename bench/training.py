"""`make bench` part `training` (issue 42): `training train` on the flights at 1x and 16x.

The flights are landed ``scale`` times (``etl land --scale``: copy k of a flight departs k
minutes later). Split by the shipped spec's key, which holds ``time_hour``, the copies of one
flight would land in different splits and the eval and test splits would hold rows the model
trained on (the 16x eval AUC was 0.955 against 0.80 at 1x). So the part builds both scales
from a copy of the flights spec, ``flights_grouped``, that differs only in its name and in
``split.group_by`` (the flight's columns that the copies share): every copy of a flight falls
in the flight's split, at every scale.

Then ``python -m training train`` runs as an operator runs it, measured from outside (wall,
CPU-s, peak RSS of its process tree), with its own phases from metrics.json (fit, evaluation,
export: wall, CPU-s, peak RSS so far). Targets: at 16x, evaluation <= 10% of the fit; the 16x
eval AUC within 0.01 of the 1x one. ``python -m bench.training --scales 1`` runs it alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from bench import measure
from bench.proctree import run_child
from etl import storage
from training.record import PhaseTimes, read_model_record

log = logging.getLogger("bench")
REPO = Path(__file__).resolve().parent.parent
DATASET = "flights_grouped"
# the flight's own columns: the same in every scaled copy (only time_hour moves)
GROUP_BY = ("year", "month", "day", "sched_dep_time", "carrier", "flight", "origin")
SCALES = (1, 16)
EVAL_SHARE_TARGET = 0.10  # evaluation's wall over the fit's, at the largest scale
AUC_DRIFT_TARGET = 0.01  # |eval AUC at the largest scale - at 1x|
RUN = "bench"


def grouped_spec(folder: Path) -> Path:
    """The flights spec as ``flights_grouped``: its name and ``split.group_by`` changed."""
    src = REPO / "etl" / "examples" / "flights"
    dst = folder / DATASET
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    text = (dst / "spec.yaml").read_text()
    if "\nname: flights\n" not in f"\n{text}" or "\nsplit:\n" not in text:
        raise RuntimeError(f"{src / 'spec.yaml'}: no 'name: flights' or 'split:' line to edit")
    text = f"\n{text}".replace("\nname: flights\n", f"\nname: {DATASET}\n", 1)[1:]
    text = text.replace("\nsplit:\n", f"\nsplit:\n  group_by: [{', '.join(GROUP_BY)}]\n", 1)
    (dst / "spec.yaml").write_text(text)
    return folder


def grouped_env(work: Path) -> dict[str, str]:
    """The environment of the CLIs run on ``flights_grouped`` (its spec under ``work``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "PIPELINE_SPECS_PATH": str(grouped_spec(work / "specs"))}
    env.pop("PIPELINE_STORAGE_ROOT", None)
    return env


def window(days: tuple[str, str] | None) -> tuple[str, str | None]:
    """``etl run``'s interval end and start: the days given (first, last), else the year."""
    return (f"{days[1]}T00:00:00Z", f"{days[0]}T00:00:00Z") if days else (measure.YEAR_END,
                                                                          None)


def one_scale(work: Path, scale: int, days: tuple[str, str] | None) -> dict[str, Any]:
    """Land, build and train at ``scale``x; the figures."""
    root = measure.fresh_flights_root(work, f"training-{scale}x", scale, days)
    env = grouped_env(work)
    etl = measure.etl_cli(root, *window(days), DATASET, env=env)
    child = run_child([sys.executable, "-m", "training", "train", "--root", root, "--dataset",
                       DATASET, "--run", RUN], cwd=REPO, env=env, timeout_s=4 * 3600)
    version = etl["version_uri"].rstrip("/").rsplit("/", 1)[-1]
    record = read_model_record(storage.join(root, "models", DATASET, version, RUN)) \
        if child.returncode == 0 else None
    if record is None:
        raise RuntimeError(f"training at {scale}x failed (exit {child.returncode}): "
                           f"{(child.stderr or child.stdout)[-1500:]}")
    train_rows, phases = record.examples["train"], record.phases or PhaseTimes()
    whole = child.figures()
    out = {"scale": scale, "splits": etl["splits"], "train_rows": train_rows,
           "family": record.family, "eval_auc": record.eval.auc,
           "test_auc": record.test.auc, "phases": phases.to_json(),
           "training": whole,
           "bytes_per_train_row": whole["peak_rss_mb"] * 2**20 / train_rows,
           "eval_over_fit": phases.ratio("evaluate", "fit")}
    shutil.rmtree(work / f"training-{scale}x", ignore_errors=True)
    return out


def measure_all(work: Path, scales: tuple[int, ...] = SCALES,
                days: tuple[str, str] | None = None) -> dict[str, Any]:
    """Every scale, then the targets (at the largest scale, against 1x)."""
    figures = {f"{s}x": one_scale(work, s, days) for s in scales}
    top, one = figures[f"{max(scales)}x"], figures.get("1x")
    drift = abs(top["eval_auc"] - one["eval_auc"]) if one and top is not one else None
    return {"scales": figures, "group_by": list(GROUP_BY),
            "targets": {
                "eval_over_fit": {"value": top["eval_over_fit"], "target": EVAL_SHARE_TARGET,
                                  "met": top["eval_over_fit"] <= EVAL_SHARE_TARGET},
                "eval_auc_drift": {"value": drift, "target": AUC_DRIFT_TARGET,
                                   "met": None if drift is None else drift <= AUC_DRIFT_TARGET}}}


def main() -> int:
    return measure.scaled_main(__doc__, measure_all, SCALES, "training")


if __name__ == "__main__":
    raise SystemExit(main())
