"""Hand-written chaos histories for the checker's tests (tools.chaos.checker)."""

from __future__ import annotations

from typing import Any

from tools.chaos.history import Event

OLD_ID, NEW_ID = "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"


class Script:
    """Builds a history with explicit times, one process; `op` returns the operation's
    index. An `unknown` operation is recorded as an invocation without completion."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.index = 0

    def op(self, op: str, args: dict[str, Any], start: float, end: float, status: str = "ok",
           **result: Any) -> int:
        self.events.append(Event(index=self.index, process="p", type="invoke", op=op,
                                 time=start, args=args))
        if status != "unknown":
            self.events.append(Event(index=self.index, process="p", type=status, op=op,
                                     time=end, result=result))
        self.index += 1
        return self.index - 1
