"""``models/<dataset>/current.json``, the current-model pointer, as a typed record: written
by ``training.judge.current.promote`` (by a conditional write), read by the gate, the
scorer, the CLI and the UI through attributes, never by string key."""

from __future__ import annotations

from dataclasses import dataclass

from etl.jsonobject import JsonObject
from etl.jsonobject import key as json_field

CURRENT_FILE = "current.json"
_NUMBER = (int, float)


@dataclass(frozen=True, kw_only=True)
class Current(JsonObject):
    """The dataset's current model, as its pointer names it: the run, the metric it was
    promoted on and its value, and when. Keys are kept as read (``JsonObject``)."""

    dataset: str = json_field(str, required=True)
    version: str = json_field(str, required=True)
    run: str = json_field(str, required=True)
    model_uri: str = json_field(str, required=True)
    metric: str = json_field(str, required=True)
    value: float = json_field(_NUMBER, required=True)
    blessed_at: str = json_field(str, required=True)

    def names(self, version: object, run: object) -> bool:
        """Whether this pointer names the run ``run`` of ``version``."""
        return self.version == version and self.run == run
