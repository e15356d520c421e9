"""A version diff as short, aligned plain text: what ``python -m etl diff`` prints.

Kept apart from ``diff`` (the computation) so each stays one screenful of rules; the UI
renders the same ``VersionDiff`` with its own template and these formatters (``figure``,
``count``, ``signed``, ``share``, ``shift``), so the page and the CLI print each number alike.
"""

from __future__ import annotations

from etl.versions.diff import VersionDiff


def figure(x: float | None) -> str:
    """A statistic in a few significant digits, thousands separated (None: a dash)."""
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def count(n: int | None) -> str:
    """A count, thousands separated: ``257,264`` (None: a dash)."""
    return "-" if n is None else f"{n:,}"


def signed(n: int) -> str:
    """A change in a count, signed and thousands separated: ``-257,264``, ``+12``, ``0``."""
    return f"{n:+,}" if n else "0"


def share(x: float) -> str:
    """A share of the split: ``12.3%``."""
    return f"{x:.1%}"


def shift(std: float | None) -> str:
    """A mean shift in the old std: ``+0.12 std`` (None: ``n/a``)."""
    return "n/a" if std is None else f"{std:+.2f} std"


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
    lines += _table([[s.kind, s.segment, s.extent,
                      "" if s.records is None else f"{count(s.records)} records", s.why]
                     for s in d.segments])
    lines.append("rows per split:")
    lines += _table([["split", "A", "B", "change"]] + [
        [s.split, count(s.a), count(s.b), signed(s.delta)] for s in d.splits])
    lines.append("schema: " + ("unchanged" if not d.schema else f"{len(d.schema)} change(s)"))
    lines += _table([[c.kind, c.field, c.a or "-", "->", c.b or "-"] for c in d.schema])
    if d.numeric:
        lines.append("numeric (train): mean and std, A -> B; mean shift in A's std")
        lines += _table([[n.feature, figure(n.mean_a), "->", figure(n.mean_b),
                          shift(n.shift_std), figure(n.std_a), "->", figure(n.std_b)]
                         for n in d.numeric])
    if d.vocabularies:
        lines.append("vocabularies (train): size A -> B")
        lines += _table([[v.feature, count(v.size_a), "->", count(v.size_b),
                          ("+ " + ", ".join(v.added) if v.added else "")
                          + ("  - " + ", ".join(v.removed) if v.removed else "")]
                         for v in d.vocabularies])
    if d.labels:
        lines.append("labels (train): count and share, A -> B")
        lines += _table([[lab.label, count(lab.count_a), "->", count(lab.count_b),
                          share(lab.share_a), "->", share(lab.share_b)]
                         for lab in d.labels])
    return "\n".join(lines)
