"""One ETL run in its own process, printing rows/s and peak RSS as JSON on the last line.

A separate process per run keeps every measurement's memory apart: the peak covers this
process and its Dask worker processes, and nothing is left over from the previous run.
"""

from __future__ import annotations

import argparse
import json
import time

from etl import pipeline
from etl.cluster import PeakRSS
from etl.write.writer import ENCODERS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", required=True)
    parser.add_argument("--dataset", default="flights")
    parser.add_argument("--interval-end", default="2014-01-01T00:00:00Z")
    parser.add_argument("--encoder", choices=ENCODERS, default="vectorized")
    args = parser.parse_args()
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        result = pipeline.run(args.dataset, args.root, args.interval_end, encoder=args.encoder,
                              run_id=f"bench-{args.encoder}")
        wall = time.perf_counter() - t0
    rows = sum(result["splits"].values())
    print(json.dumps({"rows": rows, "wall_s": wall, "rows_per_s": rows / wall,
                      "peak_rss_mb": rss.peak_bytes / 2**20, "cpu_s": rss.cpu_seconds,
                      "timings": result.get("timings", {}), "encoder": args.encoder,
                      "created": result["created"], "version_uri": result["version_uri"]}))


if __name__ == "__main__":
    main()
