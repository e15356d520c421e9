"""A draft (``Draft``) and its spec.yaml text: the decisions as comments on top, nested
sections in block style, the rest one line each; writing both files without overwriting a spec."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from etl.spec import SpecError


@dataclass
class Draft:
    """What ``spec init`` writes and prints."""

    name: str
    spec: dict[str, Any]
    suite: dict[str, Any]
    read: str = ""  # what was read: every row, or a sample
    inferred: list[str] = field(default_factory=list)  # what was decided, and why
    decide: list[str] = field(default_factory=list)
    unique_key: bool = False
    split_comment: str = ""  # a commented-out line under ``split:`` (a group_by to opt into)
    tokens_comment: str = ""  # beside read.null_values: which tokens, found where


def render_spec(draft: Draft) -> str:
    """spec.yaml text: the drafted spec with the open decisions as comments on top."""
    head = ["# Drafted by `python -m etl spec init`: check every value, then run",
            f"#   python -m etl spec check {draft.name}", f"# Read: {draft.read}",
            "# Decided:", *(f"#  - {line}" for line in draft.inferred), "# Still to decide:",
            *(f"#  - {line}" for line in draft.decide)]
    body = ""
    for key, value in draft.spec.items():  # nested sections in block style, the rest one-line
        if key == "features":
            body += "features:\n" + "".join(f"  - {flow(f)}\n" for f in value)
        elif key in ("sources", "split"):
            text = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False,
                                  allow_unicode=True, width=1000)
            if key == "sources" and draft.tokens_comment:
                text = text.replace("null_values:\n", f"null_values:  # {draft.tokens_comment}\n", 1)
            body += text
            body += f"{draft.split_comment}\n" if key == "split" and draft.split_comment else ""
        else:
            body += f"{key}: {flow(value)}\n"
    return "\n".join(head) + "\n" + body


def flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1000)
    return text.strip().removesuffix("...").strip()


def write_draft(draft: Draft, out_dir: Path, *, force: bool = False) -> tuple[Path, Path]:
    """Write ``<out_dir>/spec.yaml`` and ``expectations.json``; never over a spec unless forced."""
    spec_file = out_dir / "spec.yaml"
    suite_file = out_dir / "expectations.json"
    if not force and (spec_file.exists() or suite_file.exists()):
        raise SpecError(f"{out_dir}: a spec is already there; use --force to replace it")
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(render_spec(draft), encoding="utf-8")
    suite_file.write_text(json.dumps(draft.suite, indent=2) + "\n", encoding="utf-8")
    return spec_file, suite_file
