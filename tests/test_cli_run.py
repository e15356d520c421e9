"""`python -m etl run` follows the spec's `incremental` setting; --incremental / --one-shot
override it (issue 14). Real runs through ``main(argv)``: one landed day of flights under a copy
of its spec that sets ``incremental: true``, and the wine table, whose spec does not."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pytest
import yaml

from etl import versions
from etl.__main__ import main
from etl.sources.land import land
from etl.spec import SPECS_DIR
from etl.versions import segments

END, START = "2013-01-02", "2013-01-01"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = tmp_path_factory.mktemp("cli-run").as_uri()
    land(uri, "flights", start=date(2013, 1, 1), end=date(2013, 1, 2))
    return uri


@pytest.fixture(scope="module")
def incremental_spec(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The flights spec with ``incremental: true``, as a path (the folder's files beside it)."""
    folder = tmp_path_factory.mktemp("specs") / "flights"
    shutil.copytree(SPECS_DIR / "flights", folder)
    raw = yaml.safe_load((folder / "spec.yaml").read_text())
    spec = yaml.safe_dump({**raw, "incremental": True}, sort_keys=False)  # split order kept
    (folder / "spec.yaml").write_text(spec)
    return str(folder / "spec.yaml")


@pytest.fixture(autouse=True)
def _shipped_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIPELINE_SPECS_PATH", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["run", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_incremental_spec_builds_segments_by_default_and_one_shot_on_request(
        root: str, incremental_spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = ["--root", root, "--dataset", incremental_spec]
    default = _run(capsys, *spec, "--interval-end", END, "--run-id", "default")
    manifest = versions.read_manifest(default["version_uri"])
    assert default["created"] and manifest.get("layout") == "segments", manifest.keys()
    assert len(segments.list_segments(root, "flights")) == 1  # the landed day, built once

    one_shot = _run(capsys, *spec, "--interval-end", END, "--interval-start", START,
                    "--run-id", "one-shot", "--one-shot", "--encoder", "python")
    manifest = versions.read_manifest(one_shot["version_uri"])
    assert one_shot["created"] and "layout" not in manifest, manifest.keys()
    assert set(one_shot["timings"]) >= {"extract_s", "validate_s", "transform_write_s"}
    assert one_shot["splits"] == default["splits"]  # the same day, the same rows per split
    assert len(segments.list_segments(root, "flights")) == 1  # --one-shot built none


def test_wine_runs_the_one_shot_steps_by_default(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    uri = tmp_path.as_uri()
    assert main(["land", "--root", uri, "--dataset", "wine"]) == 0
    capsys.readouterr()
    result = _run(capsys, "--root", uri, "--dataset", "wine", "--interval-end", "2026-01-01")
    assert result["created"] and "layout" not in versions.read_manifest(result["version_uri"])
    assert segments.list_segments(uri, "wine") == []


def test_incremental_and_one_shot_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--interval-end", END, "--incremental", "--one-shot"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "message"), [
    (["--dataset", "digits", "--incremental"],
     "--incremental: images specs cannot build segments; use the one-shot steps (--one-shot)"),
    (["--encoder", "python"], ("incremental runs write segments with the byte-deterministic "
                               "'vectorized' encoder only, got --encoder python (add --one-shot")),
    (["--dataset", "wine", "--encoder", "tfx", "--incremental"], "got --encoder tfx"),
])
def test_refusals_name_the_option_before_any_work(tmp_path: Path, incremental_spec: str,
                                                  args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--root", tmp_path.as_uri(), "--interval-end", END, "--dataset",
              incremental_spec, *args])
    assert message in str(exc.value.code)
    assert list(tmp_path.iterdir()) == []  # nothing read, nothing written


def test_the_shipped_flights_spec_builds_segments_and_wine_does_not() -> None:
    from etl.__main__ import _incremental, build_parser

    def segments(*args: str) -> bool:
        return _incremental(build_parser().parse_args(["run", "--interval-end", END, *args]))

    assert segments("--dataset", "flights") and not segments("--dataset", "flights", "--one-shot")
    assert not segments("--dataset", "wine") and segments("--dataset", "wine", "--incremental")


def test_build_then_publish_are_the_segment_chain_one_step_at_a_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``etl build`` is the DAG's build_segments task: it prints the draft's URI, publishes
    nothing, and ``etl publish`` of that URI makes the version."""
    uri = tmp_path.as_uri()
    land(uri, "flights", start=date(2013, 1, 1), end=date(2013, 1, 2))
    assert main(["build", "--root", uri, "--interval-end", END, "--run-id", "steps"]) == 0
    draft = capsys.readouterr().out.strip().splitlines()[-1]
    assert draft.startswith(f"{uri}/datasets/flights/")
    assert versions.list_versions(uri, "flights") == []  # built, not published
    assert main(["publish", "--written-uri", draft]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["created"] and result["version_uri"] == draft
    assert versions.list_versions(uri, "flights") == [result["version"]]
    assert versions.read_manifest(draft)["layout"] == "segments"
    assert set(result["timings"]) >= {"build_s", "validate_s", "compose_s"}
