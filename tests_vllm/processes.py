"""Run the ``lm-eval-fin`` console script in a child process and watch it: wall time, peak
RSS (the kernel's figure for the child, and the sum over its process tree sampled every
0.2 s), and how many vLLM engine-core processes were alive at once.

The child's peak is its ``VmHWM`` (the high-water mark of its own memory since ``exec``),
sampled: ``ru_maxrss`` would do, but it also counts the parent's memory at the moment of the
fork, and the parent here is a pytest process holding a vLLM engine of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

BIN = Path(sys.executable).parent
SAMPLE_S = 0.2


@dataclass
class Run:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    max_rss: int  # bytes, the child's own peak (VmHWM since exec; ru_maxrss where /proc cannot say)
    tree_rss_peak: int  # bytes, the largest sampled sum over the child and its descendants
    engine_cores_peak: int  # engine-core processes alive at once (vLLM's multiprocess mode)
    engine_cores_seen: set[int] = field(default_factory=set)
    leftovers: list[str] = field(default_factory=list)  # processes of its session alive after it exited

    @property
    def output(self) -> str:
        """stdout and stderr (vLLM logs to stdout, lm-eval and we to stderr)."""
        return self.stdout + self.stderr

    def check(self) -> Run:
        assert self.returncode == 0, f"{self.args[:3]} exited {self.returncode}:\n{self.stderr[-5000:]}"
        return self


class _TreeSampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.rss_peak = 0
        self.hwm = 0  # bytes: the child's own high-water mark, last seen
        self.cores_peak = 0
        self.cores_seen: set[int] = set()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.stop.is_set():
            try:
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss, cores = 0, set()
            for process in processes:
                try:
                    rss += process.memory_info().rss
                    if "EngineCore" in " ".join(process.cmdline()):
                        cores.add(process.pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
            self.rss_peak = max(self.rss_peak, rss)
            self.hwm = max(self.hwm, _high_water_mark(self.pid))
            self.cores_peak = max(self.cores_peak, len(cores))
            self.cores_seen |= cores
            self.stop.wait(SAMPLE_S)


def _high_water_mark(pid: int) -> int:
    """``VmHWM`` of ``pid`` in bytes (0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_cli(args: list[str], env: dict | None = None, cwd: Path | None = None, timeout: float = 1200) -> Run:
    """``lm-eval-fin <args>`` to completion, watched."""
    command = [str(BIN / "lm-eval-fin"), *map(str, args)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True)
        sampler = _TreeSampler(process.pid)
        sampler.start()
        timer = threading.Timer(timeout, lambda: os.killpg(process.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
            sampler.stop.set()
            sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.perf_counter() - started
        leftovers = _session_leftovers(process.pid)
        out.seek(0)
        err.seek(0)
        return Run(command, process.returncode, out.read(), err.read(), wall_s, sampler.hwm or usage.ru_maxrss * 1024,
                   sampler.rss_peak, sampler.cores_peak, sampler.cores_seen, leftovers)


def _session_leftovers(session: int, grace_s: float = 5.0) -> list[str]:
    """The processes of the child's session (it led one of its own) still alive ``grace_s``
    after it exited, killed after being named: an engine process that outlives its parent
    holds its memory for nothing. The grace lets helpers that end on their own when their
    parent's pipe closes (multiprocessing's resource tracker) do so."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = []
        for process in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getsid(process.pid) == session:
                    alive.append(process)
            except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
                continue
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    found = []
    for process in alive:
        try:
            found.append(" ".join(process.info["cmdline"] or [])[:120])
            process.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
