"""Command line for the ETL: the same functions the Airflow tasks call.

    python -m etl land     --root file:///tmp/x --dataset flights
    python -m etl run      --root file:///tmp/x --dataset flights --interval-end 2014-01-01
    python -m etl versions --root file:///tmp/x --dataset flights
    python -m etl show     --root file:///tmp/x --dataset flights [--version latest]
    python -m etl diff     --root file:///tmp/x --dataset flights previous latest [--json]
    python -m etl retain   --root file:///tmp/x --dataset flights --keep 3
    python -m etl gc       --root file:///tmp/x --dataset flights [--apply]
    python -m etl spec init --name wine --source raw/wine/wine.csv --label cultivar
    python -m etl spec check wine

Specs are found by name in the folders of $PIPELINE_SPECS_PATH (default: etl/examples).

``run`` does what the spec's ETL DAG does, for every kind of dataset: build the window's
missing segments and the version's draft, then publish it. Its two steps are also their own
subcommands (``build`` prints the URI ``publish --written-uri`` takes). ``--root`` defaults to
$PIPELINE_STORAGE_ROOT.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from etl.pipeline import RunOptions

DEFAULT_ROOT = f"file://{Path(__file__).resolve().parent.parent / '.data'}"


def _common(p: argparse.ArgumentParser, root: bool = True) -> None:
    if root:
        p.add_argument("--root", default=os.environ.get("PIPELINE_STORAGE_ROOT", DEFAULT_ROOT),
                       help="storage root URI, file://... or gs://bucket/prefix "
                            "(default: $PIPELINE_STORAGE_ROOT or ./.data)")
    p.add_argument("--dataset", default="flights", help="spec name on $PIPELINE_SPECS_PATH or "
                                                         "a path to a spec.yaml (default: flights)")


def _interval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interval-end", required=True,
                   help="end of the data interval, exclusive (ISO, UTC): 2014-01-01")
    p.add_argument("--interval-start", default=None,
                   help="start, inclusive; default: unbounded (everything landed before end)")
    p.add_argument("--run-id", default=None, help="run id (keys the staging folder and lock)")
    p.add_argument("--force", action="store_true",
                   help="publish a new -rN revision even if the interval's version exists")
    p.add_argument("--source-uri", default=None,
                   help="override the primary source's URI pattern (relative to the root)")
    p.add_argument("--dask-address", default=None,
                   help="dask scheduler (default: $PIPELINE_DASK_ADDRESS, else a LocalCluster)")


def _build_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=("quarantine", "strict"), default="quarantine")
    p.add_argument("--shard-bytes", type=int, default=None,
                   help="target bytes per shard (default: the spec's, 128 MiB)")
    p.add_argument("--compression", choices=("gzip", "none"), default=None,
                   help="shard compression (default: the spec's)")


SPEC_HELP = "draft a spec from raw data (init) or check one (check)"


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line; ``spec``'s own arguments come from ``etl.authoring.cli``, imported
    only when ``argv`` asks for that command (a run does not author)."""
    parser = argparse.ArgumentParser(prog="python -m etl", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logs, libraries at their own levels (default: a summary "
                             "line per step, libraries at WARNING)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("land", help="copy a dataset's upstream files (spec: upstream) to raw/")
    _common(p)
    p.add_argument("--start-day", default=None, help="land flights from this day (2013-01-01)")
    p.add_argument("--end-day", default=None, help="... up to this day, exclusive")
    p.add_argument("--scale", type=int, default=1,
                   help="repeat flights N times with shifted flight numbers (memory tests)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace landed files whose content differs")
    p = sub.add_parser("run", help="build and publish one interval's version")
    _common(p)
    _interval(p)
    _build_opts(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON only")
    p = sub.add_parser("build", help="build the interval's missing segments and the version's "
                                     "draft (then: publish)")
    _common(p)
    _interval(p)
    _build_opts(p)
    p = sub.add_parser("publish", help="write the manifest of a built version")
    p.add_argument("--written-uri", required=True, help="the URI build printed")
    p = sub.add_parser("versions", help="list complete versions, oldest first")
    _common(p)
    p = sub.add_parser("show", help="print a version's manifest summary and shards")
    _common(p)
    p.add_argument("--version", default="latest")
    p.add_argument("--json", action="store_true", help="print the whole manifest")
    p = sub.add_parser("diff", help="what changed between two versions: segments, rows per "
                                    "split, schema, statistics")
    _common(p)
    p.add_argument("a", help="the older version: an id, latest or previous")
    p.add_argument("b", help="the newer version: an id, latest or previous")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p = sub.add_parser("retain", help="delete all but the newest N versions")
    _common(p)
    p.add_argument("--keep", type=int, required=True)
    p.add_argument("--force", action="store_true",
                   help="also delete versions that a model under models/ was trained on")
    p = sub.add_parser("gc", help="list (with --apply: delete) leftovers of dead runs: temp "
                                  "files, drafts, unpublished folders, staging")
    _common(p)
    p.add_argument("--apply", action="store_true", help="delete them (default: only list)")
    p.add_argument("--staging-stale-hours", type=float, default=12.0,
                   help="staging of a run with no live lease and no write for this long is "
                        "dead (default: 12, above the DAG's 8 h run timeout)")
    if "spec" in (sys.argv[1:] if argv is None else argv):
        from etl.authoring.cli import add_spec_parser

        add_spec_parser(sub, DEFAULT_ROOT, SPEC_HELP)
    else:
        sub.add_parser("spec", help=SPEC_HELP)
    return parser


def _gc(args: argparse.Namespace) -> int:
    from etl.pipeline.gc import collect_garbage

    spec_name = args.dataset
    if spec_name.endswith((".yaml", ".yml")):
        from etl.kinds import kind_of

        spec_name = kind_of(spec_name).load_spec(spec_name).name
    report = collect_garbage(args.root, spec_name, apply=args.apply,
                             staging_stale_s=args.staging_stale_hours * 3600)
    verb = "removed" if args.apply else "would remove"
    for item in report.leftovers:
        print(f"{verb} {item.uri}  ({item.why})")
    for item in report.kept:
        print(f"kept {item.uri}  ({item.why})")
    print(f"{len(report.leftovers)} leftover(s) {verb.split()[-1] if args.apply else 'found'}"
          + ("" if args.apply or not report.leftovers else "; run again with --apply to delete"))
    return 0


def _show(root: str, dataset: str, version: str, as_json: bool) -> None:
    from etl import versions
    from etl.versions.manifest import format_shards

    version_uri = versions.resolve(root, dataset, version)
    manifest = versions.read_manifest(version_uri)
    if as_json:
        print(json.dumps(manifest.to_json(), indent=2))
        return
    print(f"version URI: {version_uri}")
    interval, val = manifest.interval, manifest.verdict
    print(f"interval: [{interval.start or 'unbounded'}, {interval.end})  run: "
          f"{manifest.run_id}  code: {manifest.code_version}")
    print(f"validation: success={val.success} evaluated={val.evaluated_rows} "
          f"quarantined={val.quarantined_rows}")
    print(format_shards(manifest))


def _diff(args: argparse.Namespace) -> None:
    """The diff of two published versions, as text or JSON (``etl.versions.diff``)."""
    from etl import versions
    from etl.versions import diff, diff_text

    a, b = diff.resolve_pair(args.root, args.dataset, args.a, args.b)
    result = diff.diff_manifests(
        *(versions.read_manifest(versions.version_uri(args.root, args.dataset, v))
          for v in (a, b)))
    print(json.dumps(result.to_json(), indent=2) if args.json
          else diff_text.format_diff(result))


def _options(args: argparse.Namespace) -> RunOptions:
    """The run's options from its flags (the spec's settings where a flag is absent)."""
    from etl.pipeline import RunOptions

    return RunOptions(mode=args.mode, shard_bytes=args.shard_bytes,
                      compression=args.compression, force=args.force,
                      source_uri=args.source_uri, dask_address=args.dask_address)


def _run(args: argparse.Namespace) -> int:
    from etl import pipeline, versions
    from etl.versions.manifest import format_shards

    result = pipeline.run(args.dataset, args.root, args.interval_end, args.interval_start,
                          args.run_id, _options(args))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return 0
    manifest = versions.read_manifest(result.version_uri)
    state = "published" if result.created else "already published (nothing written)"
    print(f"{state}: {result.version_uri}")
    print(format_shards(manifest))
    rows = result.rows
    if result.created and result.wall_s:
        print(f"{rows} examples in {result.wall_s:.1f} s = {rows / result.wall_s:,.0f} "
              f"rows/s end to end; steps: {json.dumps(dict(result.timings or {}))}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    from etl import logs

    if args.verbose:
        logs.verbose()
    logs.configure(logging.DEBUG if args.verbose else logging.INFO)
    from etl import pipeline, versions
    from etl.errors import PipelineError

    try:
        if args.command == "land":
            from etl.kinds import land
            from etl.kinds.landing import LandOptions, parse_day

            report = land(args.root, args.dataset, LandOptions(
                start=parse_day(args.start_day) if args.start_day else None,
                end=parse_day(args.end_day) if args.end_day else None,
                scale=args.scale, overwrite=args.overwrite))
            print(f"{report.raw_uri}: {len(report.written)} written, {len(report.unchanged)} "
                  f"unchanged, {len(report.replaced)} replaced; {report.rows:,} {report.unit}")
        elif args.command == "run":
            return _run(args)
        elif args.command == "spec":
            from etl.authoring.cli import run_spec

            return run_spec(args)
        elif args.command == "build":
            print(pipeline.build_version(args.dataset, args.root, args.interval_end,
                                         args.interval_start, args.run_id, _options(args)))
        elif args.command == "publish":
            print(json.dumps(pipeline.publish(args.written_uri).to_json(), indent=2))
        elif args.command == "versions":
            latest = versions.latest_version(args.root, args.dataset)
            for v in versions.list_versions(args.root, args.dataset):
                print(f"{v}{'  (latest)' if v == latest else ''}")
        elif args.command == "show":
            _show(args.root, args.dataset, args.version, args.json)
        elif args.command == "diff":
            _diff(args)
        elif args.command == "gc":
            return _gc(args)
        elif args.command == "retain":
            for v in versions.retain(args.root, args.dataset, args.keep, force=args.force):
                print(f"deleted {v}")
    except (PipelineError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
