"""The parent's watch over one running child: hand it its job, collect its output and result
record within the deadline and the caps, measure its working directory where no tmpfs
bounds it (the fallback without namespaces), and end its session."""

from __future__ import annotations

import os
import selectors
import signal
import stat
import subprocess
import time
from dataclasses import dataclass

from .confinement import Limits

READ_CHUNK = 1 << 16  # bytes read from a pipe at once
DISK_CHECK_INTERVAL_S = 0.05  # how often the fallback watchdog measures the working directory


def over_disk(workdir: str, limits: Limits, max_entries: int, pid: int | None = None) -> bool:
    """Whether the working directory, with the files process ``pid`` holds open after
    deleting them, holds more than ``disk_mb`` or ``max_entries`` files and folders (the
    fallback's check; a tmpfs bounds it otherwise)."""
    total, entries, pending = _deleted_but_open_bytes(pid) if pid else 0, 0, [workdir]
    while pending:
        try:
            scanner = os.scandir(pending.pop())
        except OSError:
            continue
        with scanner:
            for entry in scanner:
                entries += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += _file_bytes(info)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
                if total > limits.disk_bytes or entries >= max_entries:
                    return True
    return total > limits.disk_bytes


def _file_bytes(info: os.stat_result) -> int:
    # the larger of blocks and size: delayed allocation may not show in blocks yet
    size = info.st_size if stat.S_ISREG(info.st_mode) else 0
    return max(info.st_blocks * 512, size)


def _deleted_but_open_bytes(pid: int) -> int:
    """What the regular files process ``pid`` holds open with no name left take: invisible
    to a scan of the folder, on disk (or, where /tmp is a tmpfs, in memory) until it exits."""
    total = 0
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone already
        return 0
    for descriptor in descriptors:
        try:
            info = os.stat(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 0:
            total += _file_bytes(info)
    return total


@dataclass
class ChildRun:
    """What the parent saw of one child."""

    output: bytearray
    record: bytearray
    timed_out: bool = False
    output_overflow: bool = False
    disk_exceeded: bool = False


def watch(
    child: subprocess.Popen[bytes],
    job: bytes,
    result_read: int,
    deadline: float,
    limits: Limits,
    record_cap: int,
    disk_check=None,
) -> ChildRun:
    """Hand the job over (the child reads it first thing), then collect output and the
    result record (at most ``record_cap`` bytes) until the child exits, the deadline passes,
    the output cap is hit or ``disk_check`` (called every :data:`DISK_CHECK_INTERVAL_S`)
    says the snippet wrote too much. Reads are bounded in size and never wait past the
    deadline."""
    assert child.stdin is not None and child.stdout is not None, "the child starts with both pipes"
    run = ChildRun(output=bytearray(), record=bytearray())
    try:
        child.stdin.write(job)
        child.stdin.close()
    except OSError:  # the child died before reading its job; its exit status tells why
        pass
    caps = {"output": limits.max_output_bytes + 1, "record": record_cap}
    try:
        exit_fd = os.pidfd_open(child.pid)  # readable once the child has exited
    except (AttributeError, OSError):  # not Linux >= 5.3: poll instead
        exit_fd = None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout.fileno(), selectors.EVENT_READ, "output")
        selector.register(result_read, selectors.EVENT_READ, "record")
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ, "exit")
        try:
            exited = False
            next_disk_check = time.monotonic() + DISK_CHECK_INTERVAL_S
            while not exited:
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    run.timed_out = True
                    break
                if disk_check is not None and now >= next_disk_check:
                    if disk_check():
                        run.disk_exceeded = True
                        break
                    next_disk_check = time.monotonic() + DISK_CHECK_INTERVAL_S
                wait = remaining if exit_fd is not None else min(remaining, 0.01)
                if disk_check is not None:
                    wait = max(0.0, min(wait, next_disk_check - now))
                events = selector.select(wait)
                for key, _ in events:
                    if key.data == "exit":
                        exited = True
                        continue
                    chunk = os.read(key.fd, READ_CHUNK)
                    if not chunk:  # end of file; descendants could still hold the pipe
                        selector.unregister(key.fd)
                    else:
                        sink = getattr(run, key.data)
                        sink += chunk[: caps[key.data] - len(sink)]
                if len(run.output) > limits.max_output_bytes:
                    run.output_overflow = True
                    break
                exited = exited or (exit_fd is None and child.poll() is not None)
            if exited:  # collect what the child wrote just before it exited
                for key in list(selector.get_map().values()):
                    if key.data != "exit":
                        _drain(key.fd, getattr(run, key.data), caps[key.data])
        finally:
            if exit_fd is not None:
                os.close(exit_fd)
    run.output_overflow = run.output_overflow or len(run.output) > limits.max_output_bytes
    del run.output[limits.max_output_bytes :]
    return run


def _drain(fd: int, sink: bytearray, cap: int) -> None:
    """Read what is already in a pipe without waiting for more."""
    os.set_blocking(fd, False)
    try:
        while len(sink) < cap and (chunk := os.read(fd, READ_CHUNK)):
            sink += chunk[: cap - len(sink)]
    except BlockingIOError:
        pass


def end_session(child: subprocess.Popen[bytes]) -> None:
    """Kill the child and everything it started, then reap it. Killing before reaping keeps
    the process-group id from being reused in between."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
    assert child.stdin is not None and child.stdout is not None, "the child starts with both pipes"
    child.stdout.close()
    if not child.stdin.closed:
        try:
            child.stdin.close()
        except OSError:
            pass

