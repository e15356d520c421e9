"""What changed between two versions of a dataset, from their manifests alone.

``diff_manifests(a, b)`` is a pure function of two manifests: the segments B added, rebuilt
(partitions an A segment held, under a new id: raw data re-delivered, merged by compaction,
cut to B's narrower window, or rebuilt by new code) and dropped (left the window); rows per
split; schema changes; statistic deltas (numeric mean/std, vocabulary sizes, label counts). The CLI (``python -m etl diff``) prints
``diff_text.format_diff``'s text or the result's ``to_json``; the UI's diff page renders
the same result. No shard is read, so a diff of two years of data costs two small reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from etl.errors import NoVersionError
from etl.versions.catalog import list_versions
from etl.versions.manifest import Manifest, SegmentEntry
from etl.versions.segment import FeatureSchema, LabelSchema, Schema, Statistics

ALIASES = ("latest", "previous")  # the newest published version, the one before it
MAX_TOKENS = 5  # vocabulary tokens listed per side


@dataclass(frozen=True)
class SegmentChange:
    """One segment on one side: ``kind`` added | rebuilt | dropped; ``why`` for a rebuilt one;
    ``replaces``: the A segments whose partitions it now holds."""

    segment: str
    kind: str
    extent: str  # the segment's extent: its raw partitions, 20130101_20130131
    records: int | None
    why: str = ""
    replaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class SplitRows:
    split: str
    a: int
    b: int

    @property
    def delta(self) -> int:
        return self.b - self.a


@dataclass(frozen=True)
class SchemaChange:
    """``kind`` added | removed | changed; ``a``/``b``: the field's type as text."""

    field: str
    kind: str
    a: str = ""
    b: str = ""


@dataclass(frozen=True)
class NumericDelta:
    """A numeric feature's train-split moments on each side; ``shift_std``: the mean's move
    in A's standard deviations (None when A's std is 0)."""

    feature: str
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    shift_std: float | None


@dataclass(frozen=True)
class VocabDelta:
    feature: str
    size_a: int
    size_b: int
    added: tuple[str, ...]  # most frequent first, MAX_TOKENS at most
    removed: tuple[str, ...]


@dataclass(frozen=True)
class LabelDelta:
    label: str
    count_a: int
    count_b: int
    share_a: float
    share_b: float


@dataclass(frozen=True)
class VersionDiff:
    """Everything ``diff_manifests`` found; ``to_json`` for machines."""

    dataset: str
    a: str
    b: str
    segments_kept: int
    segments: tuple[SegmentChange, ...]
    splits: tuple[SplitRows, ...]
    schema: tuple[SchemaChange, ...]
    numeric: tuple[NumericDelta, ...]
    vocabularies: tuple[VocabDelta, ...]
    labels: tuple[LabelDelta, ...]

    def by_kind(self, kind: str) -> list[SegmentChange]:
        return [s for s in self.segments if s.kind == kind]

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["splits"] = [{**s, "delta": s["b"] - s["a"]} for s in out["splits"]]
        return out



def resolve_pair(root: str, dataset: str, a: str, b: str) -> tuple[str, str]:
    """Version ids for ``a`` and ``b`` (ids, ``latest`` or ``previous``); only published ones.

    ``latest`` is the newest published version and ``previous`` the one before it, in the
    one order of versions (``list_versions``: ``version_key``), as LATEST and the UI have them.

    Raises:
        NoVersionError: names what was asked and the published versions there are.
    """
    published = list_versions(root, dataset)
    named = {"latest": published[-1:], "previous": published[-2:-1]}

    def one(name: str) -> str:
        found = named[name] if name in ALIASES else [v for v in published if v == name]
        if not found:
            listing = ", ".join(published[-5:]) or "none"
            raise NoVersionError(f"{dataset}: no published version {name!r} (published, newest "
                                 f"last: {listing}; or use latest / previous)")
        return found[0]

    return one(a), one(b)


def diff_manifests(a: Manifest, b: Manifest) -> VersionDiff:
    """What changed from version ``a`` to version ``b`` (manifests as read)."""
    kept, changes = _segments(a, b)
    return VersionDiff(
        dataset=str(b.dataset), a=str(a.version), b=str(b.version),
        segments_kept=kept, segments=tuple(changes), splits=tuple(_splits(a, b)),
        schema=tuple(_schema(a.schema, b.schema)),
        numeric=tuple(_numeric(_stats(a), _stats(b))),
        vocabularies=tuple(_vocabs(_stats(a), _stats(b))),
        labels=tuple(_labels(_stats(a), _stats(b))))


def _stats(m: Manifest) -> Statistics:
    return m.statistics or Statistics()


def _parts(seg: SegmentEntry) -> dict[str, str]:
    """partition key -> digest of the raw data it was built from."""
    out = {}
    for p in seg.partitions:
        if isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str):
            out[p[0]] = str(p[1])
        else:  # a kind whose partitions are not (key, digest) pairs: the whole entry is both
            text = json.dumps(p, sort_keys=True)
            out[text] = text
    return out or {str(seg.extent): str(seg.segment)}


def _segments(a: Manifest, b: Manifest) -> tuple[int, list[SegmentChange]]:
    """(segments in both, the changes): a B-only segment holding partitions that an A-only
    one held is rebuilt; the rest of B-only is added, the rest of A-only dropped."""
    sa = {s.segment: s for s in a.segments}
    sb = {s.segment: s for s in b.segments}
    only_a = {k: v for k, v in sa.items() if k not in sb}
    owner = {key: seg for seg, s in only_a.items() for key in _parts(s)}
    digest_a = {key: d for s in only_a.values() for key, d in _parts(s).items()}
    out, claimed = [], set()
    for seg, s in sb.items():
        if seg in sa:
            continue
        parts = _parts(s)
        replaces = sorted({owner[k] for k in parts if k in owner})
        if not replaces:
            out.append(SegmentChange(seg, "added", str(s.extent), s.records))
            continue
        claimed.update(replaces)
        redelivered = sorted(k for k in parts if k in digest_a and digest_a[k] != parts[k])
        held = {k for r in replaces for k in _parts(only_a[r])}
        why = (f"raw data changed: {', '.join(redelivered)}" if redelivered
               else f"B's window holds {len(parts)} of the {len(held)} partitions "
                    f"{'they' if len(replaces) > 1 else 'it'} held (same raw data)"
               if set(parts) < held
               else f"compacted from {len(replaces)} segments" if len(replaces) > 1
               else "same raw data, rebuilt (new code, spec or format)")
        out.append(SegmentChange(seg, "rebuilt", str(s.extent), s.records,
                                 why, tuple(replaces)))
    out += [SegmentChange(seg, "dropped", str(s.extent), s.records)
            for seg, s in only_a.items() if seg not in claimed]
    return len(set(sa) & set(sb)), out


def _splits(a: Manifest, b: Manifest) -> list[SplitRows]:
    order = {"train": 0, "eval": 1, "validation": 1, "test": 2}
    names = sorted(set(a.splits) | set(b.splits), key=lambda s: (order.get(s, 3), s))
    return [SplitRows(s, a.split(s).num_examples, b.split(s).num_examples) for s in names]


def _type(feature: FeatureSchema | LabelSchema) -> str:
    """A feature's type as one short text: dtype, kind, shape, encoding, classes."""
    bits = [str(feature.dtype or "?")]
    if isinstance(feature, FeatureSchema):
        if feature.kind:
            bits.append(feature.kind)
        if feature.shape:
            bits.append("x".join("?" if d is None else str(d) for d in feature.shape))
        if feature.encoding:
            bits.append(feature.encoding)
    elif feature.classes is not None:
        bits.append(f"{feature.classes} classes")
    return " ".join(bits)


def _types(schema: Schema | None) -> dict[str, str]:
    """Every feature's type, and the label's, by name."""
    if schema is None:
        return {}
    out = {n: _type(f) for n, f in schema.features.items()}
    out[f"{schema.label.name} (label)"] = _type(schema.label)
    return out


def _schema(a: Schema | None, b: Schema | None) -> list[SchemaChange]:
    fa, fb = _types(a), _types(b)
    out = [SchemaChange(n, "added", b=fb[n]) for n in sorted(set(fb) - set(fa))]
    out += [SchemaChange(n, "removed", a=fa[n]) for n in sorted(set(fa) - set(fb))]
    out += [SchemaChange(n, "changed", fa[n], fb[n]) for n in sorted(set(fa) & set(fb))
            if fa[n] != fb[n]]
    ka, kb = (list(s.key_columns) if s else [] for s in (a, b))
    if ka != kb:
        out.append(SchemaChange("(key)", "changed", ", ".join(map(str, ka)),
                                ", ".join(map(str, kb))))
    return out


def _numeric(a: Statistics, b: Statistics) -> list[NumericDelta]:
    na, nb = a.numeric, b.numeric
    out = []
    for col in sorted(set(na) & set(nb)):
        sa, sb = math.sqrt(max(float(na[col].var), 0.0)), math.sqrt(max(float(nb[col].var), 0.0))
        ma, mb = float(na[col].mean), float(nb[col].mean)
        out.append(NumericDelta(col, ma, mb, sa, sb, (mb - ma) / sa if sa > 0 else None))
    return out


def _vocabs(a: Statistics, b: Statistics) -> list[VocabDelta]:
    va, vb = a.vocabularies, b.vocabularies
    out = []
    for col in sorted(set(va) & set(vb)):
        old, new = list(va[col]), list(vb[col])
        added = [t for t in new if t not in set(old)][:MAX_TOKENS]
        removed = [t for t in old if t not in set(new)][:MAX_TOKENS]
        out.append(VocabDelta(col, len(old), len(new), tuple(map(str, added)),
                              tuple(map(str, removed))))
    return out


def _labels(a: Statistics, b: Statistics) -> list[LabelDelta]:
    ca = {str(k): int(v) for k, v in a.label_counts.items()}
    cb = {str(k): int(v) for k, v in b.label_counts.items()}
    ta, tb = sum(ca.values()) or 1, sum(cb.values()) or 1
    keys = list(ca) + [k for k in cb if k not in ca]
    return [LabelDelta(k, ca.get(k, 0), cb.get(k, 0), ca.get(k, 0) / ta, cb.get(k, 0) / tb)
            for k in keys]

