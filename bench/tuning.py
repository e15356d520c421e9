"""Tuned against untuned (issue 41): the gauntlet's picked tables, each run as a new user runs
it (``bench.gauntlet.run_table``: spec init, etl run, training train, the HistGradientBoosting
reference), then ``training tune`` on the same version within a small budget and ``training
train`` again, which picks the tuned settings up from ``tuned.json`` as a nightly run would.

Figures only, no target: per table the untuned and the tuned test figures, each against the
reference (``bench.references.compare``), the search's trials and seconds, and which family
and settings won. ``make bench`` runs it as its ``tuning`` part; ``python -m bench.tuning``
alone.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from bench.gauntlet import TIMEOUT_S, _env, json_saver, run_table, step, table_names
from bench.references import compare
from bench.tables import TABLES

log = logging.getLogger("bench.tuning")
TUNED_RUN = "tuned"  # the second training's run name, beside the gauntlet's
# the search's budget per table, below `training tune`'s own (20 trials, 30 minutes), which would
# make the part take hours on two cores (23 tables); at this budget a table takes 4-6 minutes
TRIALS, MINUTES = 4, 2.0
# flights (the year: the tune alone is an hour here) and the tables the gauntlet takes
# longest on are left out; the rest are the picked tables, small to mid-sized
SKIPPED = ("flights",)
QUICK_TABLES = ("iris", "penguins")


def tune_table(name: str, work: Path, trials: int = TRIALS,
               minutes: float = MINUTES) -> dict[str, Any]:
    """The gauntlet's run of ``name``, then tune and train again; the figures side by side."""
    table = TABLES[name]
    base = run_table(table, work)
    out: dict[str, Any] = {"table": name, "task": table.task,
                           "untuned": {"verdict": base["verdict"]["status"],
                                       "model": base.get("model"), "ratio": base.get("ratio")},
                           "reference": base.get("reference")}
    if not base.get("model") or not base.get("reference"):
        out["skipped"] = f"no untuned model to compare ({base['verdict']['status']})"
        return out
    root, specs = (work / "data").as_uri(), _specs(work, name)
    version = base["model_uri"].rstrip("/").rsplit("/", 2)[-2]
    tuned = step("tune", "training", [
        "tune", "--root", root, "--dataset", name, "--version", version,
        "--trials", str(trials), "--minutes", str(minutes)], work, _env(specs))
    out["tune"] = {k: tuned.get(k) for k in ("ok", "seconds", "cpu_s", "peak_rss_mb",
                                            "message")}
    tuned.pop("stdout", None)
    if not tuned["ok"]:
        return out
    from etl import storage
    from training.outputs import read_tuned
    from training.record import read_model_record

    found = read_tuned(storage.join(root, "models"), name)
    if found is None:
        raise RuntimeError(f"tune of {name} exited 0 but wrote no tuned.json")
    out["tune"].update(trials=len(found.trials), family=found.family, settings=found.settings,
                       eval=found.eval, default_eval=found.default_eval)
    train = step("training", "training", [
        "train", "--root", root, "--dataset", name, "--version", version, "--run", TUNED_RUN,
        "--overwrite"], work, _env(specs))
    train.pop("stdout", None)
    record = read_model_record(storage.join(root, "models", name, version, TUNED_RUN)) \
        if train["ok"] else None
    if record is None:
        out["tuned"] = {"message": train.get("message")}
        return out
    model = {k: float(v) for k, v in record.test.numbers().items()}
    judged = compare(model, out["reference"], table.task)
    blessed = bool(record.blessing and record.blessing.blessed)
    out["tuned"] = {"verdict": "blessed" if blessed else "not blessed",
                    "model": model, "ratio": judged["ratio"], "family": record.family,
                    "seconds": train["seconds"]}
    out["tuned_over_untuned"] = (judged["ratio"] / out["untuned"]["ratio"]
                                 if out["untuned"]["ratio"] else None)
    return out


def _specs(work: Path, name: str) -> Path | None:
    return None if TABLES[name].layout == "flights" else work / "specs"


def run_all(work: Path, names: list[str] | None = None, save: Any = None,
            trials: int = TRIALS, minutes: float = MINUTES) -> dict[str, Any]:
    """Every picked table but ``SKIPPED`` (or ``names``); ``save(result)`` after each."""
    TIMEOUT_S.setdefault("tune", int(minutes * 60 * 2 + 600))  # the one running trial finishes
    result: dict[str, Any] = {"budget": {"trials": trials, "minutes": minutes}, "tables": {}}
    for name in names or [n for n in TABLES if n not in SKIPPED]:
        t0 = time.perf_counter()
        log.info("tuning: %s", name)
        got = tune_table(name, work / name, trials, minutes)
        got["seconds"] = round(time.perf_counter() - t0, 1)
        result["tables"][name] = got
        ratios = [t["tuned_over_untuned"] for t in result["tables"].values()
                  if t.get("tuned_over_untuned")]
        result["summary"] = {"tables": len(result["tables"]), "compared": len(ratios),
                             "tuned_better": sum(r > 1 for r in ratios),
                             "median_tuned_over_untuned": sorted(ratios)[len(ratios) // 2]
                             if ratios else None}
        log.info("tuning: %s: untuned ratio %s, tuned %s", name, got["untuned"].get("ratio"),
                 (got.get("tuned") or {}).get("ratio"))
        if save:
            save(result)
    return result


def main() -> int:
    """``python -m bench.tuning [--tables a,b] [--trials N] [--minutes M] [--out FILE]``."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--tables", default="", help=f"comma-separated, of {','.join(TABLES)}")
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--minutes", type=float, default=MINUTES)
    parser.add_argument("--work", default=".bench/tuning", help="scratch folder")
    parser.add_argument("--out", default="bench/tuning.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    run_all(Path(args.work).resolve(), table_names(parser, args.tables),
            json_saver(Path(args.out)), args.trials, args.minutes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
