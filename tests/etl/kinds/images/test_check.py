"""etl.kinds.images.check: an image decoded, checked against the spec and converted, or the problem
named."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from etl.kinds.images.check import check_image
from etl.kinds.images.spec import load_image_spec
from tests.support.images import image, pets_spec


def test_check_image_decodes_converts_and_names_the_problem(tmp_path: Path) -> None:
    spec = load_image_spec(pets_spec(tmp_path))
    fields, reason = check_image(image(10, 20, "RGB", "JPEG", 1), "dog", spec)
    assert reason is None and fields["label"] == 1
    out = Image.open(io.BytesIO(fields["image"]))
    assert (out.format, out.mode, out.size) == ("JPEG", "RGB", (16, 16))
    assert (fields["height"], fields["width"], fields["channels"]) == (16, 16, 3)
    truncated = image(20, 20, "RGB", "PNG", 2)[:-40]
    assert check_image(truncated, "dog", spec)[1].startswith("cannot decode")
    assert check_image(b"not an image", "dog", spec)[1].startswith("cannot decode")
    assert "size 40x20" in check_image(image(40, 20, "RGB", "PNG", 3), "dog", spec)[1]
    assert "1 channel(s)" in check_image(image(10, 10, "L", "PNG", 4), "dog", spec)[1]
    assert "label 'cow'" in check_image(image(10, 10, "RGB", "PNG", 5), "cow", spec)[1]
