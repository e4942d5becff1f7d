"""A progress line on stderr while Spark works: the current phase and, from Spark's
status tracker, the running stage's finished and total tasks. On a terminal the line is
rewritten in place; otherwise each phase is printed once."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO


class Progress:
    def __init__(self, spark: Any, stream: TextIO | None = None, interval_s: float = 0.5,
                 enabled: bool = True) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._stream = stream or sys.stderr
        self._interval_s = interval_s
        self._enabled = enabled
        self._tty = enabled and self._stream.isatty()
        self._phase = ""
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="replay-progress", daemon=True)

    def __enter__(self) -> Progress:
        if self._tty:
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._tty:
            self._stream.write("\r\033[K")
            self._stream.flush()

    def phase(self, name: str) -> None:
        self._phase = name
        if self._enabled and not self._tty:
            self._stream.write(f"[replay {time.monotonic() - self._started:6.1f}s] {name}\n")
            self._stream.flush()

    def _stage_text(self) -> str:
        parts = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
        return ", ".join(parts)

    def _poll(self) -> None:
        while not self._stop.wait(self._interval_s):
            elapsed = time.monotonic() - self._started
            line = f"[replay {elapsed:6.1f}s] {self._phase} {self._stage_text()}"
            self._stream.write("\r\033[K" + line[:150])
            self._stream.flush()
