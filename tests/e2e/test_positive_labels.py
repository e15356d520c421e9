"""Labels as users' tables hold them, end to end (draft, run, train, serve).

A binary label from any two-valued column: ``etl spec init`` drafts its positive class by the
stated rule (a value spelling yes / true / y / 1, else the minority class), ``etl run``
publishes it as 1/0, ``training train`` fits it, and the served SavedModel's output is the
probability of that positive class, not of whichever value sorts last. A multiclass label
whose rare class lands only in the test split is a class, published and trained on."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from etl import versions
from etl.__main__ import main

pytestmark = pytest.mark.e2e

N = 240
# (positive, negative) spellings; the positive value is the majority (60%), so the spelling
# rule, not the minority fallback, must be what picks it.
LABELS = [("yes", "no"), ("Yes", "No"), ("TRUE", "FALSE"), ("Y", "N"), (1, 2)]


def _frame(positive: str | int, negative: str | int) -> pd.DataFrame:
    """``outcome`` is positive where ``x`` (plus a little noise) is above its 40th percentile."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 10, N).round(3)
    hit = x + rng.normal(0, 0.5, N) > 4.0
    return pd.DataFrame({"id": np.arange(1, N + 1), "x": x,
                         "colour": rng.choice(["red", "blue"], N),
                         "outcome": np.where(hit, positive, negative)})


def _etl(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, (out.getvalue() + err.getvalue())[-3000:]
    return out.getvalue()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("positive, negative", LABELS, ids=[str(p) for p, _ in LABELS])
def test_a_two_valued_label_serves_the_probability_of_its_positive_class(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, positive, negative) -> None:
    import tensorflow as tf

    from training.config import InputConfig, ModelConfig, TrainConfig
    from training.data.tabular import local_or_remote_path
    from training.run.train import train

    monkeypatch.delenv("PIPELINE_SPECS_PATH", raising=False)
    root = tmp_path / "data"
    csv = root / "raw" / "t" / "t.csv"
    csv.parent.mkdir(parents=True)
    df = _frame(positive, negative)
    df.to_csv(csv, index=False)
    task = ["--task", "binary"] if positive == "Y" else []  # the rest: inferred from 2 values
    said = _etl("spec", "init", "--name", "t", "--source", "raw/t/t.csv", "--root",
                root.as_uri(), "--label", "outcome", *task, "--out", str(tmp_path / "t"))
    assert "positive class" in said and "yes / true / y / 1" in said, said
    if not task:
        assert "task: binary, since 'outcome' holds two values" in said, said
    spec_file = tmp_path / "t" / "spec.yaml"
    label = yaml.safe_load(spec_file.read_text())["label"]
    assert label["positive"] == positive and label["task"] == "binary", label

    result = json.loads(_etl("run", "--json", "--root", root.as_uri(), "--dataset",
                             str(spec_file), "--interval-end", "2026-01-01"))
    manifest = versions.read_manifest(result["version_uri"])
    assert manifest.schema.label.positive == (positive,)
    counts = manifest.statistics.label_counts
    share = counts["1"] / (counts["0"] + counts["1"])
    assert 0.5 < share < 0.7, counts  # class 1 is the positive value (60% of rows)

    config = TrainConfig(input=InputConfig(batch_size=32, shuffle_buffer=256, seed=1),
                         epochs=6, steps_per_execution=1, min_margin=0.0,
                         min_eval_examples=10, model=ModelConfig(family="mlp"))
    trained = train(result["version_uri"], f"{root.as_uri()}/models", "run-1", config)
    model_dir = Path(local_or_remote_path(trained.model_uri))
    described = json.loads((model_dir / "label.json").read_text())
    assert described["names"] == [f"not {positive}", str(positive)]
    assert repr(str(positive)) in described["output"]
    assert f"positive class `{positive}`" in (model_dir / "model_card.md").read_text()

    loaded = tf.saved_model.load(str(model_dir / "saved_model"))
    served = loaded.serve({"x": tf.constant(df["x"].to_numpy(), dtype="float32"),
                           "colour": tf.constant(df["colour"].to_numpy(), dtype="string")})
    prob = served.numpy()[:, 0]
    is_positive = (df["outcome"] == positive).to_numpy()
    assert prob[is_positive].mean() > prob[~is_positive].mean() + 0.2, (
        prob[is_positive].mean(), prob[~is_positive].mean())


@pytest.mark.timeout(600)
def test_a_class_seen_only_in_test_is_published_and_trained(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    from etl.kinds.tabular import prepare
    from etl.spec import load_spec
    from training.config import InputConfig, ModelConfig, TrainConfig
    from training.run.train import train

    monkeypatch.delenv("PIPELINE_SPECS_PATH", raising=False)
    root = tmp_path / "data"
    csv = root / "raw" / "r" / "r.csv"
    csv.parent.mkdir(parents=True)
    df = _frame("a", "b").rename(columns={"outcome": "kind"})
    df.loc[7, "kind"] = "z"  # one row of a third class
    df.to_csv(csv, index=False)
    _etl("spec", "init", "--name", "r", "--source", "raw/r/r.csv", "--root", root.as_uri(),
         "--label", "kind", "--task", "multiclass", "--out", str(tmp_path / "r"))
    spec_file = tmp_path / "r" / "spec.yaml"
    doc = yaml.safe_load(spec_file.read_text())
    rows = pd.read_csv(csv, dtype=str)
    for salt in range(200):  # a salt that puts the 'z' row in test (the split is a hash)
        doc["split"]["salt"] = f"s{salt}"
        spec_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        split = prepare.prepare_rows(rows, load_spec(spec_file))["_split"]
        if split[df["kind"] == "z"].tolist() == ["test"]:
            break
    else:
        pytest.fail("no salt of 200 puts the one 'z' row in test")

    result = json.loads(_etl("run", "--json", "--root", root.as_uri(), "--dataset",
                             str(spec_file), "--interval-end", "2026-01-01"))
    manifest = versions.read_manifest(result["version_uri"])
    assert manifest.schema.label.names == ("a", "b", "z")
    assert manifest.statistics.label_counts["2"] == 0  # not in train
    config = TrainConfig(input=InputConfig(batch_size=32, shuffle_buffer=256, seed=1),
                         epochs=3, steps_per_execution=1, min_margin=0.0,
                         min_eval_examples=10, model=ModelConfig(family="mlp"))
    trained = train(result["version_uri"], f"{root.as_uri()}/models", "run-1", config)
    assert trained.metrics.to_json()["classes"] == ["a", "b", "z"], trained
