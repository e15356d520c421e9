"""What the DAG files read at parse time, and nothing heavier: which specs there are (the search
path) and how each asks Airflow to run it (its scheduling and training keys).

The search path: ``PIPELINE_SPECS_PATH`` names one or more folders separated by
``os.pathsep`` (``:`` on Linux); unset or empty means the repository's examples
(``etl/examples``). Each folder holds one sub-folder per dataset, named like the dataset,
with its ``spec.yaml`` (and the files it refers to, such as the GX suite, beside it). A
dataset name found in two folders is an error naming both files: silently preferring one
would train on a spec nobody is looking at.

The settings: a spec may say how Airflow runs its dataset: ``schedule`` (a cron, ``none``
for manual runs only, or ``partitioned``: a run per raw partition announced as an Asset
event), ``start_date``, ``catchup``, ``owner``, ``tags``, ``training`` (flat
``TrainConfig.with_overrides`` names, ``min_margin`` included), ``arrival`` (``{wait: 6h,
every: 1m}``: how long a run waits for its window's late partitions, ``0`` failing at once,
and how often it lists them meanwhile), ``tune`` (``{trials: 20, minutes: 30, families: [trees,
mlp]}``: the budget of ``python -m training tune``). ``incremental`` is accepted and ignored, with a
deprecation line: every version is now built from segments. The DAG files parse every spec
on every parse, so this reads the YAML once and looks at these keys only; the full spec is
checked by ``etl.spec`` (which calls ``parse_settings`` too, so both agree on every rule).
Errors name the file and the field, like every spec error.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

SETTINGS_KEYS = ("schedule", "start_date", "catchup", "owner", "tags", "training", "incremental",
                 "arrival", "tune")
# How long a run waits for its window's partitions past the later of its interval's end and
# its start: upstream deliveries land hours late, not days.
DEFAULT_ARRIVAL_WAIT, DEFAULT_ARRIVAL_EVERY = timedelta(hours=6), timedelta(minutes=1)
_DURATION = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# TrainConfig.with_overrides names a spec may set, with (type, low, high) bounds; a test keeps
# this in step with training.config (this package may not import training).
TRAINING_KEYS: dict[str, tuple[type, float | None, float | None]] = {
    "epochs": (int, 1, None), "batch_size": (int, 1, None), "patience": (int, 1, None),
    "steps_per_epoch": (int, 1, None), "shuffle_buffer": (int, 0, None), "seed": (int, 0, None),
    "learning_rate": (float, 0, None), "dropout": (float, 0, 1), "min_margin": (float, 0, 0.5),
    "hidden_units": (list, 1, None), "one_hot_max_vocab": (int, 1, None),
    "embedding_max_dim": (int, 1, None), "step_budget": (int, 1, None),
    "min_eval_examples": (int, 1, None), "class_weights": (str, None, None),
    "lr_schedule": (str, None, None), "family": (str, None, None),
    # the budget: boosting rounds at most, a small table's k-fold (folds 0 or off: none)
    "max_rounds": (int, 1, None), "folds": (int, 0, None), "repeats": (int, 1, None),
}
# Settings that take one of a few words (training.config: CLASS_WEIGHTS, LR_SCHEDULES, FAMILIES).
TRAINING_CHOICES = {"class_weights": ("auto", "balanced", "none"),
                    "lr_schedule": ("cosine", "constant"), "family": ("auto", "trees", "mlp")}
# The tuning budget (``tune:``): the search stops at whichever of trials and minutes comes first.
TUNE_DEFAULTS: dict[str, Any] = {"trials": 20, "minutes": 30, "families": ["trees", "mlp"]}
PARTITIONED = "partitioned"  # schedule: a run per raw partition announced (an Asset event)
_CRON_FIELD = r"[0-9A-Za-z*?LW#/,-]+"
_CRON = re.compile(rf"^(@(hourly|daily|weekly|monthly|quarterly|yearly|annually|once)"
                   rf"|{_CRON_FIELD}(\s+{_CRON_FIELD}){{4}})$")
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster parsing
_DEPRECATED_SAID: set[str] = set()  # files whose `incremental` key was reported already
log = logging.getLogger("etl.spec")

SPECS_PATH_ENV = "PIPELINE_SPECS_PATH"
SPEC_FILE = "spec.yaml"
DEFAULT_SPECS_DIR = Path(__file__).resolve().parent.parent / "examples"  # etl/examples
DATASET_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class SpecNotFoundError(LookupError, ValueError):
    """No folder on the search path has a spec of that name; the message lists the folders."""

    retryable = False  # as etl.errors.PipelineError: a task's retry finds the same folders


class DuplicateSpecError(ValueError):
    """Two folders on the search path hold a spec of the same name; both paths are named."""

    retryable = False


def search_path(value: str | None = None) -> list[Path]:
    """The spec folders in search order: ``value``, else ``$PIPELINE_SPECS_PATH``, else default.

    Relative folders are taken from the current directory; empty entries are ignored.
    """
    text = os.environ.get(SPECS_PATH_ENV, "") if value is None else value
    folders = [Path(p).expanduser().resolve() for p in text.split(os.pathsep) if p.strip()]
    return folders or [DEFAULT_SPECS_DIR]


def find_specs(folders: list[Path] | None = None) -> dict[str, Path]:
    """Every dataset on the search path: ``{name: path of its spec.yaml}``, sorted by name.

    Only folder names are listed (no YAML is parsed), so this is cheap enough for every DAG
    parse. A folder on the path that does not exist is skipped (a deployment may mount it
    later); a name in two folders raises ``DuplicateSpecError``.
    """
    found: dict[str, Path] = {}
    for folder in search_path() if folders is None else folders:
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            spec = entry / SPEC_FILE
            if not (DATASET_NAME.match(entry.name) and spec.is_file()):
                continue
            if entry.name in found and found[entry.name] != spec:
                raise DuplicateSpecError(
                    f"dataset {entry.name!r} has two specs on {SPECS_PATH_ENV}: "
                    f"{found[entry.name]} and {spec}; rename or remove one")
            found[entry.name] = spec
    return dict(sorted(found.items()))


def spec_file(name: str, folders: list[Path] | None = None) -> Path:
    """The spec.yaml of dataset ``name`` on the search path, or an error listing the folders."""
    specs = find_specs(folders)
    if name not in specs:
        where = ", ".join(str(f) for f in (search_path() if folders is None else folders))
        raise SpecNotFoundError(f"no spec named {name!r}: expected {name}/{SPEC_FILE} in one of "
                                f"the spec folders [{where}] (set {SPECS_PATH_ENV})")
    return specs[name]



class SpecSettingsError(ValueError):
    """A scheduling or training key of a spec is malformed; names the file and the field."""

    retryable = False


@dataclass(frozen=True)
class DagSettings:
    """How Airflow runs one dataset; ``None`` means the spec leaves it to the deployment.

    ``schedule``: a cron, ``"none"`` (manual runs only), ``"partitioned"`` (a run per
    announced raw partition) or None (the deployment's default).
    """

    schedule: str | None = None
    start_date: datetime | None = None
    catchup: bool = False
    owner: str | None = None
    tags: tuple[str, ...] = ()
    training: dict[str, Any] = field(default_factory=dict)
    tune: dict[str, Any] = field(default_factory=dict)  # {} when the spec has no tune: block
    arrival_wait: timedelta = DEFAULT_ARRIVAL_WAIT
    arrival_every: timedelta = DEFAULT_ARRIVAL_EVERY
    kind: str = "tabular"  # the spec's ``kind``: only a tabular dataset gets a score DAG


def read_settings(path: Path) -> DagSettings:
    """The settings of the spec file at ``path``: one YAML read, scheduling keys only."""
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_SafeLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise SpecSettingsError(f"{path}: cannot read the spec: {exc}") from exc
    if not isinstance(raw, dict):
        raise SpecSettingsError(f"{path}: expected a mapping at the top level")
    return parse_settings(raw, str(path))


def parse_settings(raw: dict[str, Any], where: str) -> DagSettings:
    """Check the settings keys of a parsed spec; ``where`` (the file) prefixes every error."""
    _incremental(raw, f"{where}.incremental")
    wait, every = _arrival(raw.get("arrival"), f"{where}.arrival")
    return DagSettings(
        schedule=_schedule(raw, f"{where}.schedule"),
        start_date=_start_date(raw.get("start_date"), f"{where}.start_date"),
        catchup=_typed(raw.get("catchup", False), bool, f"{where}.catchup", "true or false"),
        owner=_text(raw.get("owner"), f"{where}.owner"),
        tags=tuple(_text(t, f"{where}.tags[{i}]") or "" for i, t in
                   enumerate(_typed(raw.get("tags") or [], list, f"{where}.tags", "a list"))),
        training=_training(raw.get("training") or {}, f"{where}.training"),
        tune=_tune(raw.get("tune"), f"{where}.tune"),
        arrival_wait=wait, arrival_every=every,
        kind=_text(raw.get("kind"), f"{where}.kind") or "tabular",
    )


def _incremental(raw: dict[str, Any], where: str) -> None:
    """``incremental`` (true or false) once chose how versions were built; every version is
    now built from segments, so the key only earns a deprecation line, once per file."""
    if "incremental" not in raw:
        return
    _typed(raw["incremental"], bool, where, "true or false")
    if where not in _DEPRECATED_SAID:
        _DEPRECATED_SAID.add(where)
        log.warning("%s is deprecated and ignored: every version is built from segments "
                    "(remove the key)", where)


def _arrival(value: Any, where: str) -> tuple[timedelta, timedelta]:
    """``arrival: {wait: 6h, every: 1m}``; a duration is seconds, or a number with s, m, h or
    d. ``wait: 0`` waits not at all; ``every`` is at least 1s."""
    if value is None:
        return DEFAULT_ARRIVAL_WAIT, DEFAULT_ARRIVAL_EVERY
    _typed(value, dict, where, "a mapping like {wait: 6h}")
    for key in value:
        if key not in ("wait", "every"):
            raise SpecSettingsError(f"{where}.{key}: unknown arrival setting; expected wait "
                                    "or every")
    wait = _duration(value.get("wait", DEFAULT_ARRIVAL_WAIT), f"{where}.wait")
    every = _duration(value.get("every", DEFAULT_ARRIVAL_EVERY), f"{where}.every")
    if every < timedelta(seconds=1):
        raise SpecSettingsError(f"{where}.every: expected at least 1s, got {value['every']!r}")
    return wait, every


def _duration(value: Any, where: str) -> timedelta:
    if isinstance(value, timedelta):
        return value
    match = None if isinstance(value, bool) else _DURATION.match(str(value).strip())
    if match is None:
        raise SpecSettingsError(f"{where}: expected a duration like 6h, 90m, 30s or 0, "
                                f"got {value!r}")
    return timedelta(seconds=int(match[1]) * _UNIT_S[match[2]])


def _typed(value: Any, kind: type, where: str, expected: str) -> Any:
    if not isinstance(value, kind):
        raise SpecSettingsError(f"{where}: expected {expected}, got {value!r}")
    return value


def _schedule(raw: dict[str, Any], where: str) -> str | None:
    if "schedule" not in raw:
        return None
    value = raw["schedule"]
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return "none"
    if isinstance(value, str) and value.strip().lower() == PARTITIONED:
        return PARTITIONED
    if not isinstance(value, str) or not _CRON.match(value.strip()):
        raise SpecSettingsError(f"{where}: expected a cron like '0 0 * * *', a preset like "
                                f"'@daily', none (manual runs only) or partitioned (a run per "
                                f"announced raw partition), got {value!r}")
    return value.strip()


def _start_date(value: Any, where: str) -> datetime | None:
    """A date or an ISO date-time; naive values are UTC, like the data intervals."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise SpecSettingsError(f"{where}: expected an ISO date like 2024-01-01, "
                                    f"got {value!r}") from exc
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise SpecSettingsError(f"{where}: expected an ISO date like 2024-01-01, got {value!r}")


def _text(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise SpecSettingsError(f"{where}: expected a non-empty string of at most 100 "
                                f"characters, got {value!r}")
    return value.strip()


def _training(d: Any, where: str) -> dict[str, Any]:
    """Flat TrainConfig overrides, type- and range-checked so a typo fails at parse time."""
    _typed(d, dict, where, f"a mapping of {sorted(TRAINING_KEYS)}")
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key not in TRAINING_KEYS:
            raise SpecSettingsError(f"{where}.{key}: unknown training setting; expected one "
                                    f"of {sorted(TRAINING_KEYS)}")
        kind, low, high = TRAINING_KEYS[key]
        if key == "folds" and value in (False, "off", 1):  # YAML reads `off` as false
            if value == 1:
                raise SpecSettingsError(f"{where}.folds: expected 0 or off (no k-fold) or an "
                                        f"int >= 2, got {value!r}")
            value = 0
        if kind is str:
            if value not in TRAINING_CHOICES[key]:
                raise SpecSettingsError(f"{where}.{key}: expected one of "
                                        f"{list(TRAINING_CHOICES[key])}, got {value!r}")
            out[key] = value
            continue
        items = value if kind is list and isinstance(value, list) and value else [value]
        if not all(_in_bounds(item, kind, low, high) for item in items) or (
                key == "learning_rate" and value == 0):
            what = "a non-empty list of integers" if kind is list else kind.__name__
            bounds = f"{'>' if key == 'learning_rate' else '>='} {low}" + (
                f" and < {high}" if high is not None else "")
            raise SpecSettingsError(f"{where}.{key}: expected {what} {bounds}, got {value!r}")
        out[key] = tuple(value) if kind is list else value
    return out


def _tune(value: Any, where: str) -> dict[str, Any]:
    """``tune: {trials: 20, minutes: 30, families: [trees, mlp]}``, the keys left out taking
    ``TUNE_DEFAULTS``; ``tune: {}`` is every default. Absent: ``{}`` (the manifest then
    carries no tune block and ``python -m training tune`` uses the defaults)."""
    if value is None:
        return {}
    _typed(value, dict, where, "a mapping like {trials: 20, minutes: 30}")
    for key in value:
        if key not in TUNE_DEFAULTS:
            raise SpecSettingsError(f"{where}.{key}: unknown tune setting; expected one of "
                                    f"{sorted(TUNE_DEFAULTS)}")
    out = {**TUNE_DEFAULTS, **value}
    if not _in_bounds(out["trials"], int, 1, None):
        raise SpecSettingsError(f"{where}.trials: expected an integer >= 1, got {out['trials']!r}")
    if not _in_bounds(out["minutes"], float, 0, None) or out["minutes"] == 0:
        raise SpecSettingsError(f"{where}.minutes: expected a number > 0, got {out['minutes']!r}")
    families = out["families"]
    allowed = TUNE_DEFAULTS["families"]
    if not isinstance(families, list) or not families or any(f not in allowed for f in families) \
            or len(set(families)) != len(families):
        raise SpecSettingsError(f"{where}.families: expected a non-empty list of {allowed} "
                                f"without repeats, got {families!r}")
    return {"trials": out["trials"], "minutes": out["minutes"], "families": list(families)}


def _in_bounds(item: Any, kind: type, low: float | None, high: float | None) -> bool:
    numeric = (int, float) if kind is float else int
    if isinstance(item, bool) or not isinstance(item, numeric):
        return False
    return (low is None or item >= low) and (high is None or item < high)
