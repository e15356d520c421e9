"""Image segments built from small real image sets: JPEG, RGB, CSV/JSON label index, corrupt
files quarantined or failing the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from etl import pipeline, versions
from etl.errors import ValidationFailed
from tests.support.images import CLASSES, image, pets_spec

END = "2024-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def _land_pets(root: Path, n: int = 16) -> list[dict[str, str]]:
    """n RGB JPEGs of varying sizes, one truncated, one grayscale (wrong channels)."""
    folder = root / "raw" / "pets"
    folder.mkdir(parents=True)
    rows = []
    for i in range(n):
        data = image(10 + i % 7, 12 + i % 5, "RGB", "JPEG", i)
        if i == 3:
            data = data[: len(data) // 2]  # truncated
        if i == 5:
            data = image(12, 12, "L", "PNG", i)  # one channel where 3 are required
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


def test_csv_index_jpeg_rgb_quarantines_bad_files_and_publishes(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path)
    _write_index(tmp_path, rows, "csv")
    spec = str(pets_spec(tmp_path))
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
    spec = str(pets_spec(tmp_path, quarantine={"max_fraction": 0.05},
                     source={"uri": "raw/pets", "layout": "index",
                             "index": {"uri": "raw/pets_index/labels.json", "format": "json"}}))
    with pytest.raises(ValidationFailed, match=r"2 of 16 image file\(s\).*img_03\.jpg: cannot "
                                                 r"decode.*img_05\.png: 1 channel"):
        pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-json")
    assert versions.list_versions(tmp_path.as_uri(), "pets") == []


def test_strict_mode_fails_on_any_bad_file(client, tmp_path: Path) -> None:
    rows = _land_pets(tmp_path, n=6)
    _write_index(tmp_path, rows, "csv")
    spec = str(pets_spec(tmp_path, quarantine={"max_fraction": 0.5}))
    with pytest.raises(ValidationFailed, match=r"strict mode.*img_03\.jpg: cannot decode"):
        pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-strict", mode="strict")
    assert versions.list_versions(tmp_path.as_uri(), "pets") == []
    again = pipeline.run(spec, tmp_path.as_uri(), END, run_id="pets-quarantine")
    assert again["created"] and len(versions.list_versions(tmp_path.as_uri(), "pets")) == 1
