"""etl.storage.paths: a join never leaves the storage root, by name or through a link."""

from __future__ import annotations

from pathlib import Path

import pytest

from etl import storage
from etl.errors import PathOutsideRootError


@pytest.mark.parametrize(
    "part", ["..", "../x", "a/../../b", "/etc", "C:/x", "gs://other/x", "", ".", "a\\b", "a\x00"]
)
def test_safe_join_refuses_escapes(storage_root: str, part: str) -> None:
    with pytest.raises(PathOutsideRootError, match="not allowed"):
        storage.safe_join(storage_root, "datasets", part)


def test_safe_join_refuses_symlink_escape(file_root: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (Path(storage.get_fs(file_root)[1]) / "link").symlink_to(outside)
    with pytest.raises(PathOutsideRootError, match="resolves outside"):
        storage.safe_join(file_root, "link", "x")
    assert storage.safe_join(file_root, "a/b", "c") == f"{file_root}/a/b/c"
