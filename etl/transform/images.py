"""Image versions: the salted key-hash split and train statistics before the shard writer."""

from __future__ import annotations

from typing import Any

import dask.dataframe as dd
import pandas as pd

from etl.spec.images import KEY_COLUMN, ImageSpec
from etl.write.writer import HASH_COL, SPLIT_COL, assign_split, key_hash


def _split_rows(part: pd.DataFrame, spec: ImageSpec) -> pd.DataFrame:
    hashes = key_hash(part, (KEY_COLUMN,), spec.split.salt)
    return part.assign(**{HASH_COL: hashes, SPLIT_COL: assign_split(hashes, spec.split.fractions)})


def prepare_for_write(raw: dd.DataFrame, spec: ImageSpec,
                      previous_label: dict[str, Any] | None = None,
                      ) -> tuple[dd.DataFrame, dict[str, Any]]:
    """(frame for ``writer.write_splits``, statistics for the manifest); image classes always
    come from the spec, so ``previous_label`` is not needed."""
    del previous_label
    final = raw.map_partitions(_split_rows, spec, meta=_split_rows(raw._meta, spec))
    if spec.label_name != "label":
        final = final.rename(columns={"label": spec.label_name})
    small = final[[SPLIT_COL, spec.label_name, "height", "width"]].compute()
    counts = small[SPLIT_COL].value_counts()
    split_counts = {name: int(counts.get(name, 0)) for name, _ in spec.split.fractions}
    train = small[small[SPLIT_COL] == "train"]
    label_counts = {str(i): int((train[spec.label_name] == i).sum())
                    for i in range(len(spec.classes))}
    stats = {"computed_on": "train", "numeric": {}, "vocabularies": {},
             "label_counts": label_counts, "split_counts": split_counts,
             "images": {"height": [int(small["height"].min()), int(small["height"].max())]
                        if len(small) else None,
                        "width": [int(small["width"].min()), int(small["width"].max())]
                        if len(small) else None}}
    return final, stats
