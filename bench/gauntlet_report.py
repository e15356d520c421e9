"""The gauntlets' targets and rows in the bench table: the picked gauntlet's (issue 33's "done
means", one row per table) and the drawn one's (issue 39's, per seed: the summary and the misses
grouped by cause; every pair with ``python -m bench.drawn --show``)."""

from __future__ import annotations

from typing import Any

MIN_TABLES, MIN_PACKAGES, MIN_SHARE = 20, 4, 0.90
# issue 39: the drawn gauntlet's corpus, draws and targets per seed
DRAWN_SEEDS, MIN_PAIRS, MIN_CORPUS, MIN_CORPUS_PACKAGES = (1, 2), 100, 1000, 20
DRAWN_BUDGET_S = 90 * 60


def checks(r: dict[str, Any]) -> list[tuple[str, str, float | None, float, str]]:
    """(name, figure, value, target, op) of each gauntlet target; no gauntlet: all None."""
    s = (r.get("gauntlet") or {}).get("summary") or {}
    tables = s.get("tables")
    flights = s.get("flights_auc") or {}
    auc = (flights["model"] / flights["reference"]
           if flights.get("model") is not None and flights.get("reference") else None)
    return [
        (f"gauntlet: >= {MIN_TABLES} public tables (issue 33)", "gauntlet.summary.tables",
         tables, MIN_TABLES, ">="),
        (f"gauntlet: tables from >= {MIN_PACKAGES} packages", "gauntlet.summary.packages",
         len(s["packages"]) if s.get("packages") else None, MIN_PACKAGES, ">="),
        (f"gauntlet: >= {MIN_SHARE:.0%} blessed within 5% of the HistGradientBoosting reference",
         "gauntlet.summary.blessed_within_5pct_share", s.get("blessed_within_5pct_share"),
         MIN_SHARE, ">="),
        ("gauntlet: no table ends in a traceback", "len(gauntlet.summary.tracebacks)",
         len(s["tracebacks"]) if tables else None, 0, "<="),
        ("gauntlet: flights' test AUC >= the reference's on the same split",
         "gauntlet flights model / reference AUC", auc, 1.0, ">="),
        *drawn_checks(r),
    ]


def drawn_checks(r: dict[str, Any]) -> list[tuple[str, str, float | None, float, str]]:
    """Issue 39's targets: the corpus, then per seed the pairs, the share blessed within 5%
    (or counted apart), the median ratio, tracebacks; both seeds within 90 minutes."""
    d = r.get("drawn") or {}
    census, seeds = d.get("corpus") or {}, d.get("seeds") or {}
    out = [(f"drawn: corpus of >= {MIN_CORPUS:,} eligible tables (issue 39)",
            "drawn.corpus.eligible_tables", census.get("eligible_tables"), MIN_CORPUS, ">="),
           (f"drawn: eligible tables from >= {MIN_CORPUS_PACKAGES} packages",
            "drawn.corpus.eligible_packages", census.get("eligible_packages"),
            MIN_CORPUS_PACKAGES, ">=")]
    for seed in DRAWN_SEEDS:
        s = (seeds.get(str(seed)) or {}).get("summary") or {}
        key = f"drawn.seeds.{seed}.summary"
        out += [
            (f"drawn seed {seed}: >= {MIN_PAIRS} pairs", f"{key}.pairs", s.get("pairs"),
             MIN_PAIRS, ">="),
            ((f"drawn seed {seed}: >= {MIN_SHARE:.0%} blessed within 5% of the reference or "
              "not blessed where the reference does not beat the baseline either"),
             f"{key}.blessed_or_apart_share", s.get("blessed_or_apart_share"), MIN_SHARE, ">="),
            ((f"drawn seed {seed}: the median pair's ratio to the reference >= 1.0 (a pair "
              "without a model counts 0)"), f"{key}.median_ratio", s.get("median_ratio"), 1.0,
             ">="),
            (f"drawn seed {seed}: no pair ends in a traceback", f"len({key}.tracebacks)",
             len(s["tracebacks"]) if s else None, 0, "<=")]
    timed = [seeds.get(str(k), {}).get("seconds") for k in DRAWN_SEEDS]
    out.append(("drawn: both seeds within 90 minutes", "sum(drawn.seeds.*.seconds)",
                sum(timed) if None not in timed else None, DRAWN_BUDGET_S, "<="))
    return out


def _f(value: Any, fmt: str = ".3f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _secs(step: Any) -> str:
    return _f(step.get("seconds"), ".1f") if isinstance(step, dict) else "n/a"


def _metric(t: dict[str, Any]) -> tuple[str, str, str, str]:
    """(metric, model, reference, ratio) -- the table's deciding metric."""
    if t["task"] == "regression":
        names = ["rmse"]
    else:
        names = [m for m in ("auc", "accuracy") if m in (t.get("reference") or {})]
    name = names[0] if names else ("rmse" if t["task"] == "regression" else "accuracy")
    model, ref = (t.get("model") or {}).get(name), (t.get("reference") or {}).get(name)
    ratio = (t.get("ratios") or {}).get(name)
    return name, _f(model), _f(ref), _f(ratio, ".2f")


def _verdict(t: dict[str, Any]) -> str:
    v = t["verdict"]
    text = v["status"] + (f" at {v['step']}" if v.get("step") else "")
    why = v.get("message") or v.get("reason")
    if why:
        text += ": " + why.replace("|", "/")[:160]
    return text


def rows(r: dict[str, Any]) -> list[str]:
    """A markdown table, one row per gauntlet table, after a blank line; none without one."""
    tables = ((r.get("gauntlet") or {}).get("tables")) or {}
    if not tables:
        return []
    lines = ["", ("| gauntlet table | package | rows | task | metric | model | reference | "
             "ratio | verdict | spec init s | ETL read s | etl run s | training s |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, t in tables.items():
        metric, model, ref, ratio = _metric(t)
        read = t.get("etl_read") or {}
        lines.append(
            f"| {name} | {t['package']} | {_f(t.get('rows'), ',')} | {t['task']} | {metric} | "
            f"{model} | {ref} | {ratio} | {_verdict(t)} | {_secs(t.get('spec_init'))} | "
            f"{_f(read.get('seconds'), '.2f')} | {_secs(t.get('etl_run'))} | "
            f"{_secs(t.get('training'))} |")
    return lines


def _pair_row(p: dict[str, Any]) -> str:
    """One drawn pair: what was drawn, the figures, the verdict and where a step failed."""
    ratio = _f(p.get("ratio"), ".2f")
    ref = (p.get("reference_gate") or {}).get("beats_baseline")
    metric, model, refv, _ = _metric(p)
    return (f"| {p['index']} | {p['table']} | {p['label']} | {p['task']} | {p['format']} | "
            f"{_f(p.get('source_rows'), ',')} | {metric} | {model} | {refv} | {ratio} | "
            f"{'n/a' if ref is None else 'yes' if ref else 'no'} | {_verdict(p)} | "
            f"{_f(p.get('seconds'), '.0f')} |")


def drawn_rows(r: dict[str, Any], pairs: bool = False) -> list[str]:
    """Per seed: its summary line and its misses grouped by cause (with an example pair);
    ``pairs``: every pair too. None without a drawn part."""
    d = r.get("drawn") or {}
    if not d.get("seeds"):
        return []
    c = d.get("corpus") or {}
    lines = ["", (f"Drawn gauntlet (issue 39): corpus {_f(c.get('tables'), ',')} tables from "
                  f"{_f(c.get('packages'), ',')} packages, {_f(c.get('eligible_tables'), ',')} "
                  f"eligible from {_f(c.get('eligible_packages'), ',')} packages; "
                  f"{_f((d.get('rules') or {}).get('pair_budget_s'), '.0f')} s per pair"), "",
             ("| seed | pairs | blessed within 5% | counted apart | share | median ratio (with "
              "a model) | tracebacks | by status | seconds (workers) |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for seed, draw in d["seeds"].items():
        s = draw.get("summary") or {}
        status = ", ".join(f"{k} {v}" for k, v in (s.get("by_status") or {}).items())
        lines.append(
            f"| {seed} | {s.get('pairs')} | {len(s.get('blessed_within_5pct', []))} | "
            f"{len(s.get('counted_apart', []))} | {_f(s.get('blessed_or_apart_share'), '.0%')} | "
            f"{_f(s.get('median_ratio'), '.3f')} ({_f(s.get('median_ratio_with_model'), '.3f')})"
            f" | {len(s.get('tracebacks', []))} | {status} | {_f(draw.get('seconds'), '.0f')} "
            f"({draw.get('workers')}) |")
    lines += ["", ("| seed | misses by cause (counted apart: the reference fails the gate too) "
              "| pairs | e.g. |"), "| --- | --- | --- | --- |"]
    for seed, draw in d["seeds"].items():
        s = draw.get("summary") or {}
        for key, note in (("misses_by_cause", ""), ("apart_by_cause", "counted apart: ")):
            for why, who in (s.get(key) or {}).items():
                lines.append(f"| {seed} | {note}{why.replace('|', '/')} | {len(who)} | "
                             f"{who[0]} |")
    if pairs:
        for seed, draw in d["seeds"].items():
            lines += ["", f"Seed {seed}:", "", ("| # | table | label | task | format | rows | "
                      "metric | model | reference | ratio | reference beats baseline | verdict "
                      "| s |"), "| --- " * 13 + "|"]
            lines += [_pair_row(p) for p in draw.get("pairs", [])]
    return lines
