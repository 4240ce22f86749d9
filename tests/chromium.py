"""Headless Chromium driven over the DevTools protocol, for tests that check a page in a real
browser: load a page, evaluate scripts in it, record the requests it makes, take screenshots.

Chromium comes from Debian's ``chromium`` package (``make test`` installs it). When it is
missing, :func:`find_chromium` FAILS the test with the command that installs it: a browser
test that skips would pass on a machine that never ran it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
    "--remote-debugging-port=0",
)
INSTALL_HINT = "sudo apt-get update && sudo apt-get install -y chromium   (Debian/Ubuntu; `make test` does this)"


def find_chromium() -> str:
    """The Chromium executable ($CHROMIUM overrides), or the test fails saying how to install it."""
    given = os.environ.get("CHROMIUM")
    found = given if given and shutil.which(given) else next((shutil.which(c) for c in CANDIDATES if shutil.which(c)), None)
    if not found:
        pytest.fail(f"headless Chromium is needed for the browser test and none was found ({', '.join(CANDIDATES)}); "
                    f"install it: {INSTALL_HINT}", pytrace=False)
    return found


class Browser:
    """One headless Chromium with one page, on a fresh profile under ``profile_dir``."""

    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 1000, timeout: float = 60.0):
        import websocket  # websocket-client, a test dependency

        self.timeout = timeout
        self.stderr: list[str] = []
        self.events: list[dict] = []
        self._next_id = 0
        self.process = subprocess.Popen(
            [find_chromium(), *FLAGS, f"--user-data-dir={profile_dir}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        port = self._devtools_port()
        threading.Thread(target=self._drain, daemon=True).start()
        page = self._page_target(port)
        self.socket = websocket.create_connection(page, timeout=timeout, suppress_origin=True)
        for domain in ("Page", "Runtime", "Network"):
            self.send(f"{domain}.enable")

    def _devtools_port(self) -> int:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                break
            self.stderr.append(line)
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if match:
                return int(match.group(1))
        self.close()
        raise RuntimeError("Chromium did not start its DevTools server:\n" + "".join(self.stderr[-30:]))

    def _drain(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line)

    def _page_target(self, port: int) -> str:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as response:
                targets = json.load(response)
            pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise RuntimeError("Chromium opened no page")

    def send(self, method: str, **params) -> dict:
        """One DevTools command; its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        ident = self._next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for_event(self, method: str, since: int = 0) -> dict:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for event in self.events[since:]:
                if event["method"] == method:
                    return event
            message = json.loads(self.socket.recv())
            if "method" in message:
                self.events.append(message)
        raise TimeoutError(f"no {method} within {self.timeout} s")

    def wait_until(self, expression: str) -> None:
        """Poll a JavaScript condition (event handlers such as hashchange run asynchronously)."""
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {self.timeout} s: {expression}")
            time.sleep(0.05)

    def open(self, url: str) -> None:
        since = len(self.events)
        self.send("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired", since)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, full_page: bool = True, height: int | None = None) -> Path:
        """A PNG of the whole page, or of ``height`` pixels from where the page is scrolled."""
        params = {"format": "png"}
        metrics = self.send("Page.getLayoutMetrics")
        if full_page or height:
            size, viewport = metrics["cssContentSize"], metrics["cssVisualViewport"]
            top = 0 if full_page else viewport["pageY"]
            tall = size["height"] - top if full_page else min(height, size["height"] - top)
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": top, "width": size["width"], "height": tall, "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        if getattr(self, "socket", None):
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
