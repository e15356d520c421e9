"""Sources partitioned by date (``raw/x/date={date}/x.csv``): which files to sample and the
spec's ``partitioning`` block, guessed from the landed file names."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from etl import storage
from etl.spec import SpecError

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# (strftime format, granularity) tried in order on the first file's placeholder value
DATE_FORMATS = (("%Y-%m-%d", "day"), ("%Y%m%d", "day"), ("%Y-%m-%dT%H", "hour"),
                ("%Y-%m-%d-%H", "hour"), ("%Y%m%d%H", "hour"))


def placeholder(uri: str) -> str | None:
    """The single ``{name}`` placeholder of a source URI, if any."""
    names = PLACEHOLDER.findall(uri)
    if len(names) > 1:
        raise SpecError(f"--source {uri}: expected at most one placeholder, got {names}")
    return names[0] if names else None


def matching_files(uri: str) -> tuple[list[str], list[str]]:
    """(URIs, placeholder values) of the files a partitioned URI matches, newest last."""
    fs, path = storage.get_fs(uri)
    name = placeholder(uri)
    pattern = re.compile(re.escape(path).replace(re.escape("{" + f"{name}" + "}"), "(.+?)") + "$")
    found = sorted(fs.glob(PLACEHOLDER.sub("*", path)))
    matches = [(f, m.group(1)) for f in found if (m := pattern.search(f))]
    if not matches:
        raise SpecError(f"--source {uri}: no file matches {PLACEHOLDER.sub('*', path)}")
    return [fs.unstrip_protocol(f) for f, _ in matches], [v for _, v in matches]


def partitioning(name: str, values: list[str], timestamps: list[str], uri: str) -> dict[str, Any]:
    """The spec's ``event_time`` + ``partitioning`` for a placeholder with these values."""
    for fmt, granularity in DATE_FORMATS:
        try:
            for value in values:
                datetime.strptime(value, fmt)
        except ValueError:
            continue
        if not timestamps:
            raise SpecError(f"--source {uri}: a partitioned source needs a timestamp column "
                            f"(its event_time); none was found")
        return {"event_time": timestamps[0],
                "partitioning": {"placeholder": name, "format": fmt, "granularity": granularity,
                                 "require_complete": True}}
    raise SpecError(f"--source {uri}: {{{name}}} values like {values[0]!r} match none of the "
                    f"date formats {[f for f, _ in DATE_FORMATS]}")
