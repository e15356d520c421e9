"""One score run: the current model over a published version's rows, or over raw files.

``score(options)`` picks the rows (``ScoreOptions.raw`` empty: the version's window, every
split's shards in the manifest's order through one tf.data pipeline that parses each batch
and runs it through the SavedModel's serving signature (``training.score.model``) in
parallel, in order; else those raw files, read and checked by the spec,
``etl.kinds.tabular.unlabelled``, batch by batch through the same signature) and publishes one
Parquet part per shard (raw: per batch), built as Arrow columns, with the manifest last
(``training.score.publish``). The
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
import pyarrow as pa

from etl import storage, versions
from etl.errors import MissingRawFileError
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
    """What to score and where: ``raw`` files (of the spec's primary source: URIs, or paths
    under ``root``, ``raw_uris``) or the ``version`` ('latest' or an id) of ``dataset`` under
    ``root``."""

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
    constant = {"model_run": model.run, "version": manifest.version}

    def parts() -> Iterator[pa.Table]:
        for shard in _scored_shards(model, vuri, manifest, list(manifest.splits),
                                    options.batch_size):
            tally.predicted.append(shard.prediction)
            tally.rows += shard.rows
            yield shard.table(model, constant)

    source = {"kind": "version", "version": manifest.version, "version_uri": vuri}
    return _publish(options, model, uri, parts(), tally, source)


def _score_raw(options: ScoreOptions, model: ServedModel) -> Published:
    from etl.kinds.tabular.unlabelled import check_unlabelled
    from etl.spec import load_spec

    spec = load_spec(options.spec or options.dataset)
    raw = raw_uris(options.root, options.raw)
    files = [{"uri": u, **_stat(u)} for u in raw]
    window = RAW_PREFIX + hashlib.sha256(storage.json_bytes(files)).hexdigest()[:12]
    uri = predictions_uri(options.root, options.dataset, window, model.model_id)
    tally = _Tally()

    def parts() -> Iterator[pa.Table]:
        checked = check_unlabelled(options.root, spec, list(raw),
                                   storage.join(uri, QUARANTINE_DIR))
        tally.rows, tally.quarantined = checked.rows, checked.quarantined
        if checked.quarantine_file:  # the manifest names it relative to the folder
            tally.quarantine_file = f"{QUARANTINE_DIR}/{checked.quarantine_file.rsplit('/', 1)[-1]}"
        _check_columns(model, list(checked.features.columns), f"spec {spec.name}")
        for lo in range(0, len(checked.features), options.batch_size):
            feats = checked.features.iloc[lo:lo + options.batch_size]
            keys = checked.keys.iloc[lo:lo + options.batch_size].reset_index(drop=True)
            answers = model.columns(model.outputs({n: feats[n].to_numpy()
                                                   for n in model.features}))
            tally.predicted.append(answers["prediction"])
            n = len(feats)
            yield pa.table({
                    **{c: pa.Array.from_pandas(keys[c]) for c in keys.columns}, **answers,
                    "model_run": _repeat(model.run, n), "version": _repeat(window, n)})

    source = {"kind": "raw", "files": files, "spec": spec.name}
    return _publish(options, model, uri, parts(), tally, source, window)


def raw_uris(root: str, raw: tuple[str, ...]) -> tuple[str, ...]:
    """The raw files to score as URIs: a full URI (``file://``, ``gs://``) or an absolute
    local path as given, a relative path under the storage root, as the ETL reads a source's
    (``raw/flights/date=2013-01-05/flights.csv``, what the scoring form suggests; a ``..``
    that leaves the root is refused: PathOutsideRootError)."""
    return tuple(u if "://" in u or u.startswith("/") else storage.safe_join(root, u)
                 for u in raw)


def _publish(options: ScoreOptions, model: ServedModel, uri: str, parts: Iterator[pa.Table],
             tally: _Tally, source: dict[str, Any], window: str | None = None) -> Published:
    t0 = time.monotonic()

    def manifest_of(written: list[Part]) -> dict[str, Any]:
        predicted = np.concatenate(tally.predicted) if tally.predicted else np.zeros(0)
        reference = reference_predictions(model, options.batch_size)
        return {
            "format_version": 1, "dataset": options.dataset,
            "window": window or source["version"], "source": source,
            "model": {"version": model.version, "run": model.run, "model_uri": model.model_uri,
                      "task": model.task, "classes": list(model.classes)},
            "rows": tally.rows, "scored": int(sum(p.rows for p in written)),
            "quarantined": tally.quarantined, "quarantine": tally.quarantine_file,
            "parts": [p.to_json() for p in written],
            "distribution": drift.distribution(predicted, reference, model.classes),
            "run_id": options.run_id, "code_version": code_version(),
            "seconds": round(time.monotonic() - t0, 3),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    owner = f"score:{options.dataset}:{uri.rsplit('/', 2)[-2]}:{model.model_id}"
    done = publish(uri, owner, parts, manifest_of)
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
    found = [s.prediction for s in _scored_shards(model, model.version_uri, manifest, ["test"],
                                                   batch_size)]
    return np.concatenate(found) if found else np.zeros(0)


@dataclass(frozen=True)
class _ScoredShard:
    """One shard's rows scored, in record order: its key columns and stored label as read,
    and the model's answers (``training.score.model.ServedModel.columns``)."""

    split: str
    file: str
    read: dict[str, np.ndarray]
    answers: dict[str, np.ndarray]

    @property
    def rows(self) -> int:
        return len(self.prediction)

    @property
    def prediction(self) -> np.ndarray:
        return self.answers["prediction"]

    def table(self, model: ServedModel, constant: dict[str, str]) -> pa.Table:
        """split, shard, record, the key columns and label, the answers, then ``constant``."""
        n = self.rows
        label = model.manifest.schema.label.name if model.manifest.schema else None
        cols: dict[str, Any] = {"split": _repeat(self.split, n), "shard": _repeat(self.file, n),
                                "record": np.arange(n, dtype=np.int64)}
        cols.update({name: _label_values(v, model) if name == label else _arrow(v)
                     for name, v in self.read.items()})
        cols.update(self.answers)
        cols.update({k: _repeat(v, n) for k, v in constant.items()})
        return pa.table(cols)


def _scored_shards(model: ServedModel, vuri: str, manifest: Manifest, splits: list[str],
                   batch_size: int) -> Iterator[_ScoredShard]:
    """Every shard of ``splits`` (the manifest's order) scored through one tf.data pipeline:
    the shards read one after another, cut in batches that never cross a shard, each batch
    parsed and run through the serving signature inside the pipeline, in parallel and in
    order, so this loop only gathers the answers."""
    import tensorflow as tf

    from training.data.tabular import compression_type, local_or_remote_path, parse_batch

    shards = [(split, entry) for split in splits for entry in manifest.splits[split].shards]
    if not shards:
        return
    label = manifest.schema.label.name if manifest.schema else None
    read = [k for k in (manifest.schema.key_columns if manifest.schema else ())
            if k in model.features] + ([label] if label else [])
    parse, signature, compression = parse_batch(manifest), model.signature, \
        compression_type(manifest)
    paths = [local_or_remote_path(versions.shard_uri(vuri, e)) for _, e in shards]

    def run(records: Any, index: Any) -> dict[str, Any]:
        batch = parse(records)
        args = {model.keys[n]: tf.cast(batch[n], d) for n, d in model.features.items()}
        out = signature(**args)
        kept = {n: batch[n] for n in read if n in batch}
        return {"index": index, "out": next(iter(out.values())) if isinstance(out, dict)
                else out, **kept}

    ds = (tf.data.Dataset.from_tensor_slices((paths, tf.range(len(paths), dtype=tf.int64)))
          .flat_map(lambda path, index: tf.data.TFRecordDataset(path, compression)
                    .batch(batch_size).map(lambda records: (records, index)))
          .map(run, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
          .prefetch(tf.data.AUTOTUNE))
    current, outs, cols = -1, [], {}  # the shard being gathered, its batches

    def done() -> _ScoredShard:
        split, entry = shards[current]
        return _ScoredShard(split, entry.file, {n: np.concatenate(v) for n, v in cols.items()},
                            model.columns(np.concatenate(outs)))

    for batch in ds.as_numpy_iterator():
        if int(batch["index"]) != current:
            if outs:
                yield done()
            current, outs, cols = int(batch["index"]), [], {}
        out = np.asarray(batch["out"], dtype=np.float64)
        outs.append(out.reshape(len(out), -1))
        for name in read:
            if name in batch:
                cols.setdefault(name, []).append(batch[name])
    if outs:
        yield done()


def _repeat(value: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), [value]).dictionary_decode()


def _arrow(values: np.ndarray) -> pa.Array:
    """A read column as Arrow: strings decoded from the records' bytes (as UTF-8)."""
    if values.dtype == object:
        return pa.array(values, type=pa.binary()).cast(pa.string())
    return pa.array(values)


def _label_values(values: np.ndarray, model: ServedModel) -> np.ndarray:
    """The stored label as the model names its answers: a class name, or the value."""
    if not model.classes:
        return values.astype(np.float64)
    return np.asarray(model.classes, dtype=str)[values.astype(np.int64)]


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
        raise MissingRawFileError(f"no such raw file: {uri}") from None
    return {k: info[k] for k in ("size", "mtime", "generation") if info.get(k) is not None}
