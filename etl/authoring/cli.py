"""``python -m etl spec init|check``: argument parsing and printing; the work is in
``etl.authoring.draft`` and ``etl.authoring.check``, imported only when a command runs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from etl.authoring import DEFAULT_BUDGET_BYTES
from etl.spec.scheduling import SPECS_PATH_ENV, search_path


def add_spec_parser(sub: argparse._SubParsersAction, default_root: str, help_text: str) -> None:
    """The ``spec`` command and its ``init`` / ``check`` subcommands."""
    spec = sub.add_parser("spec", help=help_text)
    cmds = spec.add_subparsers(dest="spec_command", required=True)
    p = cmds.add_parser("init", help="draft spec.yaml + expectations.json from a raw file")
    p.add_argument("--name", required=True, help="dataset name (lowercase, digits, _)")
    p.add_argument("--source", required=True,
                   help="a CSV / Parquet / JSON-lines file: a URI (file://, gs://), a local "
                        "path, or a path inside the storage root")
    p.add_argument("--label", default=None, help="the column to predict (else: decide later)")
    p.add_argument("--task", choices=("binary", "multiclass", "regression"), default=None,
                   help="default: inferred from the label's values (two values: binary; text "
                        "or a few whole numbers: multiclass; else regression), said on output")
    p.add_argument("--format", choices=("csv", "parquet", "jsonl"), default=None,
                   help="default: from the file's suffix")
    p.add_argument("--out", default=None,
                   help=f"folder to write into (default: <first folder of ${SPECS_PATH_ENV}>"
                        f"/<name>)")
    p.add_argument("--root", default=os.environ.get("PIPELINE_STORAGE_ROOT", default_root),
                   help="storage root for relative --source paths")
    p.add_argument("--budget-mib", type=float, default=DEFAULT_BUDGET_BYTES / 2**20,
                   help="profile every row of every file up to this many MiB of raw files; "
                        "beyond, a uniform sample of blocks from all files (default "
                        f"{DEFAULT_BUDGET_BYTES // 2**20})")
    p.add_argument("--margin", type=float, default=0.1,
                   help="widen the ranges seen by this share of their span (default 0.1)")
    p.add_argument("--force", action="store_true", help="replace an existing draft")
    p = cmds.add_parser("check", help="validate a spec and its GX suite without running the ETL")
    p.add_argument("spec", help="dataset name on the specs search path, or a spec.yaml path")


def run_spec(args: argparse.Namespace) -> int:
    """Run ``spec init`` or ``spec check``; 0 on success, 1 when the spec has problems."""
    if args.spec_command == "check":
        from etl.authoring.check import check_spec

        report = check_spec(args.spec)
        for line in report.summary:
            print(line)
        for problem in report.problems:
            print(f"error: {problem}")
        print("ok" if report.ok else f"{len(report.problems)} problem(s) in {args.spec}")
        return 0 if report.ok else 1
    from etl.authoring.draft import DraftOptions, draft_spec
    from etl.authoring.render import write_draft

    draft = draft_spec(DraftOptions(
        name=args.name, source=args.source, root=args.root, label=args.label, task=args.task,
        fmt=args.format, margin=args.margin, budget_bytes=int(args.budget_mib * 2**20)))
    out = Path(args.out) if args.out else search_path()[0] / args.name
    spec_file, suite_file = write_draft(draft, out, force=args.force)
    print(f"Read: {draft.read}")
    print("Decided:")
    for line in draft.inferred:
        print(f"  - {line}")
    print("Still to decide:")
    for line in draft.decide:
        print(f"  - {line}")
    print(f"wrote {spec_file}\nwrote {suite_file}\nnext: python -m etl spec check {spec_file}")
    return 0
