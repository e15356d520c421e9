"""Turn manifests and metrics into display rows; render model cards as safe HTML.

Kept apart from the web layer so the formatting rules (what a "key metric" is, how a
manifest reads) are plain functions with plain tests. Nothing here emits raw HTML
except ``render_markdown``, whose renderer has HTML pass-through disabled.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from etl.jsonobject import JsonObject
from etl.versions import Manifest, SplitInfo
from etl.versions.segment import Statistics

if TYPE_CHECKING:
    from training.record import ModelRecord

MAX_FLAT_ROWS = 200
MAX_VOCAB_SHOWN = 20
MAX_LIST_SHOWN = 50
MAX_SOURCE_FILES_SHOWN = 50
MAX_RAW_JSON_CHARS = 200_000
MAX_EXPECTATIONS_SHOWN = 500
MAX_OBSERVED_CHARS = 160
# Binary, multi-class and regression runs (training/tasks.py): each shows the ones it has.
KEY_METRIC_NAMES = ("auc", "accuracy", "macro_f1", "rmse", "mae", "r2", "loss")
KEY_METRIC_SCOPES = ("test", "eval", "")
# Run ids Airflow itself generates; anything else (a CLI run) has no page to link to.
_AIRFLOW_RUN_ID = re.compile(r"^(manual|scheduled|backfill|asset_triggered|dataset_triggered)__")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_MD.enable("table")


def human_bytes(n: Any) -> str:
    """1536 -> '1.5 KiB'; non-numbers are shown as they are."""
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "–" if n is None else str(n)
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"


def fmt(value: Any) -> str:
    """Numbers with separators / 4 significant digits; None as a dash; the rest as text."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        if abs(value) >= 1000:
            return f"{value:,.0f}" if abs(value) >= 1e5 or value.is_integer() else f"{value:,.1f}"
        return f"{value:.4g}" if value == 0 or abs(value) >= 1e-3 else f"{value:.3e}"
    return str(value)


def metric(value: Any) -> str:
    """A metric with 4 significant digits, trailing zeros kept so a column reads evenly
    (``0.8000`` beside ``0.7674``, ``AUC 1.000``); very large or small ones as ``fmt`` has them."""
    if isinstance(value, float) and not (math.isnan(value) or math.isinf(value)) and (
            value == 0 or 1e-3 <= abs(value) < 1e4):
        return f"{value:#.4g}".rstrip(".")
    return fmt(value)


def wrap_class(value: Any) -> str:
    """The CSS class of a stored value that may wrap anywhere: ``uri`` for a URI or path,
    ``id`` for another long unspaced token (a run id); "" for figures and words."""
    if not isinstance(value, str) or " " in value.strip():
        return ""
    if "://" in value or "/" in value:
        return "uri"
    return "id" if len(value) > 24 else ""


# Where a version or run id may wrap: after each "_", and inside a timestamp before its time
# ("T14:40:43") and its offset ("+00:00"), so no piece is longer than a date-time's parts.
_ID_BREAKS = re.compile(r"(?<=_)|(?<=-\d\d)(?=T\d)|(?=\+\d\d:?\d\d)")


def breakable(value: Any) -> Markup:
    """A long id (version, run id): may wrap only between its pieces (``<wbr>`` added, text
    escaped), never inside a number (``id pieces``: no wrapping anywhere, issue 41 item 8)."""
    pieces = [escape(p) for p in _ID_BREAKS.split(str(value))]
    return Markup('<span class="id pieces">{}</span>').format(
        Markup("<wbr>").join(p for p in pieces if p))


def breakable_ids(text: Any) -> Markup:
    """Plain text whose long ids (a run or version id inside a sentence: a token with ``_``,
    over 16 characters) may wrap like ``breakable``; every other word stays whole."""
    out = []
    for token in re.split(r"(\s+)", str(text)):
        long_id = "_" in token and len(token) > 16 and not token.isspace()
        out.append(breakable(token) if long_id else escape(token))
    return Markup("").join(out)


def when(value: Any) -> str:
    """ISO timestamps (or datetimes) as ``2013-01-03 00:00 UTC``; anything unparsable is
    shown as stored."""
    if isinstance(value, datetime):
        ts = value
    elif not isinstance(value, str) or not value:
        return fmt(value)
    else:
        try:
            ts = datetime.fromisoformat(value)
        except ValueError:
            return value
    if ts.tzinfo is not None and ts.utcoffset() == timedelta(0):
        return ts.strftime("%Y-%m-%d %H:%M UTC") if ts.second == 0 else ts.strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    return ts.isoformat(sep=" ")


def when_span(value: Any) -> Markup:
    """``when`` as the date and the time, each in a span that never wraps (Chrome breaks a
    date after its hyphens): a narrow column wraps between the two, never inside either."""
    text = when(value)
    date, _, time = text.partition(" ")
    if not time or not re.fullmatch(r"\d{4}-\d\d-\d\d", date):
        return Markup('<span class="when">{}</span>').format(text)
    return Markup('<span class="when-pair"><span class="when">{}</span> '
                  '<span class="when">{}</span></span>').format(date, time)


def flatten(obj: Any, prefix: str = "", limit: int = MAX_FLAT_ROWS) -> list[tuple[str, Any]]:
    """Nested dicts -> ``[("a.b", scalar), ...]``; lists are summarised, rows capped."""
    rows: list[tuple[str, Any]] = []

    def walk(value: Any, key: str) -> None:
        if len(rows) >= limit:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(value, list) and not value:
            rows.append((key, "none"))
        elif isinstance(value, list):
            if all(not isinstance(v, (dict, list)) for v in value):  # e.g. class names
                more = f", … ({len(value):,} in all)" if len(value) > MAX_LIST_SHOWN else ""
                rows.append((key, ", ".join(fmt(v) for v in value[:MAX_LIST_SHOWN]) + more))
            else:
                rows.append((key, f"[{len(value)} items]"))
        else:
            rows.append((key, value))

    walk(obj, prefix)
    return rows


def key_metrics(record: ModelRecord | None, k: int = 4) -> list[tuple[str, Any]]:
    """The few numbers a reader wants first (AUC, accuracy, macro-F1, RMSE, MAE, R², loss, as
    the run's task has them), preferring test over eval."""
    if record is None:
        return []
    chosen: list[tuple[str, Any]] = []
    numeric = [(key, v) for key, v in flatten(record.to_json(), limit=2000)
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for name in KEY_METRIC_NAMES:
        best: tuple[int, str, Any] | None = None
        for key, value in numeric:
            parts = re.split(r"[._/ ]", key.lower())
            if name not in (parts[-1], key.lower().rsplit(".", 1)[-1]) or "baseline" in parts:
                continue
            rank = next(i for i, scope in enumerate(KEY_METRIC_SCOPES) if not scope or scope in parts)
            if best is None or rank < best[0]:
                best = (rank, key, value)
        if best:
            chosen.append(best[1:])
    return chosen[:k]


def dag_run_target(manifest: Manifest, dataset: str) -> tuple[str, str] | None:
    """``(dag_id, run_id)`` of the Airflow run that produced the version, when there is one."""
    run_id = manifest.run_id
    if not isinstance(run_id, str) or not run_id:
        return None
    dag_id = manifest.dag_id
    if isinstance(dag_id, str) and dag_id:
        return dag_id, run_id
    return (f"etl_{dataset}", run_id) if _AIRFLOW_RUN_ID.match(run_id) else None


SPLIT_ORDER = ("train", "eval", "validation", "test")


def ordered_splits(splits: Mapping[str, SplitInfo]) -> list[tuple[str, SplitInfo]]:
    """Splits as train, eval, test, then any others by name (manifests store them sorted)."""
    rank = {name: i for i, name in enumerate(SPLIT_ORDER)}
    names = sorted(splits, key=lambda n: (rank.get(n, len(rank)), n))
    return [(n, splits[n]) for n in names]


def version_summary(manifest: Manifest) -> dict[str, Any]:
    """The listing columns of a version: interval, records per split, shards, bytes, checks."""
    splits = ordered_splits(manifest.splits)
    validation, interval = manifest.verdict, manifest.interval
    return {
        "start": interval.start, "end": interval.end,
        "records": {name: s.num_examples for name, s in splits},
        "shards": manifest.num_shards, "bytes": manifest.num_bytes, "valid": validation.success,
        "quarantined": validation.quarantined_rows, "evaluated": validation.evaluated_rows,
        "data_docs": validation.data_docs, "created_at": manifest.created_at,
        "segments": len(manifest.segments),
    }


KNOWN_MANIFEST_KEYS = frozenset({
    "format_version", "dataset", "version", "data_interval", "created_at", "run_id", "dag_id",
    "code_version", "compression", "splits", "schema", "statistics", "source_fingerprint",
    "validation", "layout", "segments"})


def other_fields(manifest: Manifest) -> list[tuple[str, Any]]:
    """Manifest keys this UI has no section for, flattened, so nothing stored is hidden."""
    return flatten({k: v for k, v in manifest.to_json().items() if k not in KNOWN_MANIFEST_KEYS})


def expectation_rows(found: list | None) -> list[dict[str, Any]]:
    """The validation summary's per-expectation results, failures first, capped."""
    if not isinstance(found, list):
        return []
    rows = []
    for item in found[:MAX_EXPECTATIONS_SHOWN]:
        if not isinstance(item, dict):
            continue
        observed = item.get("observed_value")
        figure = isinstance(observed, (int, float)) and not isinstance(observed, bool)
        text = observed if isinstance(observed, str) else fmt(observed) if figure or \
            observed is None else json.dumps(observed, default=str)
        if len(text) > MAX_OBSERVED_CHARS:
            text = text[:MAX_OBSERVED_CHARS] + "…"
        rows.append({**{k: item.get(k) for k in
                        ("expectation", "level", "success", "unexpected_count", "element_count")},
                     "observed": text, "figure": figure})
    return sorted(rows, key=lambda r: r["success"] is not False)


def _day(name: str) -> str:
    """A partition's name as a reader writes it: 20130101 -> 2013-01-01 (others unchanged)."""
    text = str(name)
    if len(text) >= 8 and text[:8].isdigit():
        return f"{text[:4]}-{text[4:6]}-{text[6:8]}{text[8:].replace('T', ' ')}"
    return text


def segment_rows(manifest: Manifest) -> list[dict[str, Any]]:
    """The version's segments in window order: id, the partitions they hold, records."""
    rows = []
    for seg in manifest.segments:
        keys = [p[0] for p in seg.partitions if p] or str(seg.extent or "").split("_")
        first, last = _day(keys[0]), _day(keys[-1])
        rows.append({"segment": seg.segment, "records": seg.records,
                     "partitions": len(seg.partitions) or None,
                     "range": first if first == last else f"{first} – {last}"})
    return rows


def shard_rows(manifest: Manifest) -> list[dict[str, Any]]:
    """Every shard as a row: split, file (under its segment's folder, if any), records,
    bytes, sha256."""
    rows = []
    for split, info in ordered_splits(manifest.splits):
        for shard in info.shards:
            where = f"segments/{shard.segment}/" if shard.segment else ""
            rows.append({"split": split, "records": shard.records, "bytes": shard.bytes,
                         "sha256": shard.sha256, "file": f"{where}{shard.file}"})
    return rows


def schema_rows(manifest: Manifest) -> list[dict[str, Any]]:
    """Features with dtype/kind/extra (shape, encoding) and their train statistics."""
    stats = manifest.statistics or Statistics()
    rows = []
    for name, feature in (manifest.schema.features if manifest.schema else {}).items():
        extra = {k: v for k, v in feature.to_json().items() if k not in ("dtype", "kind")}
        vocab = stats.vocabularies.get(name)
        rows.append({
            "name": name, "dtype": feature.dtype, "kind": feature.kind,
            "extra": ", ".join(f"{k}={v}" for k, v in extra.items()),
            "stats": stats.numeric.get(name),
            "vocab_size": len(vocab) if isinstance(vocab, (list, dict)) else None,
            "vocab": _vocab_preview(vocab),
        })
    return rows


def _vocab_preview(vocab: Any) -> str:
    if isinstance(vocab, dict):
        vocab = list(vocab)
    if not isinstance(vocab, list):
        return ""
    shown = ", ".join(str(v) for v in vocab[:MAX_VOCAB_SHOWN])
    return shown + (f", … (+{len(vocab) - MAX_VOCAB_SHOWN})" if len(vocab) > MAX_VOCAB_SHOWN else "")


def raw_json(value: Any) -> str:
    """Pretty JSON for a <pre> block, cut at a bound so a huge manifest cannot stall a page."""
    if isinstance(value, JsonObject):  # a manifest, a model record
        value = value.to_json()
    text = json.dumps(value, indent=2, sort_keys=True, default=str)
    if len(text) > MAX_RAW_JSON_CHARS:
        return text[:MAX_RAW_JSON_CHARS] + f"\n… ({len(text) - MAX_RAW_JSON_CHARS:,} more chars)"
    return text


def render_markdown(text: str, image_url: Callable[[str], str] | None = None) -> Markup:
    """Model card Markdown -> HTML with raw HTML disabled (it is shown as text).

    markdown-it escapes text and attributes and refuses javascript:/vbscript:/data: links.
    Relative image paths are rewritten through ``image_url`` so plots next to the card load
    from storage via the app.
    """
    tokens = _MD.parse(text)
    for token in _walk(tokens):
        if token.type == "image" and image_url is not None:
            src = str(token.attrGet("src") or "")
            if src and not _SCHEME.match(src) and not src.startswith("/"):
                token.attrSet("src", image_url(src.removeprefix("./")))
    return Markup(_MD.renderer.render(tokens, _MD.options, {}))


def _walk(tokens: list[Any]) -> Iterator[Any]:
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)
