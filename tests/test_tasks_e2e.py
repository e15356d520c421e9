"""Multi-class (wine) and regression (diabetes) end to end from their specs alone:
``etl land`` -> ``etl.pipeline.run`` -> ``training.train.train`` -> a model that beats its
baseline, an exported model that takes raw values and returns class probabilities (names in
``label.json``) or the target in its own units; a class outside the spec publishes nothing.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import yaml

from etl import pipeline, versions
from etl.errors import ValidationFailed
from etl.sources.bundled import sklearn_frame
from etl.spec import SPECS_DIR, load_spec
from training.config import InputConfig, TrainConfig
from training.data.tabular import make_dataset
from training.evaluate import ModelQualityError
from training.train import train

pytestmark = pytest.mark.e2e  # ETL + training per dataset: minutes on a small machine

END = "2026-01-01"
CONFIG = TrainConfig(input=InputConfig(batch_size=32, seed=3), epochs=40, patience=6,
                     steps_per_execution=1, min_margin=0.05)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Wine and diabetes landed and published, each by the spec's own upstream."""
    uri = tmp_path_factory.mktemp("tasks").as_uri()
    for name in ("wine", "diabetes"):
        pipeline.land(uri, name)
        assert pipeline.run(name, uri, END)["created"]
    return uri


@pytest.fixture(scope="module")
def runs(root: str) -> dict[str, dict]:
    """Each dataset trained once (run ``run-1``): its metrics.json."""
    return {name: train(versions.resolve(root, name), f"{root}/models", "run-1", CONFIG)["metrics"]
            for name in ("wine", "diabetes")}


def _raw_test(version_uri: str) -> tuple[dict, np.ndarray]:
    """The test split's raw feature values (what a caller sends) and stored labels."""
    ds = make_dataset(version_uri, "test", config=InputConfig(batch_size=1024))
    features, labels = next(iter(ds))
    return features, labels.numpy().reshape(-1)


def _run_dir(root: str, name: str, run: str) -> Path:
    version = versions.latest_version(root, name)
    return Path(root.removeprefix("file://")) / "models" / name / version / run


@pytest.mark.timeout(900)
def test_wine_classifier_beats_majority_and_returns_class_probabilities(root: str,
                                                                       runs: dict) -> None:
    version_uri = versions.resolve(root, "wine")
    manifest = versions.read_manifest(version_uri)
    assert manifest["schema"]["label"]["names"] == ["class_0", "class_1", "class_2"]
    metrics = runs["wine"]
    test, base = metrics["test"], metrics["baseline"]
    assert metrics["task"] == "multiclass" and metrics["classes"] == ["class_0", "class_1", "class_2"]
    assert test["accuracy"] >= base["accuracy"] + CONFIG.min_margin
    assert test["macro_f1"] >= base["macro_f1"] + CONFIG.min_margin
    assert set(test["per_class"]) == {"class_0", "class_1", "class_2"}
    assert np.asarray(test["confusion_matrix"]).sum() == test["examples"] == base["examples"]
    run = _run_dir(root, "wine", "run-1")
    assert (run / "plots" / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run / "label.json").read_text())["names"] == metrics["classes"]
    assert "| macro_f1 |" in (run / "model_card.md").read_text()
    features, labels = _raw_test(version_uri)
    probs = keras.saving.load_model(run / "model.keras")(features).numpy()
    assert probs.shape == (len(labels), 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert np.mean(probs.argmax(axis=1) == labels) == pytest.approx(test["accuracy"])


@pytest.mark.timeout(900)
def test_diabetes_regressor_beats_the_mean_in_the_targets_units(root: str, runs: dict) -> None:
    version_uri = versions.resolve(root, "diabetes")
    metrics = runs["diabetes"]
    test, base = metrics["test"], metrics["baseline"]
    assert metrics["task"] == "regression" and metrics["transform"] == "log1p"
    assert test["rmse"] <= base["rmse"] * (1 - CONFIG.min_margin)
    assert test["r2"] > 0.2 and base["r2"] < 0.05
    run = _run_dir(root, "diabetes", "run-1")
    for plot in ("predicted_vs_actual.png", "residuals.png"):
        assert (run / "plots" / plot).read_bytes()[:4] == b"\x89PNG"
    features, y = _raw_test(version_uri)
    pred = keras.saving.load_model(run / "model.keras")(features).numpy().reshape(-1)
    # the exported model undoes log1p: its errors on raw rows are the reported ones, in units
    assert np.sqrt(np.mean((pred - y) ** 2)) == pytest.approx(test["rmse"], rel=1e-4)
    assert 20 < pred.min() and pred.max() < 400


@pytest.mark.timeout(900)
def test_a_model_that_cannot_beat_the_mean_is_not_published(root: str) -> None:
    version_uri = versions.resolve(root, "diabetes")
    strict = TrainConfig(input=InputConfig(batch_size=32, seed=3), epochs=1,
                         steps_per_execution=1, min_margin=0.45)
    with pytest.raises(ModelQualityError, match="mean-predictor baseline.*rmse"):
        train(version_uri, f"{root}/models", "run-strict", strict)
    assert not (_run_dir(root, "diabetes", "run-strict") / "metrics.json").exists()


def test_a_class_outside_the_spec_fails_the_etl_and_publishes_nothing(root: str,
                                                                      tmp_path: Path) -> None:
    raw = yaml.safe_load((SPECS_DIR / "wine" / "spec.yaml").read_text())
    raw.update(name="wine_two")
    raw["label"]["classes"] = ["class_0", "class_1"]
    shutil.copy(SPECS_DIR / "wine" / "expectations.json", tmp_path / "expectations.json")
    suite = json.loads((tmp_path / "expectations.json").read_text())
    suite["expectations"] = [e for e in suite["expectations"]  # leave the check to the transform
                             if e["type"] != "expect_column_values_to_be_in_set"]
    (tmp_path / "expectations.json").write_text(json.dumps(suite))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ValidationFailed, match="'class_2'"):
        pipeline.run(str(tmp_path / "spec.yaml"), root, END)
    assert versions.list_versions(root, "wine_two") == []


@pytest.mark.parametrize("name, plots, shown", [
    ("wine", ["confusion_matrix.png"], ("accuracy", "macro_f1")),
    ("diabetes", ["predicted_vs_actual.png", "residuals.png"], ("rmse", "r2")),
])
def test_ui_model_page_shows_the_tasks_metrics_and_plots(root: str, runs: dict, name: str,
                                                          plots: list, shown: tuple) -> None:
    """The UI's model page renders a run of each task, with its plots and key metrics."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins"))
    from fastapi.testclient import TestClient
    from pipeline_ui import present
    from pipeline_ui.app import create_app

    version = versions.latest_version(root, name)
    html = TestClient(create_app(root)).get(f"/datasets/{name}/versions/{version}/models/run-1")
    assert html.status_code == 200
    for plot in plots:
        assert f"/models/run-1/files/plots/{plot}" in html.text
    keys = [k for k, _ in present.key_metrics(runs[name])]
    assert all(f"test.{m}" in keys for m in shown), keys


def test_classes_taken_from_a_version_hold_for_later_data(root: str, tmp_path: Path) -> None:
    """A spec without ``classes``: the first version fixes them; a new class later fails."""
    raw = yaml.safe_load((SPECS_DIR / "wine" / "spec.yaml").read_text())
    raw.update(name="wine_later")
    raw["label"].pop("classes")
    shutil.copy(SPECS_DIR / "wine" / "expectations.json", tmp_path / "expectations.json")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    frame = sklearn_frame(load_spec("wine"))
    raw_dir = Path(root.removeprefix("file://")) / "raw" / "wine_later"
    raw_dir.mkdir(parents=True)
    frame[frame["cultivar"] != "class_2"].to_csv(raw_dir / "early.csv", index=False)
    frame.to_csv(raw_dir / "full.csv", index=False)
    spec = str(tmp_path / "spec.yaml")
    first = pipeline.run(spec, root, END, source_uri="raw/wine_later/early.csv")
    names = versions.read_manifest(first["version_uri"])["schema"]["label"]["names"]
    assert names == ["class_0", "class_1"]
    with pytest.raises(ValidationFailed) as info:
        pipeline.run(spec, root, "2026-01-02", source_uri="raw/wine_later/full.csv")
    assert "'class_2'" in str(info.value) and first["version"] in str(info.value)
    assert versions.list_versions(root, "wine_later") == [first["version"]]
