"""Ray Data: ``read_csv`` over the landed files -> ``write_tfrecords``, on a local Ray started
with WORKERS CPUs. Prints one JSON line when done.

Timestamps are read as text (STRING_COLUMNS, comma-separated): ``write_tfrecords`` refuses
Arrow timestamps.

Usage: python ray_data.py FILE_LIST_JSON OUT_DIR WORKERS [STRING_COLUMNS]
"""

import json
import sys
import time


def main() -> None:
    with open(sys.argv[1]) as fh:
        files = json.load(fh)
    out_dir, workers = sys.argv[2], int(sys.argv[3])
    t0 = time.perf_counter()
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import ray
    import ray.data

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    t1 = time.perf_counter()
    text = [c for c in (sys.argv[4] if len(sys.argv) > 4 else "").split(",") if c]
    convert = pa_csv.ConvertOptions(column_types={c: pa.string() for c in text})
    ray.data.read_csv(files, convert_options=convert).write_tfrecords(out_dir)
    t2 = time.perf_counter()
    ray.shutdown()
    print(json.dumps({"start_s": t1 - t0, "pipeline_s": t2 - t1,
                      "examples_glob": f"{out_dir}/*", "compression": None}))


if __name__ == "__main__":
    main()
