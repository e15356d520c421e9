"""etl.storage.listing: removing temp files and clearing a folder spare what is not theirs."""

from __future__ import annotations

import os
from pathlib import Path

from etl import storage


def test_remove_temp_files_only_touches_temps(file_root: str) -> None:
    d = Path(storage.get_fs(file_root)[1])
    (d / f".x.bin{storage.TEMP_MARKER}abc").write_bytes(b"partial")
    (d / "x.bin").write_bytes(b"whole")
    assert storage.list_dir(file_root) == ["x.bin"]
    assert storage.remove_temp_files(file_root, older_than_s=3600) == []
    assert storage.remove_temp_files(file_root) == [f".x.bin{storage.TEMP_MARKER}abc"]
    assert sorted(os.listdir(d)) == ["x.bin"]


def test_clear_dir_spares_the_lease_and_a_run_creating_it_right_now(file_root: str) -> None:
    """A lease holder clears a killed attempt's files; another run's half-made lease temp
    (write, then link) must survive, or that run's create fails instead of losing cleanly.
    CI caught this once in test_concurrent_runs_publish_one_version."""
    from etl.storage.listing import clear_dir

    d = Path(storage.get_fs(file_root)[1])
    for name in ("_WRITER", f"._WRITER{storage.TEMP_MARKER}abc", "part-0.tfrecord",
                 f".part-1.tfrecord{storage.TEMP_MARKER}def", "sub/x"):
        (d / name).parent.mkdir(exist_ok=True)
        (d / name).write_bytes(b"x")
    clear_dir(file_root, keep="_WRITER")
    assert sorted(os.listdir(d)) == [f"._WRITER{storage.TEMP_MARKER}abc", "_WRITER"]
    assert storage.create_if_absent(storage.join(file_root, "_WRITER"), b"y") is False
