"""The spec sections drafted from column profiles: the label, the features, each column's
declaration and the split. Each notes what it decided, and what it left open, on the draft."""

from __future__ import annotations

from typing import Any

from etl.authoring.columns import ColumnProfile
from etl.authoring.profile import MAX_VOCAB
from etl.authoring.render import Draft, flow
from etl.spec import SpecError

# Values that name the positive class of a two-valued label (compared in lower case), and
# the draft's rule for it, printed with every drafted ``positive``.
YES_SPELLINGS = ("yes", "true", "y", "1", "positive", "success")
POSITIVE_RULE = (f"a value spelling {' / '.join(YES_SPELLINGS)} (any case), else the minority "
                 f"class")
MAX_INT_CLASSES = 10  # an integer label with at most this many values is drafted multiclass
MAX_TEXT_CLASSES = 100  # a text label with more values than this is no class label


def label_section(profiles: dict[str, ColumnProfile], col: str, task: str | None,
                  draft: Draft) -> dict:
    """The label block; its task is ``task``, or inferred from the values when None."""
    prof, name = profiles[col], "label" if "label" not in profiles else f"{col}_label"
    if task is None:
        task = infer_task(prof, col, draft)
    if task == "binary":
        return {"name": name, "source": col, "task": task, **_binary(prof, col, name, draft)}
    if task == "regression" and not prof.numeric:
        raise SpecError(f"--label {col!r}: regression needs a numeric column, {col!r} is "
                        f"{prof.type}")
    if task == "multiclass":
        seen = f" (seen: {list(prof.values)})" if prof.values else ""
        draft.decide.append(f"label.classes: the draft takes the classes from the rows' values"
                            f"{seen}; list them to fix them (a value outside them fails the run)")
    else:
        draft.decide.append(f"label.transform: none drafted; log1p suits a skewed, non-negative "
                            f"{col!r} (the model still returns values in its units)")
    return {"name": name, "source": col, "task": task}


def infer_task(prof: ColumnProfile, col: str, draft: Draft) -> str:
    """The task a label's values suggest (``spec init`` without ``--task``), said on the draft:
    two values -> binary; text, or integers with at most ``MAX_INT_CLASSES`` values ->
    multiclass; other numbers -> regression."""
    whole = prof.type == "int64" or prof.numeric and all(
        float(v).is_integer() for v in prof.counts) and bool(prof.counts)
    if prof.distinct == 2:
        task, why = "binary", "holds two values"
    elif not prof.numeric:
        if prof.distinct > MAX_TEXT_CLASSES:
            raise SpecError(f"--label {col!r}: {prof.distinct:,} distinct text values are too "
                            f"many to be classes (at most {MAX_TEXT_CLASSES} are drafted); name "
                            f"the task: --task binary|multiclass|regression")
        task, why = "multiclass", f"holds {prof.distinct} text values"
    elif whole and prof.distinct <= MAX_INT_CLASSES:
        task, why = "multiclass", (f"holds {prof.distinct} whole numbers (at most "
                                   f"{MAX_INT_CLASSES} are drafted as classes)")
    else:
        task, why = "regression", (f"holds {prof.distinct:,} numeric values (more than "
                                   f"{MAX_INT_CLASSES} whole numbers, or fractions)")
    draft.inferred.append(f"task: {task}, since {col!r} {why}; --task overrides it")
    return task


def _binary(prof: ColumnProfile, col: str, name: str, draft: Draft) -> dict[str, Any]:
    """``positive`` for a two-valued column (by ``POSITIVE_RULE``); a numeric one with more
    values is cut at its median; text with more values is refused naming both ways out."""
    counts = {_typed(prof, v): n for v, n in prof.counts.items()}
    if prof.distinct == 2 and prof.numeric and any(isinstance(v, str) for v in counts):
        draft.inferred.append(f"label {name} = ({col} == {prof.high:g}) (two values seen, "
                              f"not whole numbers)")
        return {"op": "eq", "value": prof.high}
    if prof.distinct == 2 and len(counts) == 2:
        yes = [v for v in counts if str(v).lower() in YES_SPELLINGS]
        if len(yes) == 1:
            positive, why = yes[0], f"it spells {str(yes[0]).lower()!r}"
        else:
            positive = min(counts, key=lambda v: (counts[v], str(v)))
            why = f"the minority class, {counts[positive]:,} of {sum(counts.values()):,} rows"
        draft.inferred.append(f"label: positive class {positive!r} of {col!r} ({why}; the "
                              f"rule: {POSITIVE_RULE}); the model returns its probability; "
                              f"set label.positive to choose the other")
        return {"positive": positive}
    if not prof.numeric or prof.distinct < 2:
        shown = ", ".join(repr(v) for v in list(counts)[:10]) + (", ..." if prof.distinct > 10
                                                                  else "")
        raise SpecError(f"--label {col!r}: --task binary needs two values, {col!r} holds "
                        f"{prof.distinct:,} ({shown}); name the positive ones against the rest "
                        f"in the spec (label: {{source: {col}, positive: [a, b]}}) or use "
                        f"--task multiclass")
    mid = prof.median
    draft.decide.append(f"label: the draft says {col} > {mid:g} (the median of the rows read, so "
                        f"classes are about even); choose the threshold (label.op, value)")
    return {"op": "gt", "value": mid}


def _typed(prof: ColumnProfile, value: str) -> str | int:
    """A profiled value as the spec writes it: a whole number as an int, else the text."""
    if prof.numeric and float(value).is_integer():
        return int(float(value))
    return value


# The calendar features a timestamp's period needs: the year and the day of the year for
# any; the day of the week for daily and hourly data; the hour of the day for hourly data.
CALENDAR = {"month": ("year", "day_of_year"),
            "day": ("year", "day_of_year", "day_of_week"),
            "hour": ("year", "day_of_year", "day_of_week", "hour_of_day")}
PERIOD_WORDS = {"month": "on months' 1sts (monthly or coarser)", "day": "dates (daily)",
                "hour": "times of day (hourly or finer)"}


def features_section(profiles: dict[str, ColumnProfile], skip: set[str], draft: Draft) -> list[dict]:
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
            ops = CALENDAR[p.period or "day"]
            feats += [{"name": f"{p.name}_{op}", "kind": "numeric", "fill": "mean",
                       "derive": {"op": op, "columns": [p.name]}} for op in ops]
            draft.inferred.append(f"features {', '.join(f'{p.name}_{op}' for op in ops)}: "
                                  f"derived from the timestamp {p.name!r}, whose values are "
                                  f"{PERIOD_WORDS[p.period or 'day']} (trend and season"
                                  + (", the week's cycle" if "day_of_week" in ops else "")
                                  + (", the day's cycle" if "hour_of_day" in ops else "")
                                  + "); drop any you do not want")
        else:
            draft.decide.append(f"column {p.name!r} (id-like or free text) is not a feature; "
                                f"derive one from it if useful")
    return feats


def column_section(p: ColumnProfile, draft: Draft) -> str | dict[str, str]:
    """A column's declared type; a timestamp in a non-ISO format carries its format, and a
    header that is not an identifier is kept as the column's ``source``."""
    decl = {"type": p.type}
    if p.time_format is not None:
        decl["format"] = p.time_format
        draft.inferred.append(f"column {p.name!r}: timestamps like {p.time_format!r} (every "
                              f"value read parses with it)")
    if p.source != p.name:
        decl["source"] = p.source
    return decl if len(decl) > 1 else p.type


def split_section(name: str, task: str | None, groups: list[str], shares: dict[str, float],
           draft: Draft) -> dict[str, Any]:
    """Fractions and salt; ``by: row`` without a unique key; stratified (a regression: spread
    evenly; a hash split's spread left a 125-row table 16 test rows of an expected 25); a
    repeated id column as ``group_by``, commented out: a sample cannot say whether rows sharing
    an id would leak, and grouping coarsens the fractions and rules out ``stratify``."""
    split: dict[str, Any] = {"fractions": shares, "salt": f"{name}-v1"}
    if not draft.unique_key:
        split["by"] = "row"
        draft.inferred.append("split.by: row (no unique key: each row's content decides its "
                              "split)")
    if task in ("binary", "multiclass"):
        split["stratify"] = True
        draft.inferred.append("split.stratify: true (every class reaches every split)")
    elif task == "regression":
        split["stratify"] = True
        draft.inferred.append("split.stratify: true (the rows spread evenly: each split gets "
                              "its share within a row)")
    drop = ", and drop stratify," if split.get("stratify") else ""
    if groups:
        draft.split_comment = (f"  # group_by: {flow(groups)}  # uncomment{drop} to keep each "
                               f"{groups[0]}'s rows in one split")
        draft.decide.append(f"split.group_by: drafted commented out as {groups}, an id column "
                            f"repeated over rows (not a feature); uncomment it{drop} if rows "
                            f"sharing an id must not be split apart (leakage)")
    elif not draft.unique_key:
        draft.decide.append("split.group_by: list columns whose rows must share a split "
                            "(e.g. one patient's visits) if leakage between them matters")
    return split
