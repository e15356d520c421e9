"""Run a command as a child and measure it from outside: wall time, CPU of its whole process
tree, and the peaks of the tree's summed RSS and PSS (where the OS reports it: a page shared by
n processes, e.g. forked workers' libraries, counts 1/n in each, so the sum counts it once).

Measuring from the parent counts what an operator pays: interpreter start-up, imports, Dask
workers, Beam or Ray workers. CPU seconds are the larger of (a) the last sample of every
process seen in the tree and (b) ``getrusage(RUSAGE_CHILDREN)``, which counts the descendants
that were waited for; a process living less than one sampling interval may be missed by (a).
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Self

import psutil


@dataclass
class ChildRun:
    """What one child run printed and cost."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    peak_pss_mb: float | None = None  # proportional: a page shared by n processes counts 1/n
    timed_out: bool = False  # killed at ``timeout_s``

    def figures(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "peak_rss_mb": self.peak_rss_mb,
                "peak_pss_mb": self.peak_pss_mb}


class _TreeSampler:
    def __init__(self, pid: int, interval_s: float) -> None:
        self.root, self.interval_s = psutil.Process(pid), interval_s
        self.peak, self.peak_pss, self.cpu = 0, 0, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        total = pss = 0
        for proc in procs:
            try:
                with proc.oneshot():
                    total += proc.memory_info().rss
                    self.cpu[(proc.pid, proc.create_time())] = sum(proc.cpu_times()[:2])
                pss += getattr(proc.memory_full_info(), "pss", 0)
            except psutil.Error:
                continue
        self.peak, self.peak_pss = max(self.peak, total), max(self.peak_pss, pss)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval_s)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(cmd: list[str], *, cwd: str | os.PathLike | None = None,
              env: dict[str, str] | None = None, timeout_s: float | None = None,
              interval_s: float = 0.1, **popen: Any) -> ChildRun:
    """Run ``cmd`` to completion; never raises on a non-zero exit (the caller decides)."""
    cpu0, t0, timed_out = _children_cpu(), time.perf_counter(), False
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)
    with _TreeSampler(proc.pid, interval_s) as sampler:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\n[bench] killed after {timeout_s:.0f} s"
            timed_out = True
    wall = time.perf_counter() - t0
    cpu = max(sum(sampler.cpu.values()), _children_cpu() - cpu0)
    return ChildRun(proc.returncode, out, err, wall, cpu, sampler.peak / 2**20,
                    sampler.peak_pss / 2**20 if sampler.peak_pss else None, timed_out)


def run_checked(cmd: list[str], **kwargs: Any) -> ChildRun:
    """``run_child`` for a run the bench cannot do without: a non-zero exit raises, with the
    command and the end of its stderr."""
    child = run_child(cmd, **kwargs)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{child.stderr[-4000:]}")
    return child


def last_json(text: str) -> dict[str, Any]:
    """The JSON object a child printed last (its result line)."""
    import json

    try:
        return json.loads(text)  # a whole indented object (``python -m etl run --json``)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            return json.loads(line)
    raise ValueError(f"no JSON result line in output: {text[-2000:]!r}")
