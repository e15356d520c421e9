"""etl.logs: libraries at WARNING wherever pipeline code runs; a summary line per step.

The Great Expectations case runs in a fresh interpreter with the root logger at INFO, as in an
Airflow task: GX logs its "Skipping registering function" records while it is imported, so the
test shows both the cause (they appear without the setup) and the fix.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from etl import logs

REPO = Path(__file__).resolve().parents[2]
IMPORT_GX = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout)  # Airflow's root: INFO
if sys.argv[1] == "configured":
    from etl import logs
    logs.configure(handler=False)
import great_expectations  # noqa: F401
"""


@pytest.fixture
def restore_levels():
    names = (*logs.QUIET_LOGGERS, *logs.ROUTINE_WARNINGS, *logs.OWN_LOGGERS, "")
    saved = {n: logging.getLogger(n).level for n in names}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    logs._applied.clear()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("setup", ["bare", "configured"])
def test_great_expectations_import_chatter_is_gone_once_configured(setup: str) -> None:
    proc = subprocess.run([sys.executable, "-c", IMPORT_GX, setup], cwd=REPO, text=True,
                          capture_output=True, timeout=220, check=True)
    chatter = proc.stdout.count("Skipping registering function")
    if setup == "bare":
        assert chatter > 100  # the cause: GX's import-time INFO records
    else:
        assert chatter == 0, proc.stdout[-2000:]


def test_configure_sets_levels_and_reapply_restores_them(restore_levels: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(logs.LIBRARY_LEVEL_ENV, raising=False)
    logs.configure(handler=False)
    assert logging.getLogger("great_expectations").level == logging.WARNING
    assert logging.getLogger("etl").level == logging.INFO
    assert logging.getLogger("distributed.shuffle._scheduler_plugin").level == logging.ERROR
    logging.getLogger("distributed").setLevel(logging.INFO)  # what `import distributed` does
    logs.reapply()
    assert logging.getLogger("distributed").level == logging.WARNING


def test_verbose_leaves_library_levels_alone(restore_levels: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(logs.LIBRARY_LEVEL_ENV, "NOTSET")
    logging.getLogger("gcsfs").setLevel(logging.DEBUG)
    logs.configure(logging.DEBUG, handler=False)
    assert logging.getLogger("gcsfs").level == logging.DEBUG


NATIVE_MODULE = r'''
import os
os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
os.write(2, b"I0000 00:00:1795430789.269408    8179 port.cc:153] oneDNN custom operations are on.\n")
os.write(2, b"W0000 00:00:1795430789.270020    8179 gpu_device.cc:2344] Cannot dlopen some GPU libraries.\n")
os.write(2, b"E0000 00:00:1795430789.342553    8179 cuda_platform.cc:52] failed call to cuInit\n")
'''


@pytest.mark.parametrize("level, driver, kept", [
    ("", True, ["W0000", "E0000"]),  # absl's INFO records and its notice are dropped
    ("", False, ["W0000"]),  # no NVIDIA driver: the failed cuInit says only "no GPU here"
    ("NOTSET", False, ["WARNI", "I0000", "W0000", "E0000"]),  # debugging: everything
])
def test_import_quietly_keeps_native_info_lines_out_of_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture,
        restore_levels: None, level: str, driver: bool, kept: list[str]) -> None:
    """What a C++ library writes to fd 2 while imported: INFO goes, warnings and errors stay."""
    (tmp_path / "native_chatter.py").write_text(NATIVE_MODULE)
    (tmp_path / "nvidia-version").write_text("NVRM version: 550\n")
    monkeypatch.setattr(logs, "NVIDIA_DRIVER", str(tmp_path / ("nvidia-version" if driver else "none")))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(logs.LIBRARY_LEVEL_ENV, level)
    monkeypatch.delitem(sys.modules, "native_chatter", raising=False)
    logs._applied.clear()
    capfd.readouterr()
    assert logs.import_quietly("native_chatter").__name__ == "native_chatter"
    lines = capfd.readouterr().err.splitlines()
    assert [line[:5] for line in lines] == kept, lines
    assert logs.import_quietly("native_chatter") is sys.modules["native_chatter"]


TF_FIRST_GPU_QUERY = """
import logging, sys
from etl import logs
logs.configure(logging.INFO)
tf = logs.import_quietly("tensorflow")
print("gpus", len(tf.config.list_physical_devices("GPU")), file=sys.stderr)
"""


@pytest.mark.timeout(240)
def test_tensorflow_on_a_cpu_only_machine_logs_no_cuinit_error() -> None:
    """The real TensorFlow: its first GPU query happens inside import_quietly, so a machine
    without an NVIDIA driver gets no "failed call to cuInit ... (303)" line; a GPU machine
    gets its GPUs and no error either."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-c", TF_FIRST_GPU_QUERY], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=200, check=True)
    assert "cuInit" not in proc.stderr and "oneDNN" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("gpus "), proc.stderr


CPU_FALLBACK = (b"E0000 00:00:1795552812.527179    9390 util.cc:131] oneDNN supports DT_INT32 only "
                b"on platforms with AVX-512. Falling back to the default Eigen-based implementation.")
GRAPPLER_SORT = (b"E0000 00:00:1795937018.686729   16706 dependency_optimizer.cc:773] Iteration = 0, "
                 b"topological sort failed with message: The graph couldn't be sorted in "
                 b"topological order.")
AFTER_IMPORT = f"""
import logging, os
from etl import logs
logs.configure(logging.INFO)
logs.import_quietly("tensorflow")
os.write(2, {CPU_FALLBACK!r} + b"\\n")  # as TensorFlow writes it at a fit's first int32 op
os.write(2, {GRAPPLER_SORT!r} + b"\\n")  # grappler, on the trees' walk loop
os.write(2, b"E0000 00:00:1795552812.6    9390 dependency_optimizer.cc:9] another failure\\n")
os.write(2, b"E0000 00:00:1795552812.6    9390 other.cc:1] a real error\\n")
raise ValueError("the last words of a failed run")
"""


@pytest.mark.timeout(240)
def test_tensorflow_cpu_fallback_notice_is_filtered_and_errors_still_pass() -> None:
    """After TensorFlow's import, a machine without an NVIDIA driver drops the oneDNN/AVX-512
    fallback "error" and grappler's "topological sort failed" (every training logged it,
    issue 51) from stderr; real errors, another line of the same optimizer and a Python
    traceback still get through."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-c", AFTER_IMPORT], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=200, check=False)
    assert proc.returncode == 1 and "ValueError: the last words of a failed run" in proc.stderr
    assert "other.cc:1] a real error" in proc.stderr, proc.stderr
    assert "dependency_optimizer.cc:9] another failure" in proc.stderr  # only the known text goes
    gpu_machine = os.path.exists(logs.NVIDIA_DRIVER)  # no filter there: nothing may wait in it
    assert ("DT_INT32" in proc.stderr) == gpu_machine, proc.stderr
    assert ("topological sort failed" in proc.stderr) == gpu_machine, proc.stderr
