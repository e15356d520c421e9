"""The spec's lookup joins: each right side read once (keys not null, first row per key) and
left-joined to the primary rows, timestamps compared as instants, row count and order kept."""

from __future__ import annotations

from typing import Any

import pandas as pd

from etl.sources.read import read_source_file, source_uri
from etl.spec import Spec


def _lookup(root: str, spec: Spec, index: int, dropped: dict[str, int]) -> pd.DataFrame:
    """A join's right side, read once on the client: keys not null, duplicates dropped."""
    join = spec.joins[index]
    source = spec.sources[join.source]
    df = read_source_file(source_uri(root, source), source)
    df = df[list(join.on) + list(join.columns)].dropna(subset=list(join.on))
    before = len(df)
    df = df.drop_duplicates(subset=list(join.on), keep="first")
    dropped[join.source] = before - len(df)
    renamed = {c: join.output_name(c) for c in join.columns}
    df = df.rename(columns=renamed).reset_index(drop=True)
    for k in ts_keys_of(spec, join):  # parsed once here, not in every segment build
        df[_JOIN_PREFIX + k] = _instant(df.pop(k))
    return df


_JOIN_PREFIX = "__join_"


def ts_keys_of(spec: Spec, join: Any) -> list[str]:
    types = spec.sources[join.source].columns
    return [k for k in join.on if types[k] == "timestamp"]


def _instant(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s, utc=True, errors="coerce", format="ISO8601")


def join_one(left: pd.DataFrame, right: pd.DataFrame, keys: list[str],
              ts_keys: list[str]) -> pd.DataFrame:
    """Left join on keys, timestamps compared as instants (not as strings), row order kept."""
    lk, on = left, list(keys)
    for k in ts_keys:
        lk = lk.assign(**{_JOIN_PREFIX + k: _instant(lk[k])})
        on[on.index(k)] = _JOIN_PREFIX + k
    out = lk.merge(right, how="left", on=on, sort=False)
    return out.drop(columns=[c for c in out.columns if c.startswith(_JOIN_PREFIX)])


def read_lookups(root: str, spec: Spec) -> tuple[list[pd.DataFrame], dict[str, int], list[str]]:
    """(each join's right side, duplicates dropped per lookup, the lookup files' URIs)."""
    dropped: dict[str, int] = {}
    rights = [_lookup(root, spec, i, dropped) for i in range(len(spec.joins))]
    return rights, dropped, [source_uri(root, spec.sources[j.source]) for j in spec.joins]


def join_lookups(df: pd.DataFrame, spec: Spec, rights: list[pd.DataFrame]) -> pd.DataFrame:
    """The spec's lookup joins (row count and order kept: lookups hold one row per key), in
    the spec's columns."""
    for join, right in zip(spec.joins, rights):
        df = join_one(df, right, list(join.on), ts_keys_of(spec, join))
    return df[list(spec.column_types())]
