"""Any header a CSV, Parquet or JSON-lines file can hold is usable end to end: a hand-written
spec reads ``Ship Mode``, ``Sub-Category``, ``Postal.Code``, ``2nd score``, ``Größe``, ``class``
and the case-only pair ``Price``/``price`` by ``source:``; ``etl run`` publishes the same
version from each format (the Parquet one through a Dask cluster), training exports a model,
and plain TensorFlow serves it a raw row keyed by the spec's names. A wrong header is refused
naming the file, the header and the column that reads it."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from etl import versions
from etl.__main__ import main

pytestmark = pytest.mark.e2e

N = 400
HEADERS = {  # identifier -> header as the file holds it (None: the same)
    "row_id": "Row ID", "order_date": "Order Date", "ship_mode": "Ship Mode",
    "sub_category": "Sub-Category", "postal_code": "Postal.Code", "score_2nd": "2nd score",
    "groesse": "Größe", "class": None, "Price": None, "price": None,
}
TYPES = {"row_id": "int64", "order_date": "timestamp", "ship_mode": "string",
         "sub_category": "string", "postal_code": "string", "score_2nd": "float64",
         "groesse": "float64", "class": "string", "Price": "float64", "price": "float64"}
FEATURES = [("ship_mode", "categorical"), ("sub_category", "categorical"),
            ("postal_code", "categorical"), ("groesse", "numeric"), ("class", "categorical"),
            ("Price", "numeric"), ("price", "numeric")]


def _frame() -> pd.DataFrame:
    """Rows whose label (``2nd score`` > 25) follows ``Price``; ``price`` is another column on
    another scale, so swapping the case-only pair shows in the statistics."""
    rng = np.random.default_rng(7)
    big = rng.uniform(0, 100, N).round(2)
    return pd.DataFrame({
        "Row ID": np.arange(1, N + 1),
        "Order Date": [f"{1 + i % 28:02d}.{1 + i % 12:02d}.2024" for i in range(N)],
        "Ship Mode": rng.choice(["First Class", "Second Class", "Standard Class"], N),
        "Sub-Category": rng.choice(["Bookcases", "Chairs", "Phones"], N),
        "Postal.Code": rng.choice(["02134", "10001", "94110"], N),
        "2nd score": (big * 0.5 + rng.normal(0, 2, N)).round(3),
        "Größe": rng.uniform(1, 10, N).round(2),
        "class": rng.choice(["A", "B", "C"], N),
        "Price": big,
        "price": rng.uniform(0, 5, N).round(2),
    })


def _land(root: Path, fmt: str) -> str:
    """The table as one raw file of ``fmt``; its path relative to the root."""
    rel = f"raw/orders/orders.{fmt}"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    df = _frame()
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    return rel


def _column(ident: str, header: str | None) -> str | dict:
    if header is None:
        return TYPES[ident]
    decl = {"type": TYPES[ident], "source": header}
    return {**decl, "format": "%d.%m.%Y"} if ident == "order_date" else decl


def _spec(folder: Path, name: str, fmt: str, uri: str,
          headers: dict[str, str | None] = HEADERS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "name": name,
        "sources": {"orders": {"uri": uri, "format": fmt, "columns": {
            ident: _column(ident, header) for ident, header in headers.items()}}},
        "primary": "orders", "key": ["row_id"],
        "label": {"name": "high", "source": "score_2nd", "op": "gt", "value": 25},
        "features": [{"name": n, "kind": k} for n, k in FEATURES],
        "split": {"fractions": {"train": 0.6, "eval": 0.2, "test": 0.2}, "salt": "h"},
        "expectations": "expectations.json", "shards": {"min_train_shards": 1},
        "schedule": "none",
    }
    (folder / "spec.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True, sort_keys=False),
                                      encoding="utf-8")
    row = [("expect_column_values_to_not_be_null", {"column": "class"}),
           ("expect_column_values_to_be_in_set",
            {"column": "ship_mode", "value_set": ["First Class", "Second Class",
                                                  "Standard Class"]}),
           ("expect_column_values_to_be_between", {"column": "Price", "min_value": 0,
                                                   "max_value": 100}),
           ("expect_column_values_to_be_between", {"column": "price", "min_value": 0,
                                                   "max_value": 5})]
    suite = {"name": name, "expectations": [
        {"type": t, "kwargs": kw, "meta": {"level": "row"}, "severity": "critical"}
        for t, kw in row] + [
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "row_id"},
         "meta": {"level": "dataset"}, "severity": "critical"}]}
    (folder / "expectations.json").write_text(json.dumps(suite, indent=1))
    return folder / "spec.yaml"


def _run(root: Path, spec: Path) -> dict:
    """``python -m etl run --json`` through its main(); its result is the JSON it prints."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", "--json", "--root", root.as_uri(), "--dataset", str(spec),
                     "--interval-end", "2026-01-01"])
    assert code == 0, err.getvalue()[-3000:]
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One version per format from the same rows; the Parquet one through a Dask cluster."""
    root = tmp_path_factory.mktemp("headers")
    out = {"root": root}
    said: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    cluster_log = logging.getLogger("etl.cluster")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PIPELINE_SPECS_PATH", raising=False)
        mp.setattr(cluster_log, "level", logging.INFO)
        cluster_log.addHandler(handler)
        try:
            for fmt in ("csv", "jsonl", "parquet"):
                if fmt == "parquet":  # the Dask path: a LocalCluster reads it, not this process
                    mp.setenv("PIPELINE_IN_PROCESS_BYTES", "0")
                spec = _spec(root / "specs" / f"orders_{fmt}", f"orders_{fmt}", fmt,
                             _land(root, fmt))
                out[fmt] = _run(root, spec)
                out[f"{fmt}_clusters"] = sum("starting a LocalCluster" in m for m in said)
        finally:
            cluster_log.removeHandler(handler)
    return out


def test_every_format_publishes_by_identifier(published: dict) -> None:
    manifests = {fmt: versions.read_manifest(published[fmt]["version_uri"])
                 for fmt in ("csv", "jsonl", "parquet")}
    assert published["jsonl_clusters"] == 0  # in-process; Parquet goes through Dask, whose
    # cluster may already run in a long test session, so its start is not asserted
    csv = manifests["csv"]
    assert set(csv.schema.features) == {n for n, _ in FEATURES}
    numeric, vocab = csv.statistics.numeric, csv.statistics.vocabularies
    assert 40 < numeric["Price"].mean < 60 and numeric["price"].mean < 5  # not swapped
    assert set(vocab["postal_code"]) == {"02134", "10001", "94110"}  # text kept, zero kept
    assert set(vocab["class"]) == {"A", "B", "C"}
    assert csv.verdict.quarantined_rows == 0
    for fmt in ("jsonl", "parquet"):  # one contract: the same Examples from every format
        assert manifests[fmt].statistics == csv.statistics, fmt
        assert {s: v.num_examples for s, v in manifests[fmt].splits.items()} == \
            {s: v.num_examples for s, v in csv.splits.items()}


@pytest.fixture(scope="module")
def trained(published: dict):
    from training.config import InputConfig, TrainConfig
    from training.run.train import train

    config = TrainConfig(input=InputConfig(batch_size=32, shuffle_buffer=256, seed=1),
                         epochs=8, steps_per_execution=1, min_margin=0.0,
                         min_eval_examples=10)
    root = published["root"]
    return train(published["csv"]["version_uri"], f"{root.as_uri()}/models", "run-1", config)


def test_the_exported_model_serves_rows_keyed_by_the_spec_names(published, trained) -> None:
    import tensorflow as tf

    from training.data.tabular import local_or_remote_path
    from training.models.tabular import SERVING_KEYS_FILE

    saved = Path(local_or_remote_path(f"{trained.model_uri}/saved_model"))
    loaded = tf.saved_model.load(str(saved))
    df = _frame()
    rows = {"ship_mode": df["Ship Mode"], "sub_category": df["Sub-Category"],
            "postal_code": df["Postal.Code"], "groesse": df["Größe"], "class": df["class"],
            "Price": df["Price"], "price": df["price"]}
    raw = {name: tf.constant(values.to_numpy(), dtype="string" if kind == "categorical"
                             else "float32") for (name, kind), values in
           zip(FEATURES, [rows[n] for n, _ in FEATURES], strict=True)}
    out = loaded.serve(raw).numpy()[:, 0]
    high = (df["2nd score"] > 25).to_numpy()
    assert out[high].mean() > out[~high].mean() + 0.2  # it learned Price, served by name
    keys = json.loads((saved / SERVING_KEYS_FILE).read_text())
    assert set(keys) == set(raw) and keys["Price"] != keys["price"]
    flat = loaded.signatures["serving_default"](**{keys[n]: t for n, t in raw.items()})
    np.testing.assert_allclose(next(iter(flat.values())).numpy()[:, 0], out, rtol=1e-5)


def test_a_wrong_header_is_refused_naming_it(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rel = _land(tmp_path, "csv")
    spec = _spec(tmp_path / "specs" / "orders_bad", "orders_bad", "csv", rel,
                 {**HEADERS, "ship_mode": "ShipMode"})
    code = main(["run", "--root", tmp_path.as_uri(), "--dataset", str(spec),
                 "--interval-end", "2026-01-01"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "orders.csv: missing column(s) ['ShipMode'] ('ShipMode' read as column " \
           "'ship_mode')" in err
    assert "renamed? 'ShipMode' -> 'Ship Mode'" in err


def test_the_ui_lists_the_features_and_checks_by_identifier(published, trained) -> None:
    import sys

    from fastapi.testclient import TestClient

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))
    from pipeline_ui.app import create_app

    client = TestClient(create_app(published["root"].as_uri()))
    base = f"/datasets/orders_csv/versions/{published['csv']['version']}"
    pages = {p: client.get(base + p) for p in ("", "/validation", "/models/run-1")}
    assert {p: r.status_code for p, r in pages.items()} == dict.fromkeys(pages, 200)
    table = pages[""].text.split('id="features"', 1)[1].split("</table>", 1)[0]
    shown = re.findall(r"<tr[^>]*>\s*<td[^>]*>(.*?)</td>", table, flags=re.DOTALL)
    assert sorted(re.sub(r"<[^>]+>", "", s).strip() for s in shown) == sorted(
        n for n, _ in FEATURES)
    assert "First Class" in table
    checks = re.sub(r"<[^>]+>", "", pages["/validation"].text)
    assert "ship_mode" in checks and "Price" in checks and "Traceback" not in checks
