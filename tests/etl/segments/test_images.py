"""Image ETL on small real image sets: JPEG, RGB, CSV/JSON label index, corrupt files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from distributed import Client, LocalCluster
from PIL import Image

from etl import pipeline, versions
from etl.errors import ValidationFailed
from etl.sources.images import list_images
from etl.spec import SpecError
from etl.spec.images import load_image_spec
from etl.validation.images import check_image

END = "2024-01-01T00:00:00Z"
CLASSES = ["cat", "dog"]


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _image(h: int, w: int, mode: str, fmt: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    shape = (h, w) if mode == "L" else (h, w, 3)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode=mode).save(buf, format=fmt)
    return buf.getvalue()


def _spec(tmp: Path, **over: object) -> Path:
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


def _land_pets(root: Path, n: int = 16) -> list[dict[str, str]]:
    """n RGB JPEGs of varying sizes, one truncated, one grayscale (wrong channels)."""
    folder = root / "raw" / "pets"
    folder.mkdir(parents=True)
    rows = []
    for i in range(n):
        data = _image(10 + i % 7, 12 + i % 5, "RGB", "JPEG", i)
        if i == 3:
            data = data[: len(data) // 2]  # truncated
        if i == 5:
            data = _image(12, 12, "L", "PNG", i)  # one channel where 3 are required
        name = f"img_{i:02d}.png" if i == 5 else f"img_{i:02d}.jpg"
        (folder / name).write_bytes(data)
        rows.append({"file": name, "label": CLASSES[i % 2]})
    return rows


def _write_index(root: Path, rows: list[dict[str, str]], fmt: str) -> None:
    folder = root / "raw" / "pets_index"
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        lines = ["file,label", *(f"{r['file']},{r['label']}" for r in rows)]
        (folder / "labels.csv").write_text("\n".join(lines) + "\n")
    else:
        (folder / "labels.json").write_text(json.dumps(rows))


def test_check_image_decodes_converts_and_names_the_problem(tmp_path: Path) -> None:
    spec = load_image_spec(_spec(tmp_path))
    fields, reason = check_image(_image(10, 20, "RGB", "JPEG", 1), "dog", spec)
    assert reason is None and fields["label"] == 1
    out = Image.open(io.BytesIO(fields["image"]))
    assert (out.format, out.mode, out.size) == ("JPEG", "RGB", (16, 16))
    assert (fields["height"], fields["width"], fields["channels"]) == (16, 16, 3)
    truncated = _image(20, 20, "RGB", "PNG", 2)[:-40]
    assert check_image(truncated, "dog", spec)[1].startswith("cannot decode")
    assert check_image(b"not an image", "dog", spec)[1].startswith("cannot decode")
    assert "size 40x20" in check_image(_image(40, 20, "RGB", "PNG", 3), "dog", spec)[1]
    assert "1 channel(s)" in check_image(_image(10, 10, "L", "PNG", 4), "dog", spec)[1]
    assert "label 'cow'" in check_image(_image(10, 10, "RGB", "PNG", 5), "cow", spec)[1]


def test_bad_specs_fail_with_the_field_named(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"image: min_size \[8, 8\] exceeds max_size"):
        load_image_spec(_spec(tmp_path, image={"min_size": [8, 8], "max_size": [4, 4]}))
    with pytest.raises(SpecError, match=r"source.index: required with layout 'index'"):
        load_image_spec(_spec(tmp_path, source={"uri": "raw/pets", "layout": "index"}))
    with pytest.raises(SpecError, match=r"label.classes"):
        load_image_spec(_spec(tmp_path, label={"name": "label", "classes": ["a", "a"]}))


def test_folder_layout_labels_from_class_folders(tmp_path: Path) -> None:
    for label in ("0", "7"):
        (tmp_path / "raw" / "digits" / label).mkdir(parents=True)
        (tmp_path / "raw" / "digits" / label / "a.png").write_bytes(_image(8, 8, "L", "PNG", 1))
    (tmp_path / "raw" / "digits" / "stray.png").write_bytes(_image(8, 8, "L", "PNG", 1))
    (tmp_path / "raw" / "digits" / "notes.txt").write_text("ignored: not an image extension")
    frame, fingerprint = list_images(tmp_path.as_uri(), load_image_spec("digits"))
    assert list(frame["key"]) == ["0/a.png", "7/a.png", "stray.png"]
    assert list(frame["label_text"]) == ["0", "7", ""]  # no class folder: quarantined later
    assert fingerprint["files"] == 3 and len(fingerprint["sha256"]) == 64


def test_csv_index_jpeg_rgb_quarantines_bad_files_and_publishes(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path)
    _write_index(tmp_path, rows, "csv")
    spec = str(_spec(tmp_path))
    res = pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets")
    assert res["created"] and sum(res["splits"].values()) == 14
    vdir = Path(res["version_uri"][7:])
    manifest = json.loads((vdir / "manifest.json").read_text())
    assert manifest["validation"]["quarantined_rows"] == 2
    assert manifest["validation"]["evaluated_rows"] == 16
    assert manifest["schema"]["features"]["image"]["shape"] == [16, 16, 3]
    (listed,) = manifest["validation"]["quarantine_files"]  # in the image folder's segment
    quarantined = [json.loads(x) for x in (vdir.parent / listed).open()]
    assert {q["key"]: q["reason"].split(":")[0] for q in quarantined} == {
        "img_03.jpg": "cannot decode", "img_05.png": "1 channel(s) (mode L), expected [3]"}
    assert (vdir / "validation" / "results.json").is_file()
    from training.data.tfds import builder  # TFDS over the segment's dataset_info.json

    assert builder(vdir.as_uri()).info.features["image"].encoding_format == "jpeg"


def test_json_index_over_threshold_fails_naming_the_files(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path)
    _write_index(tmp_path, rows, "json")
    spec = str(_spec(tmp_path, quarantine={"max_fraction": 0.05},
                     source={"uri": "raw/pets", "layout": "index",
                             "index": {"uri": "raw/pets_index/labels.json", "format": "json"}}))
    with pytest.raises(ValidationFailed, match=r"2 of 16 image file\(s\).*img_03\.jpg: cannot "
                                                 r"decode.*img_05\.png: 1 channel"):
        pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-json")
    assert versions.list_versions(tmp_path.as_uri(), "pets") == []


def test_strict_mode_fails_on_any_bad_file(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path, n=6)
    _write_index(tmp_path, rows, "csv")
    spec = str(_spec(tmp_path, quarantine={"max_fraction": 0.5}))
    with pytest.raises(ValidationFailed, match=r"strict mode.*img_03\.jpg: cannot decode"):
        pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-strict", mode="strict")
    assert versions.list_versions(tmp_path.as_uri(), "pets") == []
    again = pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-quarantine")
    assert again["created"] and len(versions.list_versions(tmp_path.as_uri(), "pets")) == 1
