"""Image checks for an image segment (``etl.kinds.images.window``): every file, in parallel.

Checking runs per Dask partition: every file is read, fully decoded by Pillow (a truncated
file fails in ``load()``, not in ``open()``), its size, channels and label compared with the
spec, then converted (mode, size) and re-encoded. A file that fails gets a reason instead of
an image.

``validate_dataset`` reads, decodes, checks and converts every file on Dask workers;
failures are written to ``quarantine/quarantine.jsonl`` (file, label, reason) and counted;
over ``quarantine.max_fraction`` of all files (or any, in strict mode) fails the run with
the files named. Nothing is dropped without a line there. The valid rows go on to
``etl.kinds.images.window.prepare_for_write``.
"""

from __future__ import annotations

import html
import io
import logging
import math
from dataclasses import dataclass
from typing import Any

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa

from etl import storage
from etl.errors import ValidationFailed
from etl.kinds.images.spec import KEY_COLUMN, ImageSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageOutcome:
    """The files that passed (a lazy Dask frame), and a JSON-able summary for the manifest."""

    valid: dd.DataFrame
    summary: dict

QUARANTINE_FILE = "quarantine.jsonl"
SHOWN_FILES = 20


def validate_dataset(ddf: dd.DataFrame, spec: ImageSpec, mode: str, *, results_uri: str,
                     quarantine_uri: str) -> ImageOutcome:
    """Check every file in parallel; quarantine or fail as the spec and mode say."""
    checked = ddf.map_partitions(check_files, spec, meta=empty_checked())
    checked = checked.persist()  # decoded once; the failures and the valid rows both read it
    bad = checked[checked["reason"].notnull()][[KEY_COLUMN, "uri", "reason"]].compute()
    total = int(checked.map_partitions(len).compute().sum())
    bad = bad.sort_values(KEY_COLUMN).reset_index(drop=True)
    reasons = {str(k): int(v) for k, v in
               bad["reason"].str.split(":").str[0].value_counts().sort_index().items()}
    limit = 0 if mode == "strict" else math.floor(spec.quarantine.max_fraction * total)
    summary = {"kind": "images", "mode": mode, "success": len(bad) <= limit,
               "evaluated_rows": total, "quarantined_rows": len(bad),
               "max_quarantined": limit, "reasons": reasons}
    _write_results(results_uri, summary, bad)
    if len(bad) > limit:
        shown = "; ".join(f"{r.uri}: {r.reason}" for r in bad.head(SHOWN_FILES).itertuples())
        raise ValidationFailed(
            f"{spec.name}: {len(bad)} of {total} image file(s) failed the checks, more than the "
            f"{limit} allowed ({mode} mode, quarantine.max_fraction "
            f"{spec.quarantine.max_fraction}): {shown}", summary)
    if len(bad):
        storage.write_bytes_atomic(storage.join(quarantine_uri, QUARANTINE_FILE), _jsonl(bad))
        log.warning("%s: quarantined %d of %d image files: %s", spec.name, len(bad), total,
                    reasons)
    valid = checked[checked["reason"].isnull()].drop(columns=["reason", "uri"])
    return ImageOutcome(valid=valid, summary=summary)


def _jsonl(frame: pd.DataFrame) -> bytes:
    return "".join(frame.to_json(orient="records", lines=True)).encode("utf-8")


def _write_results(results_uri: str, summary: dict[str, Any], bad: pd.DataFrame) -> None:
    """results.json plus a small HTML page, where tabular runs keep GX's JSON and Data Docs."""
    body = {"summary": summary, "failures": bad.head(1000).to_dict(orient="records")}
    storage.write_bytes_atomic(storage.join(results_uri, "results.json"), storage.json_bytes(body))
    rows = "".join(f"<tr><td>{html.escape(r.uri)}</td><td>{html.escape(r.reason)}</td></tr>"
                   for r in bad.head(1000).itertuples())
    page = (f"<!doctype html><meta charset=utf-8><title>Image validation</title>"
            f"<h1>Image validation: {'passed' if summary['success'] else 'FAILED'}</h1>"
            f"<p>{summary['evaluated_rows']} files checked, {summary['quarantined_rows']} "
            f"quarantined (at most {summary['max_quarantined']} allowed, {summary['mode']} mode)."
            f"</p><table><tr><th>file</th><th>reason</th></tr>{rows}</table>")
    storage.write_bytes_atomic(storage.join(results_uri, "index.html"), page.encode("utf-8"))


# Pillow mode -> channels; modes not listed are refused with the mode named.
MODE_CHANNELS = {"1": 1, "L": 1, "I": 1, "I;16": 1, "F": 1, "P": 3, "LA": 2, "RGB": 3,
                 "YCbCr": 3, "CMYK": 4, "RGBA": 4, "PA": 4}


# Typed (not object) columns so Dask's Parquet writer knows the Arrow schema without guessing.
CHECKED_META = {KEY_COLUMN: "string", "uri": "string", "label": "int64",
                "image": pd.ArrowDtype(pa.binary()), "height": "int64", "width": "int64",
                "channels": "int64", "reason": "string"}


def channels_of(mode: str) -> int | None:
    return MODE_CHANNELS.get(mode)


def check_image(data: bytes, label_text: str, spec: ImageSpec) -> tuple[dict[str, Any], str | None]:
    """Decode, check and convert one file: (output fields, reason or None)."""
    from PIL import Image, UnidentifiedImageError

    rules, classes = spec.rules, spec.classes
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()  # decodes every pixel: truncated or corrupt data fails here
            w, h, mode = img.width, img.height, img.mode
            channels = channels_of(mode)
            if channels is None:
                return {}, f"unsupported image mode {mode!r}"
            if not (rules.min_size[0] <= h <= rules.max_size[0]
                    and rules.min_size[1] <= w <= rules.max_size[1]):
                return {}, (f"size {h}x{w} (HxW) outside [{rules.min_size[0]}x{rules.min_size[1]}"
                            f", {rules.max_size[0]}x{rules.max_size[1]}]")
            if channels not in rules.channels:
                return {}, f"{channels} channel(s) (mode {mode}), expected {list(rules.channels)}"
            if label_text not in classes:
                return {}, f"label {label_text!r} is not one of the spec's classes"
            out = img.convert("L" if rules.channels_out == 1 else "RGB")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        return {}, f"cannot decode: {type(exc).__name__}: {exc}"
    if rules.resize and (out.height, out.width) != rules.resize:
        out = out.resize((rules.resize[1], rules.resize[0]), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    if rules.encoding == "png":
        out.save(buf, format="PNG", optimize=False)
    else:
        out.save(buf, format="JPEG", quality=rules.jpeg_quality)
    return {"image": buf.getvalue(), "height": out.height, "width": out.width,
            "channels": rules.channels_out, "label": classes.index(label_text)}, None


def check_files(part: pd.DataFrame, spec: ImageSpec) -> pd.DataFrame:
    """Read and check every file of one Dask partition of the listing (on a worker)."""
    rows = []
    for key, uri, label_text in zip(part[KEY_COLUMN], part["uri"], part["label_text"]):
        try:
            data = storage.read_bytes(uri)
        except OSError as exc:
            fields, reason = {}, f"cannot read: {exc}"
        else:
            fields, reason = check_image(data, label_text, spec)
        rows.append({KEY_COLUMN: key, "uri": uri, "label": fields.get("label", -1),
                     "image": fields.get("image", b""), "height": fields.get("height", 0),
                     "width": fields.get("width", 0), "channels": fields.get("channels", 0),
                     "reason": reason})
    return pd.DataFrame(rows, columns=list(CHECKED_META)).astype(CHECKED_META)


def empty_checked() -> pd.DataFrame:
    return pd.DataFrame({k: pd.Series(dtype=v) for k, v in CHECKED_META.items()})
