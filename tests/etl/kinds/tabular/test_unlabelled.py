"""Raw rows with no label yet: read by the spec's reader, checked by its suite, the failing
rows quarantined with their reasons, the rest made into features as the ETL makes them."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from etl.__main__ import main
from etl.kinds.tabular.unlabelled import check_unlabelled
from etl.spec import load_spec


@pytest.fixture(scope="module")
def wine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wine")
    assert main(["land", "--root", root.as_uri(), "--dataset", "wine"]) == 0
    return root


def _unlabelled(wine: Path, tmp_path: Path, bad_alcohol: str | None = None) -> str:
    rows = pd.read_csv(wine / "raw" / "wine" / "wine.csv", dtype=str).head(12)
    rows = rows.drop(columns=["cultivar"])  # tomorrow's wines: no cultivar yet
    if bad_alcohol is not None:
        rows.loc[3, "alcohol"] = bad_alcohol
    path = tmp_path / "new.csv"
    rows.to_csv(path, index=False)
    return path.as_uri()


def test_rows_without_the_label_column_are_checked_and_featured(wine: Path, tmp_path) -> None:
    spec = load_spec("wine")
    found = check_unlabelled(wine.as_uri(), spec, [_unlabelled(wine, tmp_path)],
                             (tmp_path / "q").as_uri())
    assert found.rows == 12 and found.quarantined == 0 and found.quarantine_file is None
    assert list(found.features.columns) == [f.name for f in spec.features]
    assert str(found.features["alcohol"].dtype) == "float32"
    raw = pd.read_csv(wine / "raw" / "wine" / "wine.csv").head(12)
    assert found.keys["sample_id"].astype(int).tolist() == raw["sample_id"].tolist()
    assert found.features["alcohol"].tolist() == pytest.approx(raw["alcohol"].tolist(), rel=1e-6)


def test_a_row_failing_the_checks_is_quarantined_with_its_reason(wine: Path, tmp_path) -> None:
    spec = load_spec("wine")
    found = check_unlabelled(wine.as_uri(), spec, [_unlabelled(wine, tmp_path, "99.5")],
                             (tmp_path / "q").as_uri())
    assert found.rows == 12 and found.quarantined == 1 and len(found.features) == 11
    raw = pd.read_csv(wine / "raw" / "wine" / "wine.csv").head(12)
    assert found.keys["sample_id"].astype(int).tolist() == raw["sample_id"].drop(3).tolist()
    table = pq.read_table(io.BytesIO(Path(found.quarantine_file.removeprefix("file://"))
                                     .read_bytes())).to_pandas()
    assert table["alcohol"].tolist() == ["99.5"]
    reason = table.filter(like="reason").iloc[0, 0]
    assert "alcohol" in reason and "between" in reason, reason


def test_a_file_missing_a_feature_column_is_refused_by_name(wine: Path, tmp_path) -> None:
    rows = pd.read_csv(wine / "raw" / "wine" / "wine.csv", dtype=str).head(3)
    path = tmp_path / "short.csv"
    rows.drop(columns=["cultivar", "hue"]).to_csv(path, index=False)
    with pytest.raises(Exception, match="hue"):
        check_unlabelled(wine.as_uri(), load_spec("wine"), [path.as_uri()],
                         (tmp_path / "q").as_uri())
