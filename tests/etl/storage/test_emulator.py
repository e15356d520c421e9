"""The shipped GCS emulator (etl.storage.emulator): preconditions on disk, kept across restarts.

The compose ``gcs-emulator`` service runs it with ``--data-dir`` on a volume, so what the
tests check in memory (tests/etl/storage/test_io.py) must hold on disk too, and a restart must keep
the bucket and its objects.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.gcs import GcsEmulator

pytestmark = pytest.mark.integration


def _upload(endpoint: str, bucket: str, name: str, data: bytes, if_generation: str) -> int:
    url = (f"{endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}"
           f"&ifGenerationMatch={if_generation}")
    req = urllib.request.Request(url, data=data, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def _read(endpoint: str, bucket: str, name: str) -> bytes:
    url = f"{endpoint}/storage/v1/b/{bucket}/o/{name}?alt=media"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read()


def test_on_disk_emulator_enforces_preconditions_and_survives_restart(tmp_path: Path) -> None:
    with GcsEmulator(buckets=("dev",), data_dir=tmp_path) as emu:
        assert _upload(emu.endpoint, "dev", "m.json", b"first", "0") == 200
        assert _upload(emu.endpoint, "dev", "m.json", b"second", "0") == 412
    assert (tmp_path / ".cloudstorage").is_dir()
    with GcsEmulator(buckets=("dev",), data_dir=tmp_path) as emu:
        assert _read(emu.endpoint, "dev", "m.json") == b"first"
        assert _upload(emu.endpoint, "dev", "m.json", b"third", "0") == 412
        listing = json.loads(urllib.request.urlopen(f"{emu.endpoint}/storage/v1/b", timeout=10)
                             .read())
        assert [b["name"] for b in listing["items"]] == ["dev"]
