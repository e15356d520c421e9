"""Counting the objects a run writes (issue 25's objects_per_nightly_run): strace lines and
listings, no run needed."""

from __future__ import annotations

from pathlib import Path

from bench import objects

ROOT = Path("/data/root")
TRACE = [
    'openat(AT_FDCWD, "/data/root/ds/v/.manifest.json.tmp-1", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0666) = 5',
    'openat(AT_FDCWD, "/data/root/ds/v/shard-0", O_RDONLY|O_CLOEXEC) = 6',  # a read
    'openat(AT_FDCWD, "/data/root/ds/v/_WRITER", O_RDWR|O_CREAT|O_TRUNC, 0644) = 7',
    'openat(AT_FDCWD, "/data/root/ds/v/_WRITER", O_RDWR|O_CREAT|O_TRUNC, 0644) = 7',  # refresh
    'openat(AT_FDCWD, "/tmp/elsewhere", O_WRONLY|O_CREAT, 0644) = 8',  # not under the root
    'openat(AT_FDCWD, "/data/root/ds/missing", O_WRONLY|O_CREAT, 0644) = -1 ENOENT (No such)',
    'creat("/data/root/ds/old-style", 0644) = 9',
    '+++ exited with 0 +++',
]


def test_each_open_for_writing_under_the_root_is_one_object() -> None:
    assert objects.creations(TRACE, ROOT) == [
        "ds/v/.manifest.json.tmp-1", "ds/v/_WRITER", "ds/v/_WRITER", "ds/old-style"]


def test_listing_diff_names_new_changed_and_removed(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("1")
    (tmp_path / "b").write_text("1")
    before = objects.listing(tmp_path)
    (tmp_path / "a").write_text("22")
    (tmp_path / "b").unlink()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c").write_text("3")
    assert objects.diff(before, objects.listing(tmp_path)) == {
        "new": ["sub/c"], "changed": ["a"], "removed": ["b"]}
