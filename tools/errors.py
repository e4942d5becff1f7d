"""The one error type commands raise: printed as one line, mapped to an exit code."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from raft.common.errors import ErrorCode


class CommandError(Exception):
    """A request or check failed (exit 1) or the input was bad (exit 2)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def usage_error(message: str) -> CommandError:
    return CommandError(message, exit_code=2)


def unknown_topic(name: str, known: Iterable[str]) -> CommandError:
    """One line naming the missing topic, with Kafka's error code and the closest
    existing name if one is close (a typo); exit 1."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return CommandError(f"{code.name} ({int(code)}): no topic named {name!r}{hint}")
