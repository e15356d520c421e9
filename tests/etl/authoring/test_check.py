"""etl.authoring.check: the repo's example specs pass etl spec check."""

from __future__ import annotations

from etl.authoring.check import check_spec


def test_repo_example_specs_pass_check() -> None:
    for name in ("flights", "digits", "wine", "diabetes"):
        report = check_spec(name)
        assert report.ok, report.problems


def test_a_positive_class_the_suite_forbids_is_named(tmp_path, monkeypatch) -> None:
    import yaml

    from etl.__main__ import main

    monkeypatch.delenv("PIPELINE_SPECS_PATH", raising=False)
    csv = tmp_path / "t.csv"
    csv.write_text("id,x,churn\n" + "".join(f"{i},{i % 7},{'yes' if i % 3 else 'no'}\n"
                                           for i in range(60)))
    assert main(["spec", "init", "--name", "t", "--source", str(csv), "--label", "churn",
                 "--out", str(tmp_path / "t")]) == 0
    spec = tmp_path / "t" / "spec.yaml"
    assert check_spec(str(spec)).ok, check_spec(str(spec)).problems
    for positive, ok in (("Yes", False), (True, True), (["no", "maybe"], False)):
        doc = yaml.safe_load(spec.read_text())
        doc["label"]["positive"] = positive
        spec.write_text(yaml.safe_dump(doc))
        report = check_spec(str(spec))
        assert report.ok == ok, (positive, report.problems)
        if not ok:
            assert "label.positive" in report.problems[0] and "['no', 'yes']" in \
                report.problems[0], report.problems
