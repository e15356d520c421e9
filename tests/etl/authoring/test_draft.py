"""etl.authoring.draft: a key is drafted only when it is unique on every row."""

from __future__ import annotations

import pandas as pd

from etl.authoring import DraftOptions, draft_spec


def test_a_key_is_drafted_only_when_unique_on_every_row(tmp_path) -> None:
    """Unique on the first 1,000 rows, repeated once at the very end: no key."""
    path = tmp_path / "k.csv"
    ids = list(range(1500)) + [7]
    pd.DataFrame({"order_id": ids, "v": [i % 5 for i in ids], "y": [i % 2 for i in ids]}
                 ).to_csv(path, index=False)
    draft = draft_spec(DraftOptions(name="k", source=str(path), root="file:///", label="y"))
    assert not draft.unique_key and draft.spec["split"]["by"] == "row"
    path.write_text(path.read_text().rsplit("\n", 2)[0] + "\n")  # the repeat removed
    draft = draft_spec(DraftOptions(name="k", source=str(path), root="file:///", label="y"))
    assert draft.unique_key and draft.spec["key"] == ["order_id"]
