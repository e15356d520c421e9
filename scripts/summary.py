"""Print what the pipeline produced: newest version, its shards, and the model's metrics.

Reads storage only through etl's read-only API, so it works on file:// and gs:// roots.
"""

from __future__ import annotations

import argparse
import json

from etl import storage, versions
from etl.versions.manifest import format_shards


def _latest_model_metrics(root: str, dataset: str, version: str) -> tuple[str, dict] | None:
    """Metrics of the newest completed training run on a version (metrics.json is written last)."""
    runs_uri = storage.join(root, "models", dataset, version)
    if not storage.exists(runs_uri):
        return None
    runs = sorted(storage.list_dir(runs_uri))
    for run in reversed(runs):
        metrics_uri = storage.join(runs_uri, run, "metrics.json")
        if storage.exists(metrics_uri):
            return storage.join(runs_uri, run), storage.read_json(metrics_uri)
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
    model_uri, metrics = found
    print(f"model: {model_uri}")
    model, baseline = metrics.get("test", metrics), metrics.get("baseline", {})
    print(f"{'metric':<12} {'model':>10} {'majority baseline':>18}")
    for name in ("auc", "accuracy", "loss"):
        if name in model:
            print(f"{name:<12} {_fmt(model[name]):>10} {_fmt(baseline.get(name, '-')):>18}")
    if "test" in metrics:
        print("(model and baseline evaluated on the held-out test split)")
    extra = {k: metrics[k] for k in ("device", "precision", "examples_per_s") if k in metrics}
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
