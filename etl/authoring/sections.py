"""The spec sections drafted from column profiles: the label, the features, each column's
declaration and the split. Each notes what it decided, and what it left open, on the draft."""

from __future__ import annotations

from typing import Any

from etl.authoring.columns import ColumnProfile
from etl.authoring.profile import MAX_VOCAB
from etl.authoring.render import Draft, flow
from etl.spec import SpecError


def label_section(profiles: dict[str, ColumnProfile], col: str, task: str, draft: Draft) -> dict:
    prof, name = profiles[col], "label" if "label" not in profiles else f"{col}_label"
    if task == "binary":
        if not prof.numeric:
            raise SpecError(f"--label {col!r}: a binary label compares a numeric column with a "
                            f"value, but {col!r} holds {prof.type}; use --task multiclass")
        if prof.distinct == 2:
            draft.inferred.append(f"label {name} = ({col} == {prof.high:g}) (two values seen)")
            return {"name": name, "source": col, "op": "eq", "value": prof.high}
        mid = prof.median
        draft.decide.append(f"label: the draft says {col} > {mid:g} (the median of the rows read, so "
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
            feats += [{"name": f"{p.name}_{op}", "kind": "numeric", "fill": "mean",
                       "derive": {"op": op, "columns": [p.name]}} for op in ("year", "day_of_year")]
            draft.inferred.append(f"features {p.name}_year, {p.name}_day_of_year: derived from the "
                                  f"timestamp {p.name!r} (trend and season)")
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
    """Fractions and salt; ``by: row`` without a unique key; stratified for a class label; a
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
    drop = ", and drop stratify," if task in ("binary", "multiclass") else ""
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
