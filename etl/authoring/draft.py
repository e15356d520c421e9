"""A draft spec.yaml and expectations.json from every row of a raw source (``etl spec init``).

The draft describes what the rows read hold (column types, null tokens, nullability, ranges
and value sets widened by a margin, a key unique on every row, features by kind, split shares
sized to the table, the partitions' gaps, the label's task from its values when ``--task`` is
not given, a two-valued label's positive class by a stated rule); what data cannot say (the
label, the threshold of a numeric binary label, whether a column leaks the answer) is left to
the user and listed in ``Draft.decide``. The result passes ``etl spec check`` once a label is chosen, and ``etl run``
on the same data without edits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from etl import storage
from etl.authoring import DEFAULT_BUDGET_BYTES
from etl.authoring.columns import (
    ColumnProfile,
    column_identifiers,
    column_profiles,
    find_key,
    group_candidates,
    key_candidates,
    null_tokens,
)
from etl.authoring.fractions import draft_fractions
from etl.authoring.partitions import Layout, matching_files
from etl.authoring.render import Draft
from etl.authoring.scan import CSV_NULLS, Scan, key_hashes, scan
from etl.authoring.sections import (
    column_section,
    features_section,
    label_section,
    split_section,
)
from etl.authoring.suite import draft_suite
from etl.spec import DEFAULT_SHARD_BYTES, SpecError, check_name

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
           ".ndjson": "jsonl", ".json": "jsonl"}
TASKS = ("binary", "multiclass", "regression")
DEFAULT_MARGIN = 0.1


@dataclass(frozen=True)
class DraftOptions:
    """What ``spec init`` is asked: the dataset, its raw source and the few choices it takes."""

    name: str
    source: str  # a URI, a local path, or a path inside ``root``; may hold one {placeholder}
    root: str
    label: str | None = None  # the header or its identifier
    task: str | None = None  # None: inferred from the label's values (said on the draft)
    fmt: str | None = None  # default: from the suffix
    margin: float = DEFAULT_MARGIN
    budget_bytes: int = DEFAULT_BUDGET_BYTES  # profile every row up to this many raw bytes
    dask_address: str | None = None


def format_of(uri: str, given: str | None = None) -> str:
    """The spec format of a file, from ``given`` or its extension."""
    if given:
        return given
    suffix = Path(uri.split("?")[0]).suffix.lower()
    if suffix not in FORMATS:
        raise SpecError(f"--source {uri}: cannot tell the format from {suffix or 'no suffix'!r}; "
                        f"expected one of {sorted(FORMATS)} or --format csv|parquet|jsonl "
                        f"(spec init drafts tabular specs; a folder of images needs an image "
                        f"spec, kind: images, written by hand like etl/examples/digits/spec.yaml)")
    return FORMATS[suffix]


def resolve_source(uri: str, root: str) -> tuple[str, str]:
    """(URI to read now, URI the spec keeps): absolute URIs as given, local paths as file://,
    relative paths inside the storage root (the spec keeps them relative, like the examples)."""
    if "://" in uri:
        return uri, uri
    if Path(uri).is_absolute():
        return f"file://{uri}", f"file://{uri}"
    return storage.safe_join(root, uri), uri


def draft_spec(opts: DraftOptions) -> Draft:
    """Profile ``opts.source`` (every row within the budget) and draft spec and suite."""
    check_name(opts.name, "--name")
    if opts.task is not None and opts.task not in TASKS:
        raise SpecError(f"--task: expected one of {list(TASKS)}, got {opts.task!r}")
    read_uri, spec_uri = resolve_source(opts.source, opts.root)
    fmt = format_of(opts.source, opts.fmt)
    files, layout = matching_files(read_uri)
    found = scan(files, fmt, opts.budget_bytes, opts.dask_address)
    if not found.table.rows:
        raise SpecError(f"--source {opts.source}: no data rows in {len(files)} file(s) read")
    draft = Draft(name=opts.name, spec={}, suite={}, read=found.describe() + f" ({fmt})")
    table = found.table
    for col, uri in table.absent.items():
        draft.decide.append(f"column {col!r} is missing from {uri} (and maybe others): left "
                            f"out, since the run refuses a file without a declared column")
        table.columns.pop(col, None)
    names = column_identifiers(list(table.columns))
    tokens = null_tokens(table)
    profiles = column_profiles(table, names, tokens)
    label = _label_column(opts.label, names) if opts.label else None
    key = _key(found, profiles, draft, opts.dask_address)
    label_spec = label_section(profiles, label, opts.task, draft) if label else None
    if label is None:
        draft.decide.append("label: choose the column to predict (--label COL --task "
                            "binary|multiclass|regression, or write the label section)")
    groups = group_candidates(profiles, {label})
    skip = {label, *groups} if label else set(groups)
    source = {"uri": spec_uri, "format": fmt, **_read(fmt, tokens, profiles, draft),
              "columns": {p.name: column_section(p, draft) for p in profiles.values()}}
    if layout:
        source.update(_partitioned(layout, profiles, found, draft))
    task = label_spec["task"] if label_spec else None
    draft.spec = {
        "name": opts.name, "description": f"Drafted by `python -m etl spec init` from "
                                          f"{opts.source}.",
        "sources": {opts.name: source}, "primary": opts.name, "key": list(key),
        **({"label": label_spec} if label_spec else {}),
        "exclude": sorted(skip - set(groups)),
        "features": features_section(profiles, skip, draft),
        "split": split_section(opts.name, task, groups,
                               _shares(profiles, label_spec, task, draft), draft),
        "expectations": "expectations.json",
        "shards": {"target_bytes": DEFAULT_SHARD_BYTES, "compression": None},
        "schedule": "none",
    }
    draft.decide.append("features: list any column known only after the outcome (leakage) "
                        "under exclude")
    draft.decide.append("schedule: the draft runs manually only (schedule: none); set a cron, "
                        "start_date, catchup, owner, tags and training settings as needed")
    draft.suite = draft_suite(opts.name, profiles, key if draft.unique_key else None,
                              opts.margin, found.full)
    return draft


def _label_column(given: str, names: dict[str, str]) -> str:
    """The label's identifier, from its header (``Sub-Category``) or identifier."""
    if given in names:
        return names[given]
    if given in names.values():
        return given
    raise SpecError(f"--label {given!r}: not a column of the source; columns: {list(names)}")


def _read(fmt: str, tokens: set[str], profiles: dict[str, ColumnProfile], draft: Draft
          ) -> dict[str, Any]:
    """``read.null_values``: a CSV's usual empty spellings plus the null tokens found."""
    nulls = (CSV_NULLS if fmt == "csv" else []) + sorted(tokens - set(CSV_NULLS))
    if tokens:
        where = "; ".join(f"{', '.join(map(repr, sorted(p.tokens)))} in {p.name} "
                          f"({sum(p.tokens.values()):,} rows)"
                          for p in profiles.values() if p.tokens)
        draft.tokens_comment = f"null tokens found: {where}"
        draft.inferred.append(f"read.null_values: {draft.tokens_comment} (read as nulls; the "
                              f"columns' other values are all numbers or timestamps)")
    return {"read": {"null_values": nulls}} if nulls else {}


def _partitioned(layout: Layout, profiles: dict[str, ColumnProfile], found: Scan,
                 draft: Draft) -> dict[str, Any]:
    """``event_time`` (a timestamp column without nulls whose every value lies in its file's
    period) and ``partitioning`` (incomplete when periods are missing or files are empty)."""
    times = [p for p in profiles.values() if p.type == "timestamp" and p.nulls == 0]
    if not times:
        raise SpecError(f"--source {found.pieces[0].file.uri}: a partitioned source needs a "
                        f"timestamp column (its event_time); none without nulls was found")
    fitting = [p for p in times if p.misfiled == 0]
    event = (fitting or times)[0]
    if not fitting:
        draft.decide.append(f"event_time {event.name!r}: {event.misfiled:,} values lie outside "
                            f"their file's period (the run quarantines them as misfiled)")
    block = layout.block(event.name)
    draft.inferred.append(f"partitioning: {layout.describe()}; event_time {event.name}")
    if found.table.empty and layout.missing == 0:
        block["partitioning"]["require_complete"] = False
        draft.inferred.append(f"require_complete: false ({len(found.table.empty)} file(s) hold "
                              f"a header only)")
    return block


def _shares(profiles: dict[str, ColumnProfile], label_spec: dict | None, task: str | None,
            draft: Draft) -> dict[str, float]:
    """Split fractions from the labelled rows and (classification) the class sizes."""
    if label_spec is None:
        rows = next(iter(profiles.values())).rows
        classes = None
    else:
        prof = profiles[label_spec["source"]]
        rows, classes = prof.rows - prof.nulls, None
        if prof.counts and (task == "multiclass" or label_spec.get("op") == "eq"):
            classes = dict(prof.counts)
        elif "positive" in label_spec:
            pos = sum(n for v, n in prof.counts.items() if _same(v, label_spec["positive"]))
            classes = {"positive": pos, "the rest": rows - pos}
        elif task == "binary":
            classes = {"above the median": rows // 2, "the rest": rows - rows // 2}
    fractions = draft_fractions(rows, classes)
    draft.inferred.append(f"split.fractions: {fractions.why}")
    if fractions.problem:
        draft.decide.append(f"split: {fractions.problem}")
    return fractions.split()


def _same(value: str, positive: str | int) -> bool:
    """A profiled value (text) is the drafted positive class (a whole number: as a number)."""
    if isinstance(positive, int):
        try:
            return float(value) == positive
        except ValueError:
            return False
    return value == positive


def _key(found: Scan, profiles: dict[str, ColumnProfile], draft: Draft,
         address: str | None) -> tuple[str, ...]:
    """A key unique on every row (only when every row was read), else every column without
    nulls, which names rows in reports only (the split then goes by row)."""
    rows = found.table.rows
    dupes = rows - len(np.unique(found.table.row_hashes))
    key = None
    if found.full and not dupes:
        cands = key_candidates(profiles, rows)
        if cands:
            hashes = key_hashes(found, [profiles[c].source for c in cands], address)
            key = find_key({c: hashes[profiles[c].source] for c in cands}, profiles)
    if key:
        draft.unique_key = True
        draft.inferred.append(f"key {list(key)}: unique on all {rows:,} rows")
        return key
    cols = tuple(p.name for p in profiles.values() if p.nulls == 0) or tuple(profiles)
    why = (f"{dupes:,} rows repeat another row whole" if dupes else
           "rows were sampled, so no key can be claimed" if not found.full else
           "no combination of up to 3 non-float columns is unique on every row")
    draft.decide.append(f"key: none drafted ({why}); {list(cols)} name rows in reports only "
                        f"(split.by: row)")
    return cols
