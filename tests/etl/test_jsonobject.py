"""``etl.jsonobject``: a typed JSON object reads a file's keys into typed fields and writes back
what it read, key for key; a malformed file is named with the key at fault.

The records built on it (``segment.json``, ``manifest.json``, ``metrics.json``) are tested
beside their modules; this file holds the machinery to one small record of its own."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from etl.jsonobject import SCALARS, JsonObject, key, list_of, mapping_of, nested, pairs, strings


@dataclass(frozen=True, kw_only=True)
class Part(JsonObject):
    name: str = key(str, required=True)
    size: int = key(int, default=0)


@dataclass(frozen=True, kw_only=True)
class Record(JsonObject):
    title: str | None = key(str, json="old_title")  # stored under an older key
    part: Part | None = key(dict, nested(Part))
    parts: tuple[Part, ...] = key(list, list_of(Part), default=())
    by_name: dict = key(dict, mapping_of(Part), default={})
    names: tuple = key(list, strings(SCALARS), default=())
    spans: tuple = key(list, pairs(), default=())


BODY = {"old_title": "t", "part": {"name": "a", "size": 2}, "parts": [{"name": "b"}],
        "by_name": {"c": {"name": "c", "size": 1}}, "names": ["x", 1, None],
        "spans": [["20130101", "d1"]]}


def test_fields_are_typed_and_the_file_written_back_key_for_key() -> None:
    record = Record.from_json(BODY, "r.json")
    assert record.title == "t" and record.part == Part(name="a", size=2)
    assert record.parts == (Part(name="b"),) and record.by_name["c"].size == 1
    assert record.names == ("x", 1, None) and record.spans == (("20130101", "d1"),)
    assert record.to_json() == BODY and list(record.to_json()) == list(BODY)
    assert record.parts[0].to_json() == {"name": "b"}  # an absent key stays absent


def test_unknown_keys_and_nulls_survive_a_round_trip() -> None:
    body = {**BODY, "future": {"x": [1]}, "parts": None, "part": {"name": "a", "extra": True}}
    again = Record.from_json(body, "r.json").to_json()
    assert json.dumps(again, sort_keys=True) == json.dumps(body, sort_keys=True)
    assert Record.from_json(body, "r.json").parts == ()  # a null list reads empty


def test_a_writer_names_exactly_the_keys_it_writes() -> None:
    record = Record.of(title="t", parts=(Part.of(name="b"),))
    assert record.to_json() == {"old_title": "t", "parts": [{"name": "b"}]}


@pytest.mark.parametrize(("body", "message"), [
    ({"part": {"size": 1}}, r"r.json: key 'part.name': expected a string, the key is missing"),
    ({"part": {"name": None}}, r"r.json: key 'part.name': expected a string, the key is null"),
    ({"parts": [{"name": "a", "size": "2"}]},
     r"r.json: key 'parts\[0\].size': expected an integer, got '2'"),
    ({"names": [[1]]}, (r"r.json: key 'names\[0\]': expected a string or an integer or a "
                       r"number or null, got \[1\]")),
    ([], r"r.json: expected an object, got \[\]"),
])
def test_a_malformed_file_names_the_file_and_the_key(body: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Record.from_json(body, "r.json")


def test_a_mutable_default_is_refused() -> None:
    with pytest.raises(TypeError, match="shared"):
        key(list, default=[])
