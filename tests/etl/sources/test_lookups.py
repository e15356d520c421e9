"""etl.sources.lookups: lookup sources are read and joined by their columns' identifiers, whatever
their file headers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from etl.sources.lookups import join_lookups, read_lookups
from etl.sources.read import read_source_file
from etl.spec import load_spec


def test_lookup_sources_join_by_identifier(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    pd.DataFrame({"Order ID": [1, 2, 3], "Region Code": ["n", "s", "x"]}).to_csv(
        tmp_path / "raw" / "orders.csv", index=False)
    pd.DataFrame({"Region Code": ["n", "s"], "Region Name": ["North", "South"]}).to_json(
        tmp_path / "raw" / "regions.jsonl", orient="records", lines=True)
    spec = {
        "name": "orders", "primary": "orders", "key": ["order_id"],
        "sources": {
            "orders": {"uri": "raw/orders.csv", "format": "csv", "columns": {
                "order_id": {"type": "int64", "source": "Order ID"},
                "region": {"type": "string", "source": "Region Code"}}},
            "regions": {"uri": "raw/regions.jsonl", "format": "jsonl", "columns": {
                "region": {"type": "string", "source": "Region Code"},
                "region_name": {"type": "string", "source": "Region Name"}}}},
        "joins": [{"source": "regions", "keys": ["region"], "columns": ["region_name"]}],
        "label": {"name": "late", "source": "order_id", "op": "gt", "value": 1},
        "features": [{"name": "region_name", "kind": "categorical"}],
        "split": {"fractions": {"train": 1.0}}, "expectations": "expectations.json"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    loaded = load_spec(tmp_path / "spec.yaml")
    root = tmp_path.as_uri()
    orders = loaded.primary_source
    rights, dropped, _ = read_lookups(root, loaded)
    left = read_source_file(f"{root}/{orders.uri}", orders)
    joined = join_lookups(left, loaded, rights)
    assert list(joined.columns) == ["order_id", "region", "region_name"]
    assert joined["region_name"].tolist()[:2] == ["North", "South"]
    assert pd.isna(joined["region_name"].tolist()[2]) and dropped == {"regions": 0}
