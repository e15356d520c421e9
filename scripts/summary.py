"""Print what the pipeline produced: newest version, its shards, and the model's metrics.

Reads storage only through etl's read-only API, so it works on file:// and gs:// roots.
"""

from __future__ import annotations

import argparse
import json

from etl import storage, versions
from etl.versions.manifest import format_shards
from training.record import ModelRecord, read_model_record


def _latest_model_metrics(root: str, dataset: str, version: str
                          ) -> tuple[str, ModelRecord] | None:
    """The newest completed training run on a version and its record (metrics.json is
    written last)."""
    runs_uri = storage.join(root, "models", dataset, version)
    if not storage.exists(runs_uri):
        return None
    for run in sorted(storage.list_dir(runs_uri), reverse=True):
        record = read_model_record(storage.join(runs_uri, run))
        if record is not None:
            return storage.join(runs_uri, run), record
    return None


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def summarize(root: str, dataset: str) -> None:
    version_uri = versions.resolve(root, dataset, "latest")
    manifest = versions.read_manifest(version_uri)
    print(f"\n=== dataset {dataset}")
    print(f"version URI: {version_uri}")
    print(format_shards(manifest))  # a version of segments: one line per split
    found = _latest_model_metrics(root, dataset, manifest.version)
    if found is None:
        print("no trained model for this version yet")
        return
    model_uri, record = found
    print(f"model: {model_uri}")
    model, baseline = record.test, record.baseline
    print(f"{'metric':<12} {'model':>10} {'majority baseline':>18}")
    for name in ("auc", "accuracy", "loss"):
        if model.value(name) is not None:
            base = baseline.value(name)
            print(f"{name:<12} {_fmt(model.value(name)):>10} "
                  f"{_fmt('-' if base is None else base):>18}")
    if record.test:
        print("(model and baseline evaluated on the held-out test split)")
    extra = {k: v for k, v in (("device", record.device), ("precision", record.precision),
                               ("examples_per_s", record.examples_per_s)) if v is not None}
    if extra:
        print(json.dumps(extra))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True, help="storage root URI")
    parser.add_argument("datasets", nargs="+")
    args = parser.parse_args()
    for dataset in args.datasets:
        summarize(args.root, dataset)


if __name__ == "__main__":
    main()
