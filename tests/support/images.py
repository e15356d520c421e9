"""Small real images and an image spec for the image ETL tests (tests/etl/*/test_images.py)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

CLASSES = ["cat", "dog"]


def image(h: int, w: int, mode: str, fmt: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    shape = (h, w) if mode == "L" else (h, w, 3)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode=mode).save(buf, format=fmt)
    return buf.getvalue()


def pets_spec(tmp: Path, **over: object) -> Path:
    """An RGB JPEG spec with a label index, written beside the test's data."""
    doc = {"name": "pets", "kind": "images",
           "source": {"uri": "raw/pets", "layout": "index",
                      "index": {"uri": "raw/pets_index/labels.csv", "format": "csv"}},
           "label": {"name": "label", "classes": CLASSES},
           "image": {"min_size": [8, 8], "max_size": [32, 32], "channels": [3],
                     "resize": [16, 16], "channels_out": 3, "encoding": "jpeg"},
           "split": {"fractions": {"train": 0.5, "eval": 0.25, "test": 0.25}, "salt": "t"},
           "quarantine": {"max_fraction": 0.2},
           "shards": {"target_bytes": 4096}}
    doc.update(over)
    path = tmp / "spec" / "spec.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path
