"""etl.moments: the moments of a whole frame are each column's moments."""

from __future__ import annotations

import pytest


def test_moments_of_a_whole_frame_match_column_by_column() -> None:
    import numpy as np
    import pandas as pd

    from etl import moments

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(5, 2, 1000), "big": rng.normal(1e6, 1, 1000),
                          "none": np.nan})
    frame.loc[::7, "a"] = np.nan
    together = moments.of_frame(frame)
    for col in frame:
        alone = moments.of(frame[col])
        assert together[col].keys() == alone.keys()
        for key, value in alone.items():
            if value is None:
                assert together[col][key] is None
            else:
                assert together[col][key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
