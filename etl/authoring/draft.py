"""A draft spec.yaml and expectations.json from a sample of one raw file (``etl spec init``).

The draft describes what the sample holds (column types, nullability, ranges and value sets
widened by a margin, a unique key if one exists, features by kind); what data cannot say (the
label, the threshold of a binary label, whether a column leaks the answer) is left to the user
and listed in ``Draft.decide``. The result passes ``etl spec check`` once a label is chosen.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import yaml

from etl import storage
from etl.authoring.partitions import matching_files, partitioning, placeholder
from etl.authoring.profile import (
    MAX_VOCAB,
    ColumnProfile,
    find_key,
    group_candidates,
    profile_column,
)
from etl.authoring.suite import draft_suite
from etl.sources.read import read_source_file
from etl.spec import DEFAULT_SHARD_BYTES, Source, SpecError, check_name

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
           ".ndjson": "jsonl", ".json": "jsonl"}
NULL_VALUES = ["", "NA", "NaN", "null"]
TASKS = ("binary", "multiclass", "regression")
DEFAULT_SAMPLE_ROWS = 10_000
DEFAULT_MARGIN = 0.1


@dataclass
class Draft:
    """What ``spec init`` writes and prints."""

    name: str
    spec: dict[str, Any]
    suite: dict[str, Any]
    inferred: list[str] = field(default_factory=list)
    decide: list[str] = field(default_factory=list)
    unique_key: bool = False
    split_comment: str = ""  # a commented-out line under ``split:`` (a group_by to opt into)


def format_of(uri: str, given: str | None = None) -> str:
    """The spec format of a file, from ``given`` or its extension."""
    if given:
        return given
    suffix = Path(uri.split("?")[0]).suffix.lower()
    if suffix not in FORMATS:
        raise SpecError(f"--source {uri}: cannot tell the format from {suffix or 'no suffix'!r}; "
                        f"expected one of {sorted(FORMATS)} or --format csv|parquet|jsonl "
                        f"(spec init drafts tabular specs; a folder of images needs an image "
                        f"spec, kind: images, written by hand like etl/specs/digits/spec.yaml)")
    return FORMATS[suffix]


def resolve_source(uri: str, root: str) -> tuple[str, str]:
    """(URI to read now, URI the spec keeps): absolute URIs as given, local paths as file://,
    relative paths inside the storage root (the spec keeps them relative, like the examples)."""
    if "://" in uri:
        return uri, uri
    if Path(uri).is_absolute():
        return f"file://{uri}", f"file://{uri}"
    return storage.safe_join(root, uri), uri


def _header(raw: bytes, fmt: str) -> list[str]:
    if fmt == "csv":
        return list(pd.read_csv(io.BytesIO(raw), nrows=0, dtype=str).columns)
    if fmt == "parquet":
        return list(pq.read_schema(io.BytesIO(raw)).names)
    lines = [ln for ln in raw.splitlines()[:1000] if ln.strip()]
    return list(dict.fromkeys(k for ln in lines for k in json.loads(ln)))


def read_sample(uris: list[str], fmt: str, rows: int = DEFAULT_SAMPLE_ROWS) -> pd.DataFrame:
    """Up to ``rows`` rows of the newest files, every value a string as extraction hands over."""
    columns = _header(storage.read_bytes(uris[-1]), fmt)
    read = {"null_values": NULL_VALUES} if fmt == "csv" else {}
    source = Source(name="sample", uri=uris[-1], format=fmt,
                    columns=dict.fromkeys(columns, "string"), read=read)
    frames, count = [], 0
    for uri in reversed(uris):
        frames.append(read_source_file(uri, source))
        count += len(frames[-1])
        if count >= rows:
            break
    return pd.concat(frames[::-1], ignore_index=True).tail(rows).reset_index(drop=True)


def _usable(columns: list[str], draft: Draft) -> list[str]:
    """Columns a spec can name (identifiers); others are reported, not silently renamed."""
    ok = []
    for col in columns:
        try:
            ok.append(check_name(col, "column"))
        except SpecError:
            draft.decide.append(f"column {col!r} is not an identifier, so a spec cannot name it; "
                                f"left out (rename it in the raw files to use it)")
    return ok


def _label(profiles: dict[str, ColumnProfile], col: str, task: str, draft: Draft) -> dict:
    if col not in profiles:
        raise SpecError(f"--label {col!r}: not a column of the source; columns: {list(profiles)}")
    prof, name = profiles[col], "label" if "label" not in profiles else f"{col}_label"
    if task == "binary":
        if not prof.numeric:
            raise SpecError(f"--label {col!r}: a binary label compares a numeric column with a "
                            f"value, but {col!r} holds {prof.type}; use --task multiclass")
        if prof.distinct == 2:
            draft.inferred.append(f"label {name} = ({col} == {prof.high:g}) (two values seen)")
            return {"name": name, "source": col, "op": "eq", "value": prof.high}
        mid = prof.median
        draft.decide.append(f"label: the draft says {col} > {mid:g} (the sample's median, so "
                            f"classes are about even); choose the threshold (label.op, value)")
        return {"name": name, "source": col, "op": "gt", "value": mid}
    if task == "regression" and not prof.numeric:
        raise SpecError(f"--label {col!r}: regression needs a numeric column, {col!r} is "
                        f"{prof.type}")
    if task == "multiclass":
        seen = f" (seen: {list(prof.values)})" if prof.values else ""
        draft.decide.append(f"label.classes: the draft takes the classes from the train split"
                            f"{seen}; list them to fix them (a value outside them fails the run)")
    else:
        draft.decide.append(f"label.transform: none drafted; log1p suits a skewed, non-negative "
                            f"{col!r} (the model still returns values in its units)")
    return {"name": name, "source": col, "task": task}


def _features(profiles: dict[str, ColumnProfile], skip: set[str], draft: Draft) -> list[dict]:
    feats = []
    for p in profiles.values():
        if p.name in skip:
            continue
        if p.numeric and p.unique and p.type == "int64":  # a row id: its order, no signal
            draft.decide.append(f"column {p.name!r} (a unique integer: an id) is not a feature")
        elif p.numeric:
            feats.append({"name": p.name, "kind": "numeric", "fill": "mean"})
        elif p.type == "string" and p.distinct <= min(MAX_VOCAB, p.rows // 2) and not p.unique:
            feats.append({"name": p.name, "kind": "categorical", "fill": "UNKNOWN"})
        elif p.type == "timestamp":
            feats += [{"name": f"{p.name}_{op}", "kind": "numeric", "fill": "mean",
                       "derive": {"op": op, "columns": [p.name]}} for op in ("year", "day_of_year")]
            draft.inferred.append(f"features {p.name}_year, {p.name}_day_of_year: derived from the "
                                  f"timestamp {p.name!r} (trend and season)")
        else:
            draft.decide.append(f"column {p.name!r} (id-like or free text) is not a feature; "
                                f"derive one from it if useful")
    return feats


def _column(p: ColumnProfile, draft: Draft) -> str | dict[str, str]:
    """A column's declared type; a timestamp in a non-ISO format carries its format."""
    if p.time_format is None:
        return p.type
    draft.inferred.append(f"column {p.name!r}: timestamps like {p.time_format!r} (format inferred "
                          f"from every sampled value)")
    return {"type": "timestamp", "format": p.time_format}


def _split(name: str, task: str | None, groups: list[str], draft: Draft) -> dict[str, Any]:
    """Fractions and salt; ``by: row`` without a unique key; stratified for a class label; a
    repeated id column as ``group_by``, commented out: a sample cannot say whether rows sharing
    an id would leak, and grouping coarsens the fractions and rules out ``stratify``."""
    split: dict[str, Any] = {"fractions": {"train": 0.8, "eval": 0.1, "test": 0.1},
                             "salt": f"{name}-v1"}
    if not draft.unique_key:
        split["by"] = "row"
        draft.inferred.append("split.by: row -- no unique key, so each row's content (plus a "
                              "counter for identical rows) decides its split; hashing a "
                              "non-unique key would put whole groups of rows in one split")
    if task in ("binary", "multiclass"):
        split["stratify"] = True
        draft.inferred.append("split.stratify: true -- each class is spread over train/eval/"
                              "test by the fractions, so a small class reaches every split")
    drop = ", and drop stratify," if task in ("binary", "multiclass") else ""
    if groups:
        draft.split_comment = (f"  # group_by: {_flow(groups)}  # uncomment{drop} to keep each "
                               f"{groups[0]}'s rows in one split")
        draft.decide.append(f"split.group_by: drafted commented out as {groups}, an id column "
                            f"repeated over rows (not a feature); uncomment it{drop} if rows "
                            f"sharing an id must not be split apart (leakage)")
    elif not draft.unique_key:
        draft.decide.append("split.group_by: list columns whose rows must share a split "
                            "(e.g. one patient's visits) if leakage between them matters")
    return split


def draft_spec(name: str, source_uri: str, *, root: str, label: str | None = None,
               task: str = "binary", fmt: str | None = None, margin: float = DEFAULT_MARGIN,
               sample_rows: int = DEFAULT_SAMPLE_ROWS) -> Draft:
    """Profile a sample of ``source_uri`` and draft the spec and suite of dataset ``name``."""
    check_name(name, "--name")
    if task not in TASKS:
        raise SpecError(f"--task: expected one of {list(TASKS)}, got {task!r}")
    read_uri, spec_uri = resolve_source(source_uri, root)
    fmt = format_of(source_uri, fmt)
    part = placeholder(read_uri)
    files, values = matching_files(read_uri) if part else ([read_uri], [])
    frame = read_sample(files, fmt, sample_rows)
    draft = Draft(name=name, spec={}, suite={})
    frame = frame[_usable(list(frame.columns), draft)]
    profiles = {c: profile_column(c, frame[c]) for c in frame.columns}
    draft.inferred.append(f"{len(frame)} rows sampled from {len(files)} of {read_uri} ({fmt})")
    draft.inferred += [f"  {p.name}: {p.type}, {p.nulls} null, {p.distinct} distinct"
                       + (f", [{p.low:g}, {p.high:g}]" if p.numeric else "")
                       + (f", values {list(p.values)[:6]}" if p.values else "")
                       for p in profiles.values()]
    key = _key(frame, profiles, draft)
    label_spec = _label(profiles, label, task, draft) if label else None
    if label is None:
        draft.decide.append("label: choose the column to predict (--label COL --task "
                            "binary|multiclass|regression, or write the label section)")
    groups = group_candidates(profiles, {label})
    skip = {label, *groups} if label else set(groups)
    source = {"uri": spec_uri, "format": fmt,
              **({"read": {"null_values": NULL_VALUES}} if fmt == "csv" else {}),
              "columns": {p.name: _column(p, draft) for p in profiles.values()}}
    if part:
        times = [p.name for p in profiles.values() if p.type == "timestamp" and p.nulls == 0]
        source.update(partitioning(part, values, times, source_uri))
        draft.decide.append(f"partitioning: one file per {source['partitioning']['granularity']}"
                            f" of {source['event_time']} (check the event_time column)")
    draft.spec = {
        "name": name, "description": f"Drafted by `python -m etl spec init` from {source_uri}.",
        "sources": {name: source}, "primary": name, "key": list(key),
        **({"label": label_spec} if label_spec else {}),
        "exclude": sorted(skip - set(groups)), "features": _features(profiles, skip, draft),
        "split": _split(name, task if label else None, groups, draft),
        "expectations": "expectations.json",
        "shards": {"target_bytes": DEFAULT_SHARD_BYTES, "compression": None},
        "schedule": "none",
    }
    draft.decide.append("features: list any column known only after the outcome (leakage) "
                        "under exclude")
    draft.decide.append("schedule: the draft runs manually only (schedule: none); set a cron, "
                        "start_date, catchup, owner, tags and training settings as needed")
    draft.suite = draft_suite(name, profiles, key if draft.unique_key else None, margin)
    return draft


def _key(frame: pd.DataFrame, profiles: dict[str, ColumnProfile], draft: Draft) -> tuple[str, ...]:
    """A key unique on the sample, else every column without nulls (reported, unchecked)."""
    key = find_key(frame, profiles)
    if key:
        draft.unique_key = True
        draft.inferred.append(f"key {list(key)}: unique on the sample")
        draft.decide.append(f"key {list(key)}: check it is unique in all data, not only the "
                            f"sample (it decides the split)")
        return key
    cols = tuple(p.name for p in profiles.values() if p.nulls == 0) or tuple(profiles)
    draft.decide.append(f"key: no combination of up to 3 columns is unique on the sample; "
                        f"{list(cols)} name rows in reports only (the split uses split.by: row)")
    return cols


def render_spec(draft: Draft) -> str:
    """spec.yaml text: the drafted spec with the open decisions as comments on top."""
    head = ["# Drafted by `python -m etl spec init`: check every value, then run",
            f"#   python -m etl spec check {draft.name}", "# Still to decide:"]
    head += [f"#  - {line}" for line in draft.decide]
    body = ""
    for key, value in draft.spec.items():  # nested sections in block style, the rest one-line
        if key == "features":
            body += "features:\n" + "".join(f"  - {_flow(f)}\n" for f in value)
        elif key in ("sources", "split"):
            body += yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False)
            body += f"{draft.split_comment}\n" if key == "split" and draft.split_comment else ""
        else:
            body += f"{key}: {_flow(value)}\n"
    return "\n".join(head) + "\n" + body


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1000)
    return text.strip().removesuffix("...").strip()


def write_draft(draft: Draft, out_dir: Path, *, force: bool = False) -> tuple[Path, Path]:
    """Write ``<out_dir>/spec.yaml`` and ``expectations.json``; never over a spec unless forced."""
    spec_file = out_dir / "spec.yaml"
    suite_file = out_dir / "expectations.json"
    if not force and (spec_file.exists() or suite_file.exists()):
        raise SpecError(f"{out_dir}: a spec is already there; use --force to replace it")
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(render_spec(draft), encoding="utf-8")
    suite_file.write_text(json.dumps(draft.suite, indent=2) + "\n", encoding="utf-8")
    return spec_file, suite_file
