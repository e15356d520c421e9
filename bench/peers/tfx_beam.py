"""TFX's path on Beam's DirectRunner: CsvExampleGen (CSV -> tf.Examples -> TFRecords), then
StatisticsGen (TFDV statistics), SchemaGen and ExampleValidator (validation against a schema),
run by TFX's LocalDagRunner as its users would. Prints one JSON line when done.

Usage: python tfx_beam.py RAW_DIR PATTERN OUT_DIR WORKERS
"""

import json
import sys
import time


def main() -> None:
    raw_dir, pattern, out_dir, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    t0 = time.perf_counter()
    from tfx import v1 as tfx

    t_import = time.perf_counter() - t0
    gen = tfx.components.CsvExampleGen(
        input_base=raw_dir,
        input_config=tfx.proto.Input(splits=[tfx.proto.Input.Split(name="all", pattern=pattern)]))
    stats = tfx.components.StatisticsGen(examples=gen.outputs["examples"])
    schema = tfx.components.SchemaGen(statistics=stats.outputs["statistics"])
    check = tfx.components.ExampleValidator(statistics=stats.outputs["statistics"],
                                            schema=schema.outputs["schema"])
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="bench", pipeline_root=f"{out_dir}/root",
        components=[gen, stats, schema, check],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            f"{out_dir}/metadata.sqlite"),
        beam_pipeline_args=["--runner=DirectRunner", "--direct_running_mode=multi_processing",
                            f"--direct_num_workers={workers}"])
    t1 = time.perf_counter()
    tfx.orchestration.LocalDagRunner().run(pipeline)
    print(json.dumps({"import_s": t_import, "pipeline_s": time.perf_counter() - t1,
                      "examples_glob": f"{out_dir}/root/CsvExampleGen/examples/*/Split-*/*.gz",
                      "compression": "GZIP"}))


if __name__ == "__main__":
    main()
