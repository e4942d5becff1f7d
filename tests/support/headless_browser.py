"""A headless Chromium driven over the DevTools protocol on a pipe (no port, no network,
no client library): open a local page, evaluate expressions, click an element as a user
does (mouse events at its centre) and take a screenshot.

`find_chromium()` names the binary (None when the machine has none: the tests skip).
The browser is started here and ended here, by its own pid; every wait is bounded.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
         "chrome-headless-shell")
TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


class BrowserError(Exception):
    pass


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are above 4, so that moving them to 3 and 4 in the child never
    overwrites one end with the other."""
    ends = os.pipe()
    high = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in ends)
    for fd in ends:
        os.close(fd)
    return high[0], high[1]


class HeadlessPage:
    """One page in a headless Chromium of its own."""

    def __init__(self, binary: str, width: int = 1200, height: int = 900) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="kraft-chromium-")
        to_browser, self._send_fd = _high_pipe()
        self._read_fd, from_browser = _high_pipe()
        # bash moves the protocol pipe to fds 3 (commands in) and 4 (answers out), where
        # --remote-debugging-pipe looks for it (sh takes no fd above 9)
        command = ["bash", "-c", f'exec "$@" 3<&{to_browser} 4>&{from_browser}', "bash",
                   binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                   "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                   "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
                   f"--window-size={width},{height}", f"--user-data-dir={self._profile.name}",
                   "about:blank"]
        self.process = subprocess.Popen(command, pass_fds=(to_browser, from_browser),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # --- the protocol -------------------------------------------------------------------

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read_fd], [], [], left)[0]:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                raise BrowserError("the browser closed its protocol pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def _call(self, method: str, params: dict[str, Any] | None = None,
              session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method,
                                   "params": params or {}}
        if session is not None:
            request["sessionId"] = session
        os.write(self._send_fd, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._events.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the page's session."""
        return self._call(method, params, self._session)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method:
                    return self._events.pop(index)
            message = self._message(deadline)
            if "method" in message:
                self._events.append(message)

    # --- what a test does ---------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Load a local file and wait for its load event (its scripts have run)."""
        self._events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True})
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def click(self, selector: str) -> None:
        """Scroll the element into view and press and release the mouse at its centre."""
        box = self.evaluate(
            f"(() => {{const e = document.querySelector({json.dumps(selector)});"
            "if (!e) return null; e.scrollIntoView({block: 'center'});"
            "const r = e.getBoundingClientRect();"
            "return {x: r.left + r.width / 2, y: r.top + r.height / 2};})()")
        if box is None:
            raise BrowserError(f"no element matches {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                   "button": "left", "clickCount": 1})

    def screenshot(self, path: Path) -> None:
        """The whole page as a PNG."""
        data = self.call("Page.captureScreenshot", {"format": "png",
                                                    "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._call("Browser.close")
        except BrowserError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()  # our own child, by its pid
            self.process.wait(timeout=10)
        os.close(self._send_fd)
        os.close(self._read_fd)
        self._profile.cleanup()

    def __enter__(self) -> HeadlessPage:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
