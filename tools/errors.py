"""The one error type commands raise: printed as one line, mapped to an exit code; and
the stop a long verb takes at SIGINT or SIGTERM, printed as one line, exit 128 + the
signal's number (130, 143), as a shell reports a process those signals ended."""

from __future__ import annotations

import difflib
import signal
from collections.abc import Iterable
from types import FrameType

from raft.common.errors import ErrorCode


class CommandError(Exception):
    """A request or check failed (exit 1) or the input was bad (exit 2)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class StoppedBySignal(BaseException):
    """SIGINT or SIGTERM stopped the verb. Raised in the main thread where it was, so
    every `finally` on the way out runs (faults healed, a cluster stopped); a
    BaseException, so no `except Exception` takes it for a failure to report."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.exit_code = 128 + signum


def stop_on_signals() -> None:
    """From now on the first SIGINT or SIGTERM raises StoppedBySignal; later ones are
    ignored, as they would cut short the teardown the first one started."""
    def raise_stopped(signum: int, frame: FrameType | None) -> None:
        for each in (signal.SIGINT, signal.SIGTERM):
            signal.signal(each, signal.SIG_IGN)
        raise StoppedBySignal(signum)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, raise_stopped)


def usage_error(message: str) -> CommandError:
    return CommandError(message, exit_code=2)


def unknown_topic(name: str, known: Iterable[str]) -> CommandError:
    """One line naming the missing topic, with Kafka's error code and the closest
    existing name if one is close (a typo); exit 1."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return CommandError(f"{code.name} ({int(code)}): no topic named {name!r}{hint}")
