"""`python -m etl run|build|publish`: the one chain from the command line, for every kind.

Real runs through ``main(argv)``: a landed day of flights, the wine table, a spec that still
sets the retired ``incremental`` key, and the removed flags refused by argparse.
"""

from __future__ import annotations

import json
import logging
import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml

from etl import versions
from etl.__main__ import main
from etl.kinds.landing import LandOptions
from etl.kinds.tabular.land import land
from etl.spec import SPECS_DIR
from etl.versions import segment

END, START = "2013-01-02", "2013-01-01"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = tmp_path_factory.mktemp("cli-run").as_uri()
    land(uri, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 2)))
    return uri


@pytest.fixture(autouse=True)
def _shipped_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPELINE_SPECS_PATH", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_run_builds_segments_and_a_rerun_publishes_nothing_new(
        root: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = ["--root", root, "--dataset", "flights", "--interval-end", END]
    first = _run(capsys, *spec, "--run-id", "first")
    manifest = versions.read_manifest(first["version_uri"])
    assert first["created"] and manifest.layout == "segments"
    assert len(segment.list_segments(root, "flights")) == 1  # the landed day, built once
    assert set(first["timings"]) >= {"build_s", "validate_s"}
    again = _run(capsys, *spec, "--run-id", "again")
    assert not again["created"] and again["version"] == first["version"]
    forced = _run(capsys, *spec, "--run-id", "forced", "--force")
    assert forced["created"] and forced["version"].endswith("-r2")
    assert forced["splits"] == first["splits"]
    assert len(segment.list_segments(root, "flights")) == 1  # reused, not rebuilt


def test_wine_goes_through_the_same_chain(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    uri = tmp_path.as_uri()
    assert main(["land", "--root", uri, "--dataset", "wine"]) == 0
    capsys.readouterr()
    result = _run(capsys, "--root", uri, "--dataset", "wine", "--interval-end", "2026-01-01")
    assert result["created"]
    assert versions.read_manifest(result["version_uri"]).layout == "segments"
    (seg,) = segment.list_segments(uri, "wine")
    assert seg.startswith("all-")  # an unpartitioned table is one segment


def test_a_spec_setting_incremental_still_loads_with_a_deprecation_line(
        root: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "flights"
    shutil.copytree(SPECS_DIR / "flights", folder)
    raw = yaml.safe_load((folder / "spec.yaml").read_text())
    (folder / "spec.yaml").write_text(yaml.safe_dump({**raw, "incremental": False},
                                                     sort_keys=False))
    with caplog.at_level(logging.WARNING, logger="etl.spec"):
        result = _run(capsys, "--root", root, "--dataset", str(folder / "spec.yaml"),
                      "--interval-end", END, "--run-id", "old-spec")
    assert result["version"] == "20130102T000000Z_all"
    said = [r.getMessage() for r in caplog.records if "incremental" in r.getMessage()]
    assert said == [(f"{folder / 'spec.yaml'}.incremental is deprecated and ignored: every "
                     "version is built from segments (remove the key)")]


@pytest.mark.parametrize("flag", ["--one-shot", "--incremental", "--encoder"])
def test_the_retired_flags_are_refused_before_any_work(
        tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--root", tmp_path.as_uri(), "--interval-end", END, flag])
    assert exc.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing read, nothing written


def test_build_then_publish_are_the_chain_one_step_at_a_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``etl build`` is the DAG's build task: it prints the draft's URI, publishes nothing,
    and ``etl publish`` of that URI makes the version."""
    uri = tmp_path.as_uri()
    land(uri, "flights", LandOptions(start=date(2013, 1, 1), end=date(2013, 1, 2)))
    assert main(["build", "--root", uri, "--interval-end", END, "--interval-start", START,
                 "--run-id", "steps"]) == 0
    draft = capsys.readouterr().out.strip().splitlines()[-1]
    assert draft.startswith(f"{uri}/datasets/flights/")
    assert versions.list_versions(uri, "flights") == []  # built, not published
    assert main(["publish", "--written-uri", draft]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["created"] and result["version_uri"] == draft
    assert versions.list_versions(uri, "flights") == [result["version"]]
    assert versions.read_manifest(draft).layout == "segments"
    assert set(result["timings"]) >= {"build_s", "validate_s"}
