"""Sources partitioned by date or hour (``raw/x/date={date}/x.csv``): the landed files, the
format of their placeholder values, and the gaps between the first and the last one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from etl import storage
from etl.spec import SpecError

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# (strftime format, granularity) tried in order on the placeholder values
DATE_FORMATS = (("%Y-%m-%d", "day"), ("%Y%m%d", "day"), ("%Y-%m-%dT%H", "hour"),
                ("%Y-%m-%d-%H", "hour"), ("%Y%m%d%H", "hour"), ("%Y-%m-%d %H", "hour"))
STEPS = {"day": timedelta(days=1), "hour": timedelta(hours=1)}


@dataclass(frozen=True)
class RawFile:
    """One landed file: its URI, size and (partitioned) the [start, end) its name covers."""

    uri: str
    size: int
    period: tuple[datetime, datetime] | None = None


@dataclass(frozen=True)
class Layout:
    """How a partitioned source's files are named, and which periods have no file."""

    placeholder: str
    format: str
    granularity: str
    first: datetime
    last: datetime
    missing: int
    expected: int

    def block(self, event_time: str) -> dict[str, Any]:
        """The spec's ``event_time`` + ``partitioning``; incomplete when periods are missing."""
        return {"event_time": event_time,
                "partitioning": {"placeholder": self.placeholder, "format": self.format,
                                 "granularity": self.granularity,
                                 "require_complete": self.missing == 0}}

    def describe(self) -> str:
        unit = "daily" if self.granularity == "day" else "hourly"
        span = f"between {self.first:{self.format}} and {self.last:{self.format}}"
        if not self.missing:
            return f"all {self.expected:,} {unit} partitions {span} landed: require_complete"
        return (f"{self.missing:,} of {self.expected:,} {unit} partitions missing {span}: "
                f"require_complete: false (the run skips the gaps)")


def placeholder(uri: str) -> str | None:
    """The single ``{name}`` placeholder of a source URI, if any."""
    names = PLACEHOLDER.findall(uri)
    if len(names) > 1:
        raise SpecError(f"--source {uri}: expected at most one placeholder, got {names}")
    return names[0] if names else None


def matching_files(uri: str) -> tuple[list[RawFile], Layout | None]:
    """The files a source URI names (every file a placeholder matches, in period order) and,
    for a placeholder, their layout."""
    fs, path = storage.get_fs(uri)
    name = placeholder(uri)
    if name is None:
        try:
            return [RawFile(uri, int(fs.info(path)["size"]))], None
        except FileNotFoundError:
            raise SpecError(f"--source {uri}: no such file") from None
    pattern = re.compile(re.escape(path).replace(re.escape("{" + name + "}"), "(.+?)") + "$")
    found = fs.glob(PLACEHOLDER.sub("*", path), detail=True)
    matches = {m.group(1): (f, int(info.get("size") or 0)) for f, info in sorted(found.items())
               if info.get("type") != "directory" and (m := pattern.search(f))}
    if not matches:
        raise SpecError(f"--source {uri}: no file matches {PLACEHOLDER.sub('*', path)}")
    layout = _layout(name, list(matches), uri)
    files = []
    for value, (f, size) in matches.items():
        start = datetime.strptime(value, layout.format)
        files.append(RawFile(fs.unstrip_protocol(f), size,
                             (start, start + STEPS[layout.granularity])))
    return sorted(files, key=lambda f: f.period), layout


def _layout(name: str, values: list[str], uri: str) -> Layout:
    """The first of DATE_FORMATS every value parses with, and the periods with no file."""
    for fmt, granularity in DATE_FORMATS:
        try:
            periods = sorted({datetime.strptime(v, fmt) for v in values})
        except ValueError:
            continue
        step = STEPS[granularity]
        expected = int((periods[-1] - periods[0]) / step) + 1
        return Layout(name, fmt, granularity, periods[0], periods[-1],
                      expected - len(periods), expected)
    raise SpecError(f"--source {uri}: {{{name}}} values like {values[0]!r} match none of the "
                    f"date formats {[f for f, _ in DATE_FORMATS]}")
