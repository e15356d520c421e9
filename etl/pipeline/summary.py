"""One line per step saying what it did: inputs, rows, outcome, time, where the output is.

These lines are what an operator reads in a task log or on the command line; everything the
libraries say stays at WARNING (etl/logs.py). Each function takes what its step already holds,
so summarising costs no extra pass over the data.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from etl import storage
from etl.versions.manifest import Manifest

if TYPE_CHECKING:
    from etl.pipeline.record import RunRecord

log = logging.getLogger("etl.pipeline")


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / 1e6:,.1f} MB"


def already_published(step: str, run: RunRecord, version: str) -> None:
    """A step with nothing to do because the interval's version exists; says why and how."""
    uri = storage.join(run.root, "datasets", run.dataset, version)
    log.info("%s %s: version %s is already published (%s); nothing to do, set force_republish "
             "to write a new revision", step, run.dataset, version, uri)


def validated(dataset: str, summary: dict[str, Any], seconds: float, uri: str) -> None:
    """validate: rows, expectations evaluated and failed, rows quarantined, mode, time, URI."""
    expectations = summary.get("expectations")
    if expectations is not None:
        failed = sum(1 for e in expectations if not e.get("success"))
        checks = f"{len(expectations)} expectations, {failed} failed"
    else:  # images: every file decoded and checked against the spec
        checks = f"image checks, at most {_n(summary.get('max_quarantined'))} quarantined allowed"
    log.info("validate %s: %s rows, %s, %s quarantined (%s mode), %.1f s -> %s", dataset,
             _n(summary.get("evaluated_rows")), checks, _n(summary.get("quarantined_rows", 0)),
             summary.get("mode"), seconds, uri)


def _split_counts(manifest: Manifest) -> str:
    return ", ".join(f"{name} {_n(info.num_examples)}" for name, info in manifest.splits.items())


def written(dataset: str, manifest: Manifest, seconds: float, uri: str) -> None:
    """build: examples per split, shards, bytes, time, the (unpublished) version."""
    log.info("write %s: %s examples (%s) in %d shard(s), %s, %.1f s -> %s (visible once "
             "published)", dataset, _n(manifest.num_examples), _split_counts(manifest),
             manifest.num_shards, _mb(manifest.num_bytes), seconds, uri)


def published(dataset: str, manifest: Manifest, created: bool, uri: str) -> None:
    """publish: whether a new version became visible, its size and URI."""
    if created:
        log.info("publish %s: published version %s, %s examples (%s) -> %s", dataset,
                 manifest.version, _n(manifest.num_examples), _split_counts(manifest), uri)
    else:
        log.info("publish %s: version %s was already published; nothing new (set "
                 "force_republish to write a new revision) -> %s", dataset, manifest.version,
                 uri)
