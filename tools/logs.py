"""Logging set-up: only tools/ configures handlers. Logs go to stderr, as text or JSON
lines; `extra={...}` fields are printed with each event."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event = {"ts": round(record.created, 3), "level": record.levelname,
                 "logger": record.name, "msg": record.getMessage(), **_fields(record)}
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        fields = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"{stamp}.{int(record.msecs):03d} {record.levelname:<7} {record.name}: " \
               f"{record.getMessage()}{' ' + fields if fields else ''}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to sys.stderr as it is then, so a progress display that
    routes stderr above its line (tools/progress.py) receives the log lines too."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler's own init sets it
        pass


def configure_logging(log_format: str = "text", level: str = "WARNING") -> None:
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
