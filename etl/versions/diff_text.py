"""A version diff as short, aligned plain text: what ``python -m etl diff`` prints.

Kept apart from ``diff`` (the computation) so each stays one screenful of rules; the UI
renders the same ``VersionDiff`` with its own template.
"""

from __future__ import annotations

from etl.versions.diff import VersionDiff


def _num(x: float) -> str:
    """A statistic in a few significant digits, thousands separated."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Left-aligned first column, right-aligned the rest."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def format_diff(d: VersionDiff) -> str:
    """The diff as short, aligned plain text (what ``python -m etl diff`` prints)."""
    counts = {k: len(d.by_kind(k)) for k in ("added", "rebuilt", "dropped")}
    lines = [f"{d.dataset}: {d.a} -> {d.b}",
             (f"segments: {d.segments_kept} kept, {counts['added']} added, "
              f"{counts['rebuilt']} rebuilt, {counts['dropped']} dropped")]
    lines += _table([[s.kind, s.segment, s.label,
                      "" if s.records is None else f"{s.records:,} records", s.why]
                     for s in d.segments])
    lines.append("rows per split:")
    lines += _table([["split", "A", "B", "change"]] + [
        [s.split, f"{s.a:,}", f"{s.b:,}", f"{s.delta:+,}"] for s in d.splits])
    lines.append("schema: " + ("unchanged" if not d.schema else f"{len(d.schema)} change(s)"))
    lines += _table([[c.kind, c.field, c.a or "-", "->", c.b or "-"] for c in d.schema])
    if d.numeric:
        lines.append("numeric (train): mean and std, A -> B; mean shift in A's std")
        lines += _table([[n.feature, _num(n.mean_a), "->", _num(n.mean_b),
                          "n/a" if n.shift_std is None else f"{n.shift_std:+.2f} std",
                          _num(n.std_a), "->", _num(n.std_b)] for n in d.numeric])
    if d.vocabularies:
        lines.append("vocabularies (train): size A -> B")
        lines += _table([[v.feature, f"{v.size_a:,}", "->", f"{v.size_b:,}",
                          ("+ " + ", ".join(v.added) if v.added else "")
                          + ("  - " + ", ".join(v.removed) if v.removed else "")]
                         for v in d.vocabularies])
    if d.labels:
        lines.append("labels (train): count and share, A -> B")
        lines += _table([[lab.label, f"{lab.count_a:,}", "->", f"{lab.count_b:,}",
                          f"{lab.share_a:.1%}", "->", f"{lab.share_b:.1%}"]
                         for lab in d.labels])
    return "\n".join(lines)
