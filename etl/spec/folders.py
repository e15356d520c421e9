"""The specs search path: which folders hold ``<name>/spec.yaml``, and which spec a name means.

``PIPELINE_SPECS_PATH`` names one or more folders separated by ``os.pathsep`` (``:`` on
Linux); unset or empty means the repository's examples (``etl/examples``). Each folder holds one
sub-folder per dataset, named like the dataset, with its ``spec.yaml`` (and the files it
refers to, such as the GX suite, beside it). A dataset name found in two folders is an error
naming both files: silently preferring one would train on a spec nobody is looking at.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SPECS_PATH_ENV = "PIPELINE_SPECS_PATH"
SPEC_FILE = "spec.yaml"
DEFAULT_SPECS_DIR = Path(__file__).resolve().parent.parent / "examples"  # etl/examples
DATASET_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class SpecNotFoundError(LookupError, ValueError):
    """No folder on the search path has a spec of that name; the message lists the folders."""


class DuplicateSpecError(ValueError):
    """Two folders on the search path hold a spec of the same name; both paths are named."""


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
