"""bench.peer_envs: a peer that cannot install is recorded with the installer's own error."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import peer_envs


def test_a_peer_that_cannot_install_is_recorded_with_the_installers_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_uv = tmp_path / "uv"
    fake_uv.write_text("#!/bin/sh\necho 'error: no matching distribution for cp311' >&2\nexit 2\n")
    fake_uv.chmod(0o755)
    monkeypatch.setattr(peer_envs, "_uv", lambda: str(fake_uv))
    monkeypatch.setattr(peer_envs, "ENVS", tmp_path / "envs")
    got = peer_envs.run_peers(["ray_data"], tmp_path, [], tmp_path, 2, [])
    assert got["ray_data"]["absent"] == "install failed"
    assert "no matching distribution for cp311" in got["ray_data"]["error"]
    assert got["tfx_beam"]["absent"] == "not run (--peers)"
