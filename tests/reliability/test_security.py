"""No credentials in the repo; values that become paths cannot leave the storage root.

The compose file's localhost binds and environment-supplied admin password are checked in
tests/docker/test_compose.py (not repeated here).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from etl import pipeline, storage
from etl.errors import PathOutsideRootError
from etl.provenance import run_key

REPO = Path(__file__).resolve().parents[2]
SECRET_PATTERNS = {
    "private key": re.compile(r"-----BEGIN (?:RSA |EC |OPENSSH |ENCRYPTED )?PRIVATE KEY-----"),
    "GCP service-account key": re.compile(r'"private_key"\s*:\s*"-----BEGIN'),
    "Google API key": re.compile(r"AIza[0-9A-Za-z_-]{35}"),
    "OAuth access token": re.compile(r"ya29\.[0-9A-Za-z_-]{20,}"),
    "AWS access key": re.compile(r"AKIA[0-9A-Z]{16}"),
    "GitHub token": re.compile(r"gh[pousr]_[0-9A-Za-z]{36}"),
    "Slack token": re.compile(r"xox[baprs]-[0-9A-Za-z-]{10,}"),
}


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_no_credentials_in_tracked_files() -> None:
    hits = []
    for path in _tracked_files():
        if not path.is_file() or path.stat().st_size > 5_000_000:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        hits += [f"{path.relative_to(REPO)}: {what}" for what, rx in SECRET_PATTERNS.items()
                 if rx.search(text)]
    assert not hits, hits


def test_scanner_finds_a_planted_key() -> None:
    """The patterns are live: a key in the shape GCP issues them is caught."""
    # Assembled at run time so this file does not hold the very pattern the scan looks for.
    begin = "-----BEGIN " + "PRIVATE KEY-----"
    planted = '{"type": "service_account", "private_key": "' + begin + '\\nMII'
    assert SECRET_PATTERNS["GCP service-account key"].search(planted)
    assert SECRET_PATTERNS["private key"].search(planted.replace("\\n", "\n"))


@pytest.mark.parametrize("part", ["..", "../escape", "a/../../b", "/etc/passwd", "\\\\host\\x",
                                  "gs://other-bucket/x", "file:///etc", "C:/win", "a\x00b", ""])
def test_untrusted_path_parts_cannot_leave_the_root(part: str, tmp_path: Path) -> None:
    for root in (tmp_path.as_uri(), "gs://bucket/prefix"):
        with pytest.raises(PathOutsideRootError):
            storage.safe_join(root, "staging", part)


def test_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "raw").symlink_to(outside)
    with pytest.raises(PathOutsideRootError, match="resolves outside"):
        storage.safe_join(root.as_uri(), "raw", "x.csv")


@pytest.mark.parametrize("source_uri", ["../../etc/passwd", "/etc/passwd", "raw/../../x"])
def test_source_uri_param_is_validated_before_reading(source_uri: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="source_uri"):
        pipeline.build_version("flights", tmp_path.as_uri(), "2013-01-02", run_id="r",
                               options=pipeline.RunOptions(source_uri=source_uri))


def test_run_ids_become_safe_folder_names() -> None:
    for run_id in ("../../x", "/abs", "scheduled__2013-01-01T00:00:00+00:00", "..", ""):
        key = run_key(run_id)
        assert key and "/" not in key and key not in (".", "..")
