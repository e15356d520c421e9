"""etl.kinds.images.spec: a bad image spec fails naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from etl.kinds.images.spec import load_image_spec
from etl.spec import SpecError
from tests.support.images import pets_spec


def test_bad_specs_fail_with_the_field_named(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"image: min_size \[8, 8\] exceeds max_size"):
        load_image_spec(pets_spec(tmp_path, image={"min_size": [8, 8], "max_size": [4, 4]}))
    with pytest.raises(SpecError, match=r"source.index: required with layout 'index'"):
        load_image_spec(pets_spec(tmp_path, source={"uri": "raw/pets", "layout": "index"}))
    with pytest.raises(SpecError, match=r"label.classes"):
        load_image_spec(pets_spec(tmp_path, label={"name": "label", "classes": ["a", "a"]}))
