"""Image dataset specs (``kind: images``): folder trees or indexed files of PNG/JPEG images.

An image spec shares the tabular spec's split, shard and naming rules (``etl.spec.DatasetSpec``)
but replaces sources/joins/features with: where the files are and where labels come from
(class folder names or a CSV/JSON index), what every file must look like (size range,
channels, label set), what the ETL turns it into (resize, channels, PNG/JPEG) and how many
bad files may be quarantined before the run fails. Everything is checked at load time with
the file and field named. Import-light (yaml only).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from etl.spec.load import (
    check_folder_name,
    check_settings,
    parse_shards,
    spec_path,
)
from etl.spec.model import (
    DatasetSpec,
    SpecError,
    check_choice,
    check_name,
    check_relpath,
    get_field,
    parse_split,
)

KIND = "images"
LAYOUTS = ("folders", "index")
INDEX_FORMATS = ("csv", "json")
ENCODINGS = ("png", "jpeg")
EXTENSIONS = (".png", ".jpg", ".jpeg")
KEY_COLUMN = "key"  # the file's path relative to the source root: unique, stable across runs
IMAGE_FEATURE = "image"
DEFAULT_MAX_FRACTION = 0.01
DEFAULT_JPEG_QUALITY = 95


@dataclass(frozen=True)
class ImageSource:
    """Where the image files are and where their labels come from."""

    uri: str
    layout: str = "folders"  # folders: <uri>/<label>/<file>; index: labels from a CSV/JSON file
    index_uri: str | None = None
    index_format: str = "csv"
    file_column: str = "file"
    label_column: str = "label"
    extensions: tuple[str, ...] = EXTENSIONS


@dataclass(frozen=True)
class ImageRules:
    """What an accepted file looks like and what the ETL writes for it."""

    min_size: tuple[int, int] = (1, 1)  # (height, width), inclusive
    max_size: tuple[int, int] = (4096, 4096)
    channels: tuple[int, ...] = (1, 3)  # accepted source channels (Pillow mode L=1, RGB=3, RGBA=4)
    resize: tuple[int, int] | None = None  # (height, width) written; None keeps the size
    channels_out: int = 1
    encoding: str = "png"
    jpeg_quality: int = DEFAULT_JPEG_QUALITY


@dataclass(frozen=True)
class Quarantine:
    """Bad files may be set aside up to this share of all files, else the run fails."""

    max_fraction: float = DEFAULT_MAX_FRACTION


@dataclass(frozen=True, kw_only=True)
class ImageSpec(DatasetSpec):
    """A whole image dataset description; see ``etl/examples/digits/spec.yaml``."""

    source: ImageSource
    label_name: str
    classes: tuple[str, ...]
    rules: ImageRules
    quarantine: Quarantine
    augment: dict[str, Any]
    kind: str = KIND

    @property
    def raw_uri(self) -> str:
        return self.source.uri

    def output_shape(self) -> list[int | None]:
        """[h, w, c] of written images; None where sizes vary (no resize, min != max)."""
        if self.rules.resize:
            h, w = self.rules.resize
        elif self.rules.min_size == self.rules.max_size:
            h, w = self.rules.min_size
        else:
            h = w = None
        return [h, w, self.rules.channels_out]

    def manifest_schema(self) -> dict[str, Any]:
        """The ``schema`` block of manifest.json: an ``image`` feature plus its dimensions."""
        image = {"dtype": "string", "kind": "image", "shape": self.output_shape(),
                 "encoding": self.rules.encoding, "augment": dict(self.augment)}
        dims = {d: {"dtype": "int64", "kind": "numeric"} for d in ("height", "width", "channels")}
        label = {"name": self.label_name, "dtype": "int64", "classes": len(self.classes),
                 "names": list(self.classes)}
        return {"key": [KEY_COLUMN], "label": label, "features": {IMAGE_FEATURE: image, **dims}}


def load_image_spec(name_or_path: str | Path, source_uri: str | None = None) -> ImageSpec:
    """Load and check an image spec by dataset name or file path.

    ``source_uri`` replaces the image folder (the DAG's raw-source override).
    """
    path = spec_path(name_or_path)
    if not path.is_file():
        raise SpecError(f"{path}: spec file not found")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    w = str(path)
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        raise SpecError(f"{w}.kind: expected {KIND!r} for an image spec")
    name = get_field(raw, "name", w, str)
    check_folder_name(path, name, w)
    check_settings(raw, w)
    label = get_field(raw, "label", w, dict)
    classes = tuple(str(c) for c in get_field(label, "classes", f"{w}.label", list))
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise SpecError(f"{w}.label.classes: expected two or more distinct class names, "
                        f"got {list(classes)}")
    quar = get_field(raw, "quarantine", w, dict, {})
    frac = get_field(quar, "max_fraction", f"{w}.quarantine", (int, float), DEFAULT_MAX_FRACTION)
    if not 0 <= frac <= 1:
        raise SpecError(f"{w}.quarantine.max_fraction: expected 0..1, got {frac}")
    return ImageSpec(
        name=name, path=path, source=_source(get_field(raw, "source", w, dict), w, source_uri),
        label_name=check_name(get_field(label, "name", f"{w}.label", str), f"{w}.label.name"),
        classes=classes, rules=_parse_rules(get_field(raw, "image", w, dict), f"{w}.image"),
        split=parse_split(get_field(raw, "split", w, dict), f"{w}.split"),
        quarantine=Quarantine(max_fraction=float(frac)),
        augment=get_field(raw, "augment", w, dict, {}),
        description=str(raw.get("description", "")), **parse_shards(raw, w))


def _source(d: dict, w: str, override: str | None) -> ImageSource:
    src = _parse_source(d, f"{w}.source")
    if override:
        src = replace(src, uri=check_relpath(override, "source_uri"))
    return src


def _parse_source(d: dict, w: str) -> ImageSource:
    layout = check_choice(get_field(d, "layout", w, str, "folders"), LAYOUTS, f"{w}.layout")
    index = get_field(d, "index", w, dict, None)
    if (layout == "index") != (index is not None):
        raise SpecError(f"{w}.index: required with layout 'index' and only then")
    exts = tuple(e.lower() if e.startswith(".") else f".{e.lower()}"
                 for e in get_field(d, "extensions", w, list, list(EXTENSIONS)))
    for e in exts:
        check_choice(e, EXTENSIONS, f"{w}.extensions")
    src = ImageSource(uri=check_relpath(get_field(d, "uri", w, str), f"{w}.uri"), layout=layout,
                      extensions=exts)
    if index is None:
        return src
    iw = f"{w}.index"
    return ImageSource(
        uri=src.uri, layout=layout, extensions=exts,
        index_uri=check_relpath(get_field(index, "uri", iw, str), f"{iw}.uri"),
        index_format=check_choice(get_field(index, "format", iw, str, "csv"), INDEX_FORMATS,
                                  f"{iw}.format"),
        file_column=get_field(index, "file_column", iw, str, "file"),
        label_column=get_field(index, "label_column", iw, str, "label"))


def _pair(d: dict, key: str, w: str, default: Any) -> tuple[int, int] | None:
    value = get_field(d, key, w, list, default)
    if value is None:
        return None
    if len(value) != 2 or any(not isinstance(v, int) or isinstance(v, bool) or v < 1
                              for v in value):
        raise SpecError(f"{w}.{key}: expected [height, width] of positive ints, got {value!r}")
    return int(value[0]), int(value[1])


def _parse_rules(d: dict, w: str) -> ImageRules:
    lo, hi = _pair(d, "min_size", w, [1, 1]), _pair(d, "max_size", w, [4096, 4096])
    if lo[0] > hi[0] or lo[1] > hi[1]:
        raise SpecError(f"{w}: min_size {list(lo)} exceeds max_size {list(hi)}")
    channels = tuple(get_field(d, "channels", w, list, [1, 3]))
    for c in channels:
        check_choice(c, (1, 2, 3, 4), f"{w}.channels")
    quality = get_field(d, "jpeg_quality", w, int, DEFAULT_JPEG_QUALITY)
    if not 1 <= quality <= 100:
        raise SpecError(f"{w}.jpeg_quality: expected 1..100, got {quality}")
    return ImageRules(
        min_size=lo, max_size=hi, channels=channels, resize=_pair(d, "resize", w, None),
        channels_out=check_choice(get_field(d, "channels_out", w, int, 1), (1, 3),
                                  f"{w}.channels_out"),
        encoding=check_choice(get_field(d, "encoding", w, str, "png"), ENCODINGS, f"{w}.encoding"),
        jpeg_quality=quality)
