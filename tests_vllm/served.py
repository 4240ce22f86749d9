"""A real ``vllm serve`` on loopback: the embedded SmolLM2 in float32 on CPU, on a free port, in a
session of its own (so its engine process goes with it), its output in a log file.

:meth:`VLLMServer.start` returns at once (the tests go on while the server loads);
:meth:`VLLMServer.wait` waits for ``GET /v1/models`` to answer, up to a start-up timeout, and
raises with the log's tail and path if the server died or did not answer in time. ``kill``
is a SIGKILL to the whole session (a crash: nothing shuts down cleanly); ``start`` again
brings it back on the same port. ``requests_served`` reads vLLM's own counter of finished
requests (``/metrics``), which tells what reached the server. Used by tests_vllm/ and by
bench/bench_vllm.py (loaded by path)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

VLLM = Path(sys.executable).parent / "vllm"
START_TIMEOUT_S = 420.0
SERVED_NAME = "smollm2"
# vLLM's counter of requests that finished (stop or length): what the server answered
_SUCCESS = re.compile(r'^vllm:request_success_total\{[^}]*finished_reason="(?:stop|length)"[^}]*\} ([\d.e+]+)$', re.M)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerStartError(RuntimeError):
    pass


class VLLMServer:
    def __init__(self, model_dir: str, log: Path, port: int | None = None, name: str = SERVED_NAME,
                 max_model_len: int = 4096, extra_args: tuple[str, ...] = ()):
        self.model_dir, self.log, self.name = model_dir, Path(log), name
        self.port = port or free_port()
        self.max_model_len = max_model_len
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None
        self.starts: list[float] = []  # seconds from start to answering, per start
        self._begun = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def judge_spec(self) -> str:
        return f"openai:{self.base_url}#{self.name}"

    def model_args(self, num_concurrent: int = 4) -> str:
        """lm-eval's ``local-chat-completions`` arguments for this server (its context length
        as ``max_length``: lm-eval's API models assume 2048, and prompts are fitted to it)."""
        return (f"model={self.name},base_url={self.base_url}/chat/completions,tokenizer={self.model_dir},"
                f"num_concurrent={num_concurrent},max_retries=2,max_length={self.max_model_len}")

    def command(self) -> list[str]:
        return [str(VLLM), "serve", self.model_dir, "--served-model-name", self.name, "--host", "127.0.0.1",
                "--port", str(self.port), "--dtype", "float32", "--max-model-len", str(self.max_model_len),
                # compiling costs minutes per start on a CPU; the request log shows the structured
                # outputs each request asked for
                "--enforce-eager", "--enable-log-requests", "--max-log-len", "200", *self.extra_args]

    def start(self) -> VLLMServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as log:
            log.write(f"$ {' '.join(self.command())}\n")
            log.flush()
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, env=os.environ.copy())
        self._started = time.monotonic()
        self._begun += 1
        return self

    def wait(self, timeout: float = START_TIMEOUT_S) -> VLLMServer:
        deadline = self._started + timeout
        while True:
            if self.process.poll() is not None:
                raise ServerStartError(f"vllm serve exited with status {self.process.returncode} before it "
                                       f"answered; log {self.log}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as answer:
                    if self.name in {model["id"] for model in json.loads(answer.read())["data"]}:
                        if len(self.starts) < self._begun:
                            self.starts.append(time.monotonic() - self._started)
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(f"vllm serve did not answer within {timeout:.0f} s; log {self.log}:\n"
                                       f"{self.log_tail()}")
            time.sleep(0.5)

    def requests_served(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:
            return int(sum(float(n) for n in _SUCCESS.findall(answer.read().decode())))

    def kill(self) -> None:
        """SIGKILL to the server's session: the API server and its engine process die at once."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")
