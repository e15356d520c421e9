"""The image source: its files listed with their labels, and the scikit-learn digits landed.

Listing reads the folder tree (``<source>/<class>/<file>``) or a CSV/JSON index once, with
one ``find(detail=True)`` call, so the source fingerprint costs no extra request per file on
gs://. Each file is then checked (``etl.kinds.images.check``) by the window's build.
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import numpy as np
import pandas as pd

from etl import storage
from etl.errors import PipelineError
from etl.kinds.images.spec import KEY_COLUMN, ImageSpec, load_image_spec
from etl.kinds.landing import LandOptions, LandReport, land_files
from etl.versions.segment import json_digest

log = logging.getLogger(__name__)

DIGITS_LEVELS = 16  # sklearn digits hold 0..16; landed as 0..255


class ImageSourceError(PipelineError):
    """The image source or its label index is missing or malformed."""


def source_uri(root: str, spec: ImageSpec) -> str:
    """Absolute URI of the image folder (the spec's may be relative to the root)."""
    uri = spec.source.uri
    return uri.rstrip("/") if "://" in uri else storage.safe_join(root, uri)


def _find(uri: str, extensions: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Relative path -> listing details of every image file under ``uri``."""
    fs, path = storage.get_fs(uri)
    if not fs.exists(path):
        raise ImageSourceError(f"{uri}: image source folder not found")
    found = fs.find(path, detail=True)
    base = path.rstrip("/") + "/"
    return {full[len(base):]: info for full, info in sorted(found.items())
            if full.lower().endswith(extensions)}


def _index_labels(root: str, spec: ImageSpec) -> dict[str, str]:
    """Relative file path -> label from the spec's CSV/JSON index."""
    src = spec.source
    uri = src.index_uri if "://" in src.index_uri else storage.safe_join(root, src.index_uri)
    if not storage.exists(uri):
        raise ImageSourceError(f"{uri}: label index not found")
    data = storage.read_bytes(uri)
    if src.index_format == "csv":
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    else:
        try:
            frame = pd.DataFrame(json.loads(data))
        except (ValueError, TypeError) as exc:
            raise ImageSourceError(f"{uri}: expected a JSON list of objects: {exc}") from exc
    for col in (src.file_column, src.label_column):
        if col not in frame.columns:
            raise ImageSourceError(f"{uri}: column {col!r} missing; columns are "
                                   f"{list(frame.columns)}")
    dupes = frame[src.file_column][frame[src.file_column].duplicated()]
    if len(dupes):
        raise ImageSourceError(f"{uri}: file {dupes.iloc[0]!r} listed more than once")
    return dict(zip(frame[src.file_column].astype(str).str.lstrip("/"),
                    frame[src.label_column].astype(str)))


def list_images(root: str, spec: ImageSpec) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Every image file with its label text, and the source fingerprint.

    Folder layout: the label is the first folder under the source. Index layout: the label
    comes from the index; an indexed file that is absent is an error (named), an image that
    the index does not list gets the empty label and is quarantined, never dropped.
    """
    base = source_uri(root, spec)
    files = _find(base, spec.source.extensions)
    if spec.source.layout == "index":
        labels = _index_labels(root, spec)
        missing = sorted(set(labels) - set(files))
        if missing:
            raise ImageSourceError(f"{base}: {len(missing)} file(s) of the label index are "
                                   f"absent, e.g. {missing[:5]}")
        label_of = [labels.get(rel, "") for rel in files]
    else:
        label_of = [rel.split("/", 1)[0] if "/" in rel else "" for rel in files]
    frame = pd.DataFrame({KEY_COLUMN: list(files), "uri": [f"{base}/{r}" for r in files],
                          "label_text": label_of})
    entries = [{"uri": f"{base}/{rel}", "size": int(info.get("size") or 0),
                "mtime": str(info.get("mtime") or info.get("updated") or ""),
                "generation": str(info.get("generation") or "")} for rel, info in files.items()]
    return frame, {"sha256": json_digest(entries), "files": len(entries), "source": base}


def _png_gray(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buf, format="PNG")
    return buf.getvalue()


def land(root: str, dataset: str, options: LandOptions | None = None) -> LandReport:
    """Land an image dataset's upstream files; only the digits have one we can copy from.

    ``start``, ``end`` and ``scale`` shape time-partitioned tabular sources; an image dataset
    has no days to select or copy, so anything but their defaults is refused.
    """
    options = options or LandOptions()
    if options.start is not None or options.end is not None or options.scale != 1:
        raise ValueError(f"dataset {dataset!r}: --start, --end and --scale apply to "
                         f"time-partitioned tabular sources, not to image files")
    if dataset != "digits":
        raise ImageSourceError(f"dataset {dataset!r}: no upstream to land from; copy its image "
                               f"files under the spec's source uri instead")
    return land_digits(root, dataset, overwrite=options.overwrite)


def land_digits(root: str, dataset: str = "digits", *, overwrite: bool = False) -> LandReport:
    """Land scikit-learn's 1,797 digits as ``raw/digits/<label>/<index>.png`` (idempotent).

    Pixels 0..16 are scaled to 0..255 (8-bit grayscale).
    """
    from sklearn.datasets import load_digits

    spec = load_image_spec(dataset)
    base = source_uri(root, spec)
    digits = load_digits()
    pixels = np.rint(digits.images * (255.0 / DIGITS_LEVELS)).astype(np.uint8)
    report = LandReport(raw_uri=storage.join(root, "raw"), rows=len(pixels), unit="images")
    land_files([(f"{base}/{int(label)}/{i:04d}.png", _png_gray(img))
                for i, (img, label) in enumerate(zip(pixels, digits.target))], overwrite, report)
    log.info("landed %d digits under %s: %d written, %d unchanged", report.rows, base,
             len(report.written), len(report.unchanged))
    return report
