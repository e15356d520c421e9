"""Storage roots for the UI tests: published versions, models, and hostile content.

``build_catalog_root`` writes, under a local root, what the pipeline publishes per
docs/INTERFACES.md: versions with shards, manifest, Data Docs, quarantine and LATEST;
a half-written version (no manifest); model runs with metrics, plots and a card. It also
adds a dataset whose manifest, metrics and card carry ``<script>`` to test escaping.
``add_model_run`` puts a model run beside any version, including one the real ETL wrote;
``real_etl_root`` runs the real ETL (``etl.pipeline``) once per test session.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from etl.kinds.landing import LandOptions

XSS = "<script>alert('xss')</script>"
DATASET = "flights"
HOSTILE_DATASET = "hostile"
SPLITS = {"train": 0.8, "eval": 0.1, "test": 0.1}
FIRST_END = datetime(2013, 1, 2, tzinfo=UTC)
REAL_START, REAL_END = datetime(2013, 1, 1, tzinfo=UTC), datetime(2013, 1, 2, tzinfo=UTC)
REAL_RUN_ID = f"scheduled__{REAL_END.isoformat()}"
_real: dict[str, object] = {}  # one real ETL run per pytest session, shared by UI tests


@dataclass(frozen=True)
class BuiltRoot:
    """What was written, so tests can assert on it without re-deriving names."""

    root: Path
    versions: list[str]  # complete versions of DATASET, oldest first
    incomplete: str
    runs: dict[str, list[str]] = field(default_factory=dict)  # version -> model runs
    hostile_version: str = ""

    @property
    def uri(self) -> str:
        return f"file://{self.root}"


def vid(end: datetime, start: datetime | None = None) -> str:
    """Version id as INTERFACES.md spells it: ``<end>_<start|all>``."""
    fmt = "%Y%m%dT%H%M%SZ"
    return f"{end.strftime(fmt)}_{start.strftime(fmt) if start else 'all'}"


def png(width: int = 96, height: int = 48, seed: int = 0) -> bytes:
    """A real (tiny) RGB PNG, so browsers decode what the UI serves."""
    rows = b"".join(
        b"\x00" + bytes(((x * 255 // width + seed) % 256, (y * 255 // height) % 256, 160)[c]
                        for x in range(width) for c in range(3))
        for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _shards(vdir: Path, dataset: str, split: str, records: int, n: int) -> dict:
    shards = []
    for i in range(n):
        name = f"{dataset}-{split}.tfrecord-{i:05d}-of-{n:05d}"
        data = hashlib.sha256(f"{vdir.name}/{name}".encode()).digest() * (8 + records // n // 8)
        _write(vdir / name, data)
        shards.append({"file": name, "records": records // n, "bytes": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()})
    return {"num_examples": sum(s["records"] for s in shards),
            "num_bytes": sum(s["bytes"] for s in shards), "shards": shards}


def manifest(dataset: str, version: str, end: datetime, start: datetime | None, rows: int,
             run_id: str, quarantined: int = 3, text: str = "UA") -> dict:
    """A manifest with every field of INTERFACES.md (format_version 1)."""
    return {
        "format_version": 1, "dataset": dataset, "version": version,
        "data_interval": {"start": start.isoformat().replace("+00:00", "Z") if start else None,
                          "end": end.isoformat().replace("+00:00", "Z")},
        "created_at": (end + timedelta(hours=2)).isoformat(), "run_id": run_id,
        "code_version": "0123abc", "compression": None, "splits": {},
        "schema": {
            "key": ["time_hour", "carrier", "flight", "origin"],
            "label": {"name": "late", "dtype": "int64", "classes": 2},
            "features": {"distance": {"dtype": "float32", "kind": "numeric"},
                         "dep_hour": {"dtype": "int64", "kind": "numeric"},
                         "carrier": {"dtype": "string", "kind": "categorical"},
                         "image": {"dtype": "string", "kind": "image", "shape": [8, 8, 1],
                                   "encoding": "png"}}},
        "statistics": {"computed_on": "train",
                       "numeric": {"distance": {"mean": 1039.9, "var": 538_000.1, "min": 17.0,
                                                "max": 4983.0},
                                   "dep_hour": {"mean": 13.1, "var": 22.9, "min": 5, "max": 23}},
                       "vocabularies": {"carrier": [text, "AA", "B6", "DL", "EV"]},
                       "label_counts": {"0": int(rows * 0.77), "1": rows - int(rows * 0.77)}},
        "source_fingerprint": {"sha256": hashlib.sha256(version.encode()).hexdigest(),
                               "files": [{"uri": f"raw/flights/date={end:%Y-%m-%d}/flights.csv",
                                          "size": 120_345, "mtime": end.isoformat()}]},
        "validation": {"success": True, "evaluated_rows": rows + quarantined,
                       "quarantined_rows": quarantined, "results": "validation/results.json",
                       "data_docs": "validation/index.html", "mode": "quarantine",
                       "timings_s": {"row_level": 0.9, "row_level_task_cpu": 0.6}},
    }


def gx_results(text: str = "UA") -> dict:
    """A GX suite result as ``etl.validation`` stores it: one passed, one failed expectation."""
    def item(kind: str, column: str, ok: bool, **result: object) -> dict:
        return {"success": ok, "expectation_config": {"type": kind, "kwargs": {
            "column": column, "batch_id": "b", "min_value": 0}}, "result": result}

    return {"success": True, "statistics": {"evaluated_expectations": 2},
            "meta": {"mode": "quarantine", "dataset": "flights"}, "results": [
                item("expect_column_values_to_not_be_null", "carrier", True, element_count=903,
                     unexpected_count=0),
                item("expect_column_values_to_be_between", "distance", False, element_count=903,
                     unexpected_count=3, unexpected_percent=0.33,
                     partial_unexpected_list=[-1.0, 99999.0, text])]}


def write_version(root: Path, dataset: str, end: datetime, start: datetime | None = None,
                  rows: int = 900, run_id: str | None = None, text: str = "UA") -> str:
    """Publish one version the way the pipeline does: shards, side files, manifest last."""
    version = vid(end, start)
    vdir = root / "datasets" / dataset / version
    run_id = run_id or f"scheduled__{end.isoformat()}"
    doc = manifest(dataset, version, end, start, rows, run_id, text=text)
    for split, frac in SPLITS.items():
        doc["splits"][split] = _shards(vdir, dataset, split, int(rows * frac), 2)
    _write(vdir / "validation" / "results.json", json.dumps(gx_results(text)))
    _write(vdir / "validation" / "index.html",
           "<html><head><title>Data Docs</title><link rel='stylesheet' href='static/docs.css'>"
           "</head><body><h1>Validation results</h1>"
           f"<a href='validations/{dataset}_suite/run.html'>suite run</a>"
           "<script>document.title='scripts ran'</script></body></html>")
    _write(vdir / "validation" / "static" / "docs.css", "h1 { color: #333; }")
    _write(vdir / "validation" / "validations" / f"{dataset}_suite" / "run.html",
           "<html><body><p>expectation results</p></body></html>")
    _write(vdir / "quarantine" / "part-00000.csv", "reason,flight\nnull key,1\n")
    _write(vdir / "manifest.json", json.dumps(doc, indent=2))
    _write(root / "datasets" / dataset / "LATEST", version)
    return version


def add_model_run(root: Path, dataset: str, version: str, run: str, auc: float = 0.71,
                  text: str = "", card_extra: str = "") -> Path:
    """A finished training run as training/ writes it: model, metrics, plots, card."""
    rdir = root / "models" / dataset / version / run
    intervals = {"level": 0.95, "method": "percentile bootstrap", "resamples": 200,
                 "metrics": {"auc": [auc - 0.02, auc + 0.02], "accuracy": [0.78, 0.82]},
                 "lead_over_baseline": {"auc": [auc - 0.52, auc - 0.48]}}
    metrics = {"test": {"auc": auc, "accuracy": 0.80, "loss": 0.45, "intervals": intervals},
               "eval": {"auc": auc - 0.01, "accuracy": 0.79, "loss": 0.46},
               "baseline": {"accuracy": 0.77, "auc": 0.5},
               "examples_per_s": 41_250.5, "device": "CPU", "precision": "float32", "epochs": 3,
               "history": {"loss": [0.6, 0.5, 0.45], "val_loss": [0.61, 0.52, 0.46]}}
    if text:
        metrics[f"{text}_auc"] = 0.5
    _write(rdir / "model.keras", b"PK\x03\x04 keras zip stand-in")
    _write(rdir / "learning_curves.png", png(seed=len(run)))
    _write(rdir / "plots" / "auc.png", png(seed=7))
    _write(rdir / "model_card.md",
           f"# Model card: {dataset} {version}\n\nTrained on **{dataset}** version `{version}`.\n\n"
           "| metric | value |\n| --- | --- |\n"
           f"| test AUC | {auc} |\n\n![learning curves](learning_curves.png)\n{card_extra}")
    _write(rdir / "metrics.json", json.dumps(metrics))  # written last, as training does
    return rdir


def write_hostile(root: Path) -> str:
    """A dataset whose manifest, metrics, card and even a folder name carry markup."""
    hostile = write_version(root, HOSTILE_DATASET, FIRST_END, run_id=f"manual__{XSS}", text=XSS)
    doc_path = root / "datasets" / HOSTILE_DATASET / hostile / "manifest.json"
    doc = json.loads(doc_path.read_text())
    doc["code_version"] = XSS
    doc["schema"]["features"][XSS] = {"dtype": "float32", "kind": "numeric"}
    doc[XSS] = {"note": XSS}
    doc_path.write_text(json.dumps(doc))
    add_model_run(root, HOSTILE_DATASET, hostile, "run1", text=XSS,
                  card_extra=f"\n{XSS}\n\n[click](javascript:alert(1))\n\n<img src=x onerror=alert(1)>\n")
    (root / "datasets" / "<img src=x onerror=alert(1)>").mkdir(parents=True)
    return hostile


IMAGES_DATASET = "digits"


def write_image_version(root: Path, end: datetime = FIRST_END, rows: int = 120) -> str:
    """An images version shaped like ``etl`` writes it: a file *count* as the fingerprint,
    ``{summary, failures}`` as results, no per-expectation list in the manifest."""
    version = vid(end)
    vdir = root / "datasets" / IMAGES_DATASET / version
    summary = {"success": True, "kind": "images", "evaluated_rows": rows + 1,
               "quarantined_rows": 1, "max_quarantined": 2, "mode": "quarantine",
               "reasons": {"undecodable": 1}}
    doc = {"format_version": 1, "dataset": IMAGES_DATASET, "version": version,
           "data_interval": {"start": None, "end": end.isoformat().replace("+00:00", "Z")},
           "created_at": end.isoformat(), "run_id": f"manual__{end.isoformat()}",
           "code_version": "0123abc", "compression": None, "splits": {},
           "schema": {"key": ["key"], "label": {"name": "label", "dtype": "int64", "classes": 10},
                      "features": {"image": {"dtype": "string", "kind": "image",
                                             "shape": [8, 8, 1], "encoding": "png"}}},
           "statistics": {"computed_on": "train", "numeric": {}, "vocabularies": {},
                          "images": {"height": [8, 8], "width": [8, 8]}},
           "source_fingerprint": {"files": rows + 1, "sha256": "ab" * 32,
                                  "source": f"file://{root}/raw/digits"},
           "validation": {**summary, "results": "validation/results.json",
                          "data_docs": "validation/index.html"}}
    for split, frac in SPLITS.items():
        doc["splits"][split] = _shards(vdir, IMAGES_DATASET, split, int(rows * frac), 1)
    failures = [{"key": "k1", "uri": "raw/digits/3/bad.png", "reason": f"undecodable: {XSS}"}]
    _write(vdir / "validation" / "results.json",
           json.dumps({"summary": summary, "failures": failures}))
    _write(vdir / "validation" / "index.html", "<!doctype html><title>Image validation</title>")
    _write(vdir / "manifest.json", json.dumps(doc, indent=2))
    add_model_run(root, IMAGES_DATASET, version, "20130102T050000Z")
    return version


def build_catalog_root(root: Path, n_versions: int = 25) -> BuiltRoot:
    """Versions of DATASET (daily), an incomplete one, models on the two newest, hostile data."""
    versions = [write_version(root, DATASET, FIRST_END + timedelta(days=i),
                              FIRST_END + timedelta(days=i - 1)) for i in range(n_versions)]
    incomplete_end = FIRST_END + timedelta(days=n_versions + 5)
    incomplete = vid(incomplete_end)
    _shards(root / "datasets" / DATASET / incomplete, DATASET, "train", 10, 1)
    runs = {versions[-1]: ["20130127T030000Z", "20130127T040000Z"], versions[-2]: ["20130126T030000Z"]}
    for version, names in runs.items():
        for i, run in enumerate(names):
            add_model_run(root, DATASET, version, run, auc=0.7 + i / 100)
    (root / "models" / DATASET / versions[-1] / "20130127T050000Z").mkdir(parents=True)
    hostile = write_hostile(root)
    write_image_version(root)
    return BuiltRoot(root, versions, incomplete, runs, hostile)


def real_etl_root(tmp_path_factory) -> tuple[Path, str]:
    """A private copy of a root where the real ETL published one day of 2013 flights.

    The ETL (Dask + Great Expectations) runs once per session; each caller gets its own
    copy so adding model runs in one test module cannot leak into another.
    """
    if not _real:
        from etl import pipeline

        root = tmp_path_factory.mktemp("ui-real-etl") / "root"
        pipeline.land(root.as_uri(), DATASET, LandOptions(start=REAL_START.date(), end=REAL_END.date()))
        result = pipeline.run(DATASET, root.as_uri(), REAL_END.isoformat(), REAL_START.isoformat(),
                              run_id=REAL_RUN_ID)
        _real.update(root=root, version=result.version)
    copy = tmp_path_factory.mktemp("ui-real-copy") / "root"
    shutil.copytree(_real["root"], copy)
    return copy, str(_real["version"])


REAL_IMAGES_END = "2024-01-01T00:00:00+00:00"
REAL_IMAGES_RUN_ID = f"manual__{REAL_IMAGES_END}"


def add_real_digits(root: Path, tmp_path_factory) -> str:
    """Copy into ``root`` the digits version the real image ETL publishes (run once per session)."""
    if "digits_root" not in _real:
        from etl import pipeline
        from etl.kinds import land

        built = tmp_path_factory.mktemp("ui-real-digits") / "root"
        land(built.as_uri(), IMAGES_DATASET)
        result = pipeline.run(IMAGES_DATASET, built.as_uri(), REAL_IMAGES_END,
                              run_id=REAL_IMAGES_RUN_ID)
        _real.update(digits_root=built, digits_version=result.version)
    shutil.copytree(Path(str(_real["digits_root"])) / "datasets" / IMAGES_DATASET,
                    root / "datasets" / IMAGES_DATASET, dirs_exist_ok=True)
    return str(_real["digits_version"])
