"""Scoring raw rows that have no label yet: the wine table through the real ETL and a quickly
trained model, then new rows without the cultivar column scored; a row failing the spec's
checks is quarantined with its reason and not scored."""

from __future__ import annotations

import io
from pathlib import Path

import keras
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from etl.__main__ import main as etl_main
from tests.training.score.conftest import FAST
from training.judge.current import promote, read_current
from training.record import read_model_record
from training.run.train import train
from training.score.publish import read_predictions
from training.score.run import ScoreOptions, score


@pytest.fixture(scope="module")
def wine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("wine-score")
    uri = root.as_uri()
    assert etl_main(["land", "--root", uri, "--dataset", "wine"]) == 0
    assert etl_main(["run", "--root", uri, "--dataset", "wine",
                     "--interval-end", "2026-01-01"]) == 0
    version = next((root / "datasets" / "wine").glob("2026*"))
    result = train(version.as_uri(), f"{uri}/models", "run-1",
                   FAST.with_overrides(min_eval_examples=10, min_margin=0.0, folds=0))
    if not result.promoted:  # scoring is under test, not the gate: make the run current
        _, token = read_current(f"{uri}/models", "wine")
        record = read_model_record(result.model_uri)
        assert record is not None and promote(f"{uri}/models", record, "accuracy", token)
    assert read_current(f"{uri}/models", "wine")[0].run == "run-1"
    return root, result


def _new_rows(root: Path, folder: Path, bad: bool) -> tuple[str, pd.DataFrame]:
    rows = pd.read_csv(root / "raw" / "wine" / "wine.csv", dtype=str).iloc[100:130]
    rows = rows.drop(columns=["cultivar"]).reset_index(drop=True)  # no label yet
    if bad:
        rows.loc[5, "magnesium"] = "900"  # far outside what the suite allows
    path = folder / "tomorrow.csv"
    rows.to_csv(path, index=False)
    return path.as_uri(), rows


def test_unlabelled_rows_are_scored_as_the_model_answers_them(wine, tmp_path) -> None:
    root, result = wine
    raw_uri, rows = _new_rows(root, tmp_path, bad=False)
    done = score(ScoreOptions(root=root.as_uri(), dataset="wine", raw=(raw_uri,)))
    assert done.created and done.uri.split("/")[-2].startswith("raw-")
    m = done.manifest
    assert m["rows"] == m["scored"] == 30 and m["quarantined"] == 0 and m["quarantine"] is None
    assert m["source"]["kind"] == "raw" and m["source"]["files"][0]["uri"] == raw_uri
    frame = read_predictions(done.uri)
    assert frame["sample_id"].astype(int).tolist() == rows["sample_id"].astype(int).tolist()
    classes = ["class_0", "class_1", "class_2"]
    assert [c for c in frame.columns if c.startswith("probability_")] == [
        f"probability_{c}" for c in classes]
    model = keras.saving.load_model(Path(result.model_uri.removeprefix("file://"))
                                    / "model.keras")
    features = [c for c in rows.columns if c != "sample_id"]
    own = model({c: tf.constant(rows[c].astype(np.float32).to_numpy()) for c in features},
                training=False).numpy()
    probs = frame[[f"probability_{c}" for c in classes]].to_numpy()
    np.testing.assert_allclose(probs, own, rtol=1e-4, atol=1e-5)
    assert frame["prediction"].tolist() == [classes[i] for i in own.argmax(axis=1)]
    assert set(frame["version"]) == {done.uri.split("/")[-2]}
    assert m["distribution"]["kind"] == "class" and sum(m["distribution"]["scored"]) == 30


def test_a_row_failing_the_checks_is_quarantined_not_scored(wine, tmp_path) -> None:
    root, _ = wine
    raw_uri, rows = _new_rows(root, tmp_path, bad=True)
    done = score(ScoreOptions(root=root.as_uri(), dataset="wine", raw=(raw_uri,)))
    m = done.manifest
    assert (m["rows"], m["scored"], m["quarantined"]) == (30, 29, 1)
    bad_id = int(rows.loc[5, "sample_id"])
    assert bad_id not in read_predictions(done.uri)["sample_id"].astype(int).tolist()
    quarantine = Path(done.uri.removeprefix("file://")) / m["quarantine"]
    table = pq.read_table(io.BytesIO(quarantine.read_bytes())).to_pandas()
    assert table["sample_id"].astype(int).tolist() == [bad_id]
    reason = table.filter(like="reason").iloc[0, 0]
    assert "magnesium" in reason, reason


def test_a_raw_path_under_the_storage_root_is_scored_like_its_uri(wine, tmp_path) -> None:
    """Issue 51 item 7: the scoring form's "raw/wine/....csv" (a path under the storage root,
    as the ETL reads a source's) failed with FileNotFoundError: it was opened from the
    worker's working directory. It now reads under the root, and may not climb out of it."""
    from etl.errors import PathOutsideRootError

    root, _ = wine
    folder = root / "raw" / "wine" / "new"
    folder.mkdir(parents=True, exist_ok=True)
    raw_uri, rows = _new_rows(root, folder, bad=False)
    done = score(ScoreOptions(root=root.as_uri(), dataset="wine",
                              raw=("raw/wine/new/tomorrow.csv",)))
    m = done.manifest
    assert m["rows"] == m["scored"] == len(rows) and m["source"]["files"][0]["uri"] == raw_uri
    with pytest.raises(PathOutsideRootError):
        score(ScoreOptions(root=root.as_uri(), dataset="wine", raw=("../outside.csv",)))
