"""etl.authoring.check: the repo's example specs pass etl spec check."""

from __future__ import annotations

from etl.authoring.check import check_spec


def test_repo_example_specs_pass_check() -> None:
    for name in ("flights", "digits", "wine", "diabetes"):
        report = check_spec(name)
        assert report.ok, report.problems
