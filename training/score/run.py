"""One score run: the current model over a published version's rows, or over raw files.

``score(options)`` picks the rows (``ScoreOptions.raw`` empty: the version's window, every
split, read through tf.data shard by shard in the manifest's order; else those raw files,
read and checked by the spec, ``etl.kinds.tabular.unlabelled``), runs each batch through
the SavedModel's serving signature (``training.score.model``) and publishes one Parquet part
per shard (raw: per file batch) with the manifest last (``training.score.publish``). The
model's own predictions on its test split are the reference of the drift verdict
(``training.score.drift``).

Columns: a published row's ``split``, ``shard`` and ``record`` (its position in the shard:
records hold features and the label, not the spec's key unless a key column is a feature)
with the key columns that are features and the stored label; a raw row's key columns as read.
Then ``prediction``, ``probability_<class>`` per class (a classifier), ``model_run`` and
``version``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from etl import storage, versions
from etl.provenance import code_version
from etl.versions import Manifest, read_manifest
from training.score import drift
from training.score.model import ServedModel, served_model
from training.score.publish import Part, Published, predictions_uri, publish

log = logging.getLogger(__name__)

RAW_PREFIX = "raw-"
QUARANTINE_DIR = "quarantine"


@dataclass(frozen=True)
class ScoreOptions:
    """What to score and where: ``raw`` files (of the spec's primary source) or the
    ``version`` ('latest' or an id) of ``dataset`` under ``root``."""

    root: str
    dataset: str
    version: str = "latest"
    raw: tuple[str, ...] = ()
    models_root: str | None = None
    batch_size: int = 8192
    run_id: str | None = None  # the DAG run (or CLI run) that scores, for the manifest
    spec: str | None = None  # a spec name or path for raw rows; default: the dataset's

    @property
    def models(self) -> str:
        return self.models_root or storage.join(self.root, "models")


@dataclass
class _Tally:
    predicted: list[np.ndarray] = field(default_factory=list)
    rows: int = 0
    quarantined: int = 0
    quarantine_file: str | None = None


def score(options: ScoreOptions) -> Published:
    """Score and publish; the published folder (``created`` False: it was already there)."""
    model = served_model(options.models, options.dataset)
    if options.raw:
        return _score_raw(options, model)
    vuri = versions.resolve(options.root, options.dataset, options.version)
    manifest = read_manifest(vuri)
    _check_features(model, manifest, vuri)
    uri = predictions_uri(options.root, options.dataset, manifest.version, model.model_id)
    tally = _Tally()

    def frames() -> Iterator[pd.DataFrame]:
        for split in manifest.splits:
            for entry in manifest.splits[split].shards:
                frame = _shard_frame(model, vuri, manifest, split, entry, options.batch_size)
                frame = frame.assign(model_run=model.run, version=manifest.version)
                tally.predicted.append(frame["prediction"].to_numpy())
                tally.rows += len(frame)
                yield frame

    source = {"kind": "version", "version": manifest.version, "version_uri": vuri}
    return _publish(options, model, uri, frames(), tally, source)


def _score_raw(options: ScoreOptions, model: ServedModel) -> Published:
    from etl.kinds.tabular.unlabelled import check_unlabelled
    from etl.spec import load_spec

    spec = load_spec(options.spec or options.dataset)
    files = [{"uri": u, **_stat(u)} for u in options.raw]
    window = RAW_PREFIX + hashlib.sha256(storage.json_bytes(files)).hexdigest()[:12]
    uri = predictions_uri(options.root, options.dataset, window, model.model_id)
    tally = _Tally()

    def frames() -> Iterator[pd.DataFrame]:
        checked = check_unlabelled(options.root, spec, list(options.raw),
                                   storage.join(uri, QUARANTINE_DIR))
        tally.rows, tally.quarantined = checked.rows, checked.quarantined
        if checked.quarantine_file:  # the manifest names it relative to the folder
            tally.quarantine_file = f"{QUARANTINE_DIR}/{checked.quarantine_file.rsplit('/', 1)[-1]}"
        _check_columns(model, list(checked.features.columns), f"spec {spec.name}")
        for lo in range(0, len(checked.features), options.batch_size):
            feats = checked.features.iloc[lo:lo + options.batch_size]
            keys = checked.keys.iloc[lo:lo + options.batch_size].reset_index(drop=True)
            out = _answers(model, {n: feats[n].to_numpy() for n in model.features})
            frame = pd.concat([keys, pd.DataFrame(out)], axis=1).assign(
                model_run=model.run, version=window)
            tally.predicted.append(frame["prediction"].to_numpy())
            yield frame

    source = {"kind": "raw", "files": files, "spec": spec.name}
    return _publish(options, model, uri, frames(), tally, source, window)


def _publish(options: ScoreOptions, model: ServedModel, uri: str, frames: Iterator[pd.DataFrame],
             tally: _Tally, source: dict[str, Any], window: str | None = None) -> Published:
    t0 = time.monotonic()

    def manifest_of(parts: list[Part]) -> dict[str, Any]:
        predicted = np.concatenate(tally.predicted) if tally.predicted else np.zeros(0)
        reference = reference_predictions(model, options.batch_size)
        return {
            "format_version": 1, "dataset": options.dataset,
            "window": window or source["version"], "source": source,
            "model": {"version": model.version, "run": model.run, "model_uri": model.model_uri,
                      "task": model.task, "classes": list(model.classes)},
            "rows": tally.rows, "scored": int(sum(p.rows for p in parts)),
            "quarantined": tally.quarantined, "quarantine": tally.quarantine_file,
            "parts": [p.to_json() for p in parts],
            "distribution": drift.distribution(predicted, reference, model.classes),
            "run_id": options.run_id, "code_version": code_version(),
            "seconds": round(time.monotonic() - t0, 3),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    owner = f"score:{options.dataset}:{uri.rsplit('/', 2)[-2]}:{model.model_id}"
    done = publish(uri, owner, frames, manifest_of)
    m = done.manifest
    log.info("%s %s: %s rows scored by %s (%s quarantined), PSI %.3f against its test split%s",
             "published" if done.created else "already published", uri, m.get("scored"),
             model.model_id, m.get("quarantined"), m.get("distribution", {}).get("psi", np.nan),
             " (drifted)" if m.get("distribution", {}).get("drifted") else "")
    return done


def reference_predictions(model: ServedModel, batch_size: int) -> np.ndarray:
    """The model's predictions on the test split of the version it was trained on."""
    manifest = model.manifest
    if "test" not in manifest.splits:
        return np.zeros(0)
    frames = [_shard_frame(model, model.version_uri, manifest, "test", e, batch_size)
              for e in manifest.splits["test"].shards]
    return np.concatenate([f["prediction"].to_numpy() for f in frames]) if frames else np.zeros(0)


def _shard_frame(model: ServedModel, vuri: str, manifest: Manifest, split: str, entry: Any,
                 batch_size: int) -> pd.DataFrame:
    """One shard's rows scored, in record order."""
    import tensorflow as tf

    from training.data.tabular import compression_type, local_or_remote_path, parse_batch

    path = local_or_remote_path(versions.shard_uri(vuri, entry))
    ds = (tf.data.TFRecordDataset(path, compression_type=compression_type(manifest))
          .batch(batch_size).map(parse_batch(manifest), num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))
    label = manifest.schema.label.name if manifest.schema else None
    keys = [k for k in (manifest.schema.key_columns if manifest.schema else ())
            if k in model.features]
    frames, start = [], 0
    for batch in ds:
        n = int(next(iter(batch.values())).shape[0])
        cols: dict[str, Any] = {"split": split, "shard": entry.file,
                                "record": np.arange(start, start + n, dtype=np.int64)}
        cols.update({k: _plain(batch[k].numpy()) for k in keys})
        if label in batch:
            cols[label] = _label_values(batch[label].numpy(), model)
        cols.update(_answers(model, {n_: batch[n_] for n_ in model.features}))
        frames.append(pd.DataFrame(cols))
        start += n
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _answers(model: ServedModel, features: dict[str, Any]) -> dict[str, np.ndarray]:
    return model.columns(model.outputs(features))


def _plain(values: np.ndarray) -> np.ndarray:
    return np.array([v.decode() for v in values], dtype=object) if values.dtype == object \
        else values


def _label_values(values: np.ndarray, model: ServedModel) -> np.ndarray:
    """The stored label as the model names its answers: a class name, or the value."""
    if not model.classes:
        return values.astype(np.float64)
    return np.asarray(model.classes, dtype=object)[values.astype(np.int64)].astype(str)


def _check_features(model: ServedModel, manifest: Manifest, where: str) -> None:
    have = manifest.schema.features if manifest.schema else {}
    _check_columns(model, list(have), where)
    wrong = sorted(n for n, d in model.features.items() if have[n].dtype != d)
    if wrong:
        raise ValueError(f"{where}: features {wrong} have other dtypes than the model "
                         f"{model.model_id} was trained on; retrain on this spec")


def _check_columns(model: ServedModel, have: list[str], where: str) -> None:
    missing = sorted(set(model.features) - set(have))
    if missing:
        raise ValueError(f"{where}: lacks features {missing} that the current model "
                         f"{model.model_id} takes; retrain on this spec")


def _stat(uri: str) -> dict[str, Any]:
    try:
        info = storage.stat(uri)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such raw file: {uri}") from None
    return {k: info[k] for k in ("size", "mtime", "generation") if info.get(k) is not None}
