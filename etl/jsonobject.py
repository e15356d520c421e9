"""Typed JSON objects: frozen dataclasses read from and written back to JSON objects, key for key.

The files a run writes and later runs, training and the UI read (a segment's ``segment.json``,
a version's ``manifest.json``, a model's ``metrics.json``, a predictions manifest) are each a
``JsonObject``: a field is named as its JSON key (or says the older key it is stored under,
``key(json=...)``); its metadata says what JSON type it holds and how a nested object is
converted (``nested``, ``mapping_of``, ``list_of``, ``strings``, ``pairs``). What a file held
is what it gives back: ``to_json`` writes the keys the object was read with (a key present
with ``null`` stays present, an absent one stays absent) and keys this code does not know
(``json_extra``) too, so an old or newer file survives a read and a write. A writer names
its keys with ``of(**fields)``: those are the keys written. A malformed file fails in
``from_json`` naming the file and the key, and what was expected.

Infrastructure, like ``etl.storage``: it knows no file of the pipeline, only JSON and
dataclasses (the records themselves live beside their writers: ``etl.versions.segment``,
``etl.versions.manifest``, ``training.record``, ``training.predictions``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

_OWN = ("json_order", "json_extra")
SCALARS = (str, int, float, type(None))  # JSON's scalars: class names, key columns, a shape


@dataclass(frozen=True)
class Codec:
    """How a field's JSON value becomes its Python value and back."""

    load: Callable[[Any, str, str], Any]  # (value, file, key path)
    dump: Callable[[Any], Any]


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "an array", str: "a string", int: "an integer",
             bool: "true or false", float: "a number", type(None): "null"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _named(at: str) -> str:
    return f"key {at!r}: " if at else ""


def _check(value: Any, kind: type | tuple[type, ...], where: str, at: str) -> Any:
    if not isinstance(value, kind):
        shown = repr(value)
        raise ValueError(  # noqa: TRY004 -- a malformed file, as json's own errors are
            f"{where}: {_named(at)}expected {_kind_name(kind)}, got "
            f"{shown[:60] + '...' if len(shown) > 60 else shown}")
    return value


def nested(cls: type[JsonObject]) -> Codec:
    return Codec(lambda v, where, at: cls.from_json(v, where, at), lambda v: v.to_json())


def mapping_of(cls: type[JsonObject]) -> Codec:
    """A JSON object of ``cls`` objects by name (splits by split name)."""
    def load(value: Any, where: str, at: str) -> dict[str, Any]:
        return {k: cls.from_json(v, where, f"{at}.{k}")
                for k, v in _check(value, dict, where, at).items()}
    return Codec(load, lambda v: {k: x.to_json() for k, x in v.items()})


def list_of(cls: type[JsonObject]) -> Codec:
    """A JSON array of ``cls`` objects, held as a tuple."""
    def load(value: Any, where: str, at: str) -> tuple[Any, ...]:
        return tuple(cls.from_json(v, where, f"{at}[{i}]")
                     for i, v in enumerate(_check(value, list, where, at)))
    return Codec(load, lambda v: [x.to_json() for x in v])


def strings(kind: type | tuple[type, ...] = str) -> Codec:
    """A JSON array of strings (or of ``kind``: class names, a shape, any value), as a tuple."""
    def load(value: Any, where: str, at: str) -> tuple[Any, ...]:
        items = _check(value, list, where, at)
        for i, item in enumerate(items):
            _check(item, kind, where, f"{at}[{i}]")
        return tuple(items)
    return Codec(load, list)


def pairs() -> Codec:
    """A JSON array of arrays (a segment's partitions: ``[key, digest]`` each), held as
    tuples; an item that is no array is kept as it is (``etl.versions.diff`` compares it)."""
    def load(value: Any, where: str, at: str) -> tuple[Any, ...]:
        return tuple(tuple(p) if isinstance(p, list) else p
                     for p in _check(value, list, where, at))
    return Codec(load, lambda v: [list(p) if isinstance(p, tuple) else p for p in v])


def key(kind: type | tuple[type, ...] = object, codec: Codec | None = None, *,
        required: bool = False, default: Any = None, json: str | None = None) -> Any:
    """A field held as a JSON key -- its own name, or ``json`` where the stored key keeps an
    older name --: ``required`` ones must be present (and not null); others default to
    ``default`` when absent (``{}``: a new empty dict)."""
    meta = {"kind": kind, "codec": codec, "required": required, "json": json}
    if required:
        return field(metadata=meta)
    if default == {}:
        return field(default_factory=dict, metadata=meta)
    if isinstance(default, (list, dict)):
        raise TypeError("a mutable default would be shared: use a tuple")
    return field(default=default, metadata=meta)


def json_key(f: dataclasses.Field) -> str:
    """The JSON key a field is stored under."""
    return f.metadata.get("json") or f.name


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


@dataclass(frozen=True, kw_only=True)
class JsonObject:
    """Base of the typed JSON objects: ``json_order`` holds the keys as read (or as a writer
    named them with ``of``), ``json_extra`` the keys this code does not know (and a null read
    where a field has an empty default, so that it is written back as null)."""

    json_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    json_extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def _keys(cls) -> dict[str, dataclasses.Field]:
        """The fields by the JSON key each is stored under."""
        return {json_key(f): f for f in dataclasses.fields(cls) if f.name not in _OWN}

    @classmethod
    def of(cls, **values: Any) -> Self:
        """An object a writer makes: exactly the keys given are written, in that order."""
        names = {f.name: k for k, f in cls._keys().items()}
        return cls(json_order=tuple(names[n] for n in values), **values)

    @classmethod
    def from_json(cls, obj: Any, where: str, at: str = "") -> Self:
        """``where``: the file named by any error; ``at``: the key path of ``obj`` in it."""
        _check(obj, dict, where, at)
        values, nulls = {}, {}
        for k, f in cls._keys().items():
            path = f"{at}.{k}" if at else k
            if k not in obj or obj[k] is None:
                if f.metadata["required"]:
                    raise ValueError(f"{where}: {_named(path)}expected "
                                     f"{_kind_name(f.metadata['kind'])}, the key is "
                                     f"{'null' if k in obj else 'missing'}")
                if k in obj and _default(f) is not None:
                    nulls[k] = None  # read as its default, written back as null
                continue
            value = _check(obj[k], f.metadata["kind"], where, path)
            codec = f.metadata["codec"]
            values[f.name] = codec.load(value, where, path) if codec else value
        known = cls._keys()
        return cls(json_order=tuple(obj), json_extra={
            **{k: v for k, v in obj.items() if k not in known}, **nulls}, **values)

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys read or named, then any field set since, then extras."""
        fields = self._keys()
        order = list(self.json_order) or [k for k, f in fields.items()
                                          if getattr(self, f.name) is not None]
        order += [k for k, f in fields.items() if k not in order
                  and getattr(self, f.name) != _default(f) and getattr(self, f.name) is not None]
        order += [k for k in self.json_extra if k not in order]
        out: dict[str, Any] = {}
        for k in order:
            f = fields.get(k)
            if f is None or (k in self.json_extra and getattr(self, f.name) == _default(f)):
                out[k] = self.json_extra[k]
                continue
            value, codec = getattr(self, f.name), f.metadata["codec"]
            out[k] = codec.dump(value) if codec is not None and value is not None else value
        return out
