"""``python -m training``: documented, fast to start, and wired to the same functions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import training_fixtures as fx
from training.__main__ import build_parser, main, models_root, train_config
from training.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "training", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)


def test_help_documents_every_command_without_importing_tensorflow() -> None:
    top = _cli("--help")
    assert top.returncode == 0 and "train" in top.stdout and "bench-input" in top.stdout
    train_help = _cli("train", "--help").stdout
    for flag in ("--version-uri", "--root", "--dataset", "--version", "--epochs", "--staging-dir",
                 "--cache", "--min-margin", "--precision", "--jit-compile", "--steps-per-execution",
                 "--family", "--max-rounds", "--folds", "--repeats", "--step-budget"):
        assert flag in train_help, flag
    assert "--batches" in _cli("bench-input", "--help").stdout
    score_help = _cli("score", "--help").stdout
    for flag in ("--root", "--dataset", "--version", "--raw", "--spec", "--batch-size"):
        assert flag in score_help, flag
    code = "import sys, training.__main__ as m; m.build_parser(); print('tensorflow' in sys.modules)"
    probe = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                           timeout=60, check=True)
    assert probe.stdout.strip() == "False"


def test_the_budget_flags_reach_the_runs_settings_and_their_defaults_leave_the_spec(
        capsys) -> None:
    parse = build_parser().parse_args
    small = train_config(parse(["train", "--family", "trees", "--max-rounds", "40", "--folds",
                                "off", "--repeats", "1", "--epochs", "3", "--step-budget", "9"]))
    assert (small.model.family, small.model.max_rounds, small.folds, small.repeats,
            small.epochs, small.step_budget) == ("trees", 40, 0, 1, 3, 9)
    assert train_config(parse(["train", "--folds", "3"])).folds == 3
    # no flag: every default, so the spec's training: keys apply (spec_overrides)
    assert train_config(parse(["train"])) == TrainConfig()
    with pytest.raises(SystemExit):
        parse(["train", "--folds", "1"])
    assert "expected 0 or off (no k-fold) or 2 or more, got 1" in capsys.readouterr().err


def test_score_refuses_bad_arguments_in_one_line(tmp_path: Path) -> None:
    bad = _cli("score", "--root", tmp_path.as_uri(), "--batch-size", "0")
    assert bad.returncode != 0 and "--batch-size 0: expected a positive number of rows" in bad.stderr
    missing = _cli("score", "--root", tmp_path.as_uri(), "--dataset", "flights", "--raw",
                   str(tmp_path / "nope.csv"))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("error:"), missing.stderr


def test_models_root_follows_the_storage_layout() -> None:
    args = build_parser().parse_args(["train", "--version-uri", "gs://b/p/datasets/flights/v1"])
    assert models_root(args, args.version_uri) == "gs://b/p/models"
    with pytest.raises(SystemExit, match="--models-root"):
        models_root(args, "gs://b/elsewhere/v1")


def test_train_resolves_latest_and_bench_input_reports_all_figures(tmp_path: Path, capsys) -> None:
    v = fx.write_version(tmp_path, n=2000, seed=4)
    common = ["--root", tmp_path.as_uri(), "--dataset", "flights", "--batch-size", "128"]
    main(["train", *common, "--epochs", "1", "--min-margin", "0", "--run", "cli-run",
          "--steps-per-execution", "2", "--data-seed", "3"])
    out = capsys.readouterr().out
    run = tmp_path / "models" / "flights" / fx.VERSION / "cli-run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert f"test auc       {metrics['test']['auc']:.4f}" in out
    assert metrics["hyperparameters"]["input"]["batch_size"] == 128
    # a finished run is returned as stored; one from before tasks were recorded still prints
    del metrics["task"], metrics["test"]["loss"]
    (run / "metrics.json").write_text(json.dumps(metrics))
    main(["train", *common, "--run", "cli-run"])
    again = capsys.readouterr().out
    assert f"test accuracy  {metrics['test']['accuracy']:.4f}" in again and "test loss" not in again

    result_file = tmp_path / "bench.json"
    main(["bench-input", "--version-uri", v.uri, "--batch-size", "128", "--batches", "12",
          "--warmup-batches", "2", "--naive-batches", "4", "--stall-batches", "8", "--repeats", "2",
          "--json", str(result_file)])
    table = capsys.readouterr().out
    result = json.loads(result_file.read_text())
    for key in ("input_ceiling_examples_per_s", "input_examples_per_s",
                "input_parse_ceiling_examples_per_s",
                "input_naive_examples_per_s", "stall_ratio", "step_ms_pipeline", "step_ms_cached"):
        assert result[key] > 0, key
    assert result["ratio_to_ceiling"] == pytest.approx(
        result["input_examples_per_s"] / result["input_ceiling_examples_per_s"])
    assert result["ratio_to_parse_ceiling"] == pytest.approx(
        result["input_examples_per_s"] / result["input_parse_ceiling_examples_per_s"])
    assert "raw read (ceiling)" in table and "parse ceiling" in table and "stall ratio" in table
    assert result["input_naive_examples_per_s"] == max(result["samples_examples_per_s"]["naive"])
    assert all(len(rates) == 2 for rates in result["samples_examples_per_s"].values())


def test_bench_input_on_fewer_cores_pins_itself_and_refuses_more_than_it_has(tmp_path: Path) -> None:
    """``--cores k`` (the per-core-count stall ratio) runs pinned to k CPUs; TensorFlow and
    tf.data size themselves by those, and the figures say how many there were."""
    v = fx.write_version(tmp_path, n=600, seed=5)
    out = tmp_path / "one-core.json"
    run = _cli("bench-input", "--version-uri", v.uri, "--cores", "1", "--batch-size", "64",
               "--batches", "4", "--warmup-batches", "1", "--naive-batches", "2",
               "--stall-batches", "4", "--repeats", "1", "--json", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["cores"] == 1 and result["stall_ratio"] > 0
    assert ", 1 cores]" in run.stdout
    refused = _cli("bench-input", "--version-uri", v.uri, "--cores", "0")
    assert refused.returncode != 0
    assert "--cores 0: expected 1 to " in refused.stderr
