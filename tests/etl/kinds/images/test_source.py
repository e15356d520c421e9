"""etl.kinds.images.source: the folder layout labels each image by its class folder."""

from __future__ import annotations

from pathlib import Path

from etl.kinds.images.source import list_images
from etl.kinds.images.spec import load_image_spec
from tests.support.images import image


def test_folder_layout_labels_from_class_folders(tmp_path: Path) -> None:
    for label in ("0", "7"):
        (tmp_path / "raw" / "digits" / label).mkdir(parents=True)
        (tmp_path / "raw" / "digits" / label / "a.png").write_bytes(image(8, 8, "L", "PNG", 1))
    (tmp_path / "raw" / "digits" / "stray.png").write_bytes(image(8, 8, "L", "PNG", 1))
    (tmp_path / "raw" / "digits" / "notes.txt").write_text("ignored: not an image extension")
    frame, fingerprint = list_images(tmp_path.as_uri(), load_image_spec("digits"))
    assert list(frame["key"]) == ["0/a.png", "7/a.png", "stray.png"]
    assert list(frame["label_text"]) == ["0", "7", ""]  # no class folder: quarantined later
    assert fingerprint["files"] == 3 and len(fingerprint["sha256"]) == 64
