"""Java `.properties` text (Kafka's `server.properties`): `#`/`!` comments, `=`, `:` or
blanks between key and value, `\\` escapes and line continuations. `tools.config` reads
node configs with it."""

from __future__ import annotations

import re
from collections.abc import Iterable


class PropertiesError(ValueError):
    """Text that no Java properties reader would take; the message names source:line."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(line number, logical line): comments and blank lines dropped, a line ending in an
    odd number of backslashes joined with the next (its leading blanks dropped)."""
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line.startswith(("#", "!")):
                continue
            start = number
            pending = ""
        pending += line
        trailing = len(pending) - len(pending.rstrip("\\"))
        if trailing % 2 == 1:
            pending = pending[:-1]
            continue
        yield start, pending
        pending = None
    if pending is not None:
        yield start, pending


def _unescape(text: str, source: str, number: int) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1]
        if escaped == "u":
            digits = text[index + 2:index + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PropertiesError(f"{source}:{number}: bad \\u escape")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(escaped, escaped))
        index += 2
    return "".join(out)


def parse_properties(text: str, source: str = "") -> dict[str, str]:
    """Java `.properties` text -> {key: value}: `#`/`!` comments, `=`, `:` or blanks
    between key and value, `\\` escapes and line continuations; a later key wins."""
    values: dict[str, str] = {}
    for number, line in logical_lines(text):
        index, key = 0, []
        while index < len(line) and line[index] not in "=: \t\f":
            if line[index] == "\\" and index + 1 < len(line):
                key.append(line[index:index + 2])
                index += 2
            else:
                key.append(line[index])
                index += 1
        rest = line[index:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        values[_unescape("".join(key), source, number)] = _unescape(rest, source, number)
    return values
