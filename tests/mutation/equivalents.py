"""Mutants listed as equivalent in tests/mutation/equivalent.toml: mutants no test can
kill because they cannot change behaviour, each with the reason why.

An entry names the file, the function (`name`, or `Class.method`) and the mutated code
as the `make mutation` listing prints it after the arrow; it is matched with whitespace
runs and a trailing comment ignored, never by mutmut's numbered mutant name, so it
survives unrelated edits and goes stale only when the mutated code itself changes.
"""

from __future__ import annotations

import io
import tokenize
import tomllib
from dataclasses import dataclass
from pathlib import Path

LIST = Path(__file__).with_name("equivalent.toml")


@dataclass(frozen=True, slots=True)
class Entry:
    file: str
    function: str
    mutated: str  # normalised
    reason: str

    def __str__(self) -> str:
        return f"{self.file} {self.function}: {self.mutated}"


def normalise(code: str) -> str:
    """`code` (one line) without its comment, whitespace runs made one space."""
    code = " ".join(code.split())
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                return code[:token.start[1]].rstrip()
    except tokenize.TokenError:  # a fragment: a bracket opened on a line not shown
        pass
    return code


def load(path: Path = LIST) -> list[Entry]:
    """The entries of `path`: `[[mutant]]` tables of file, function, reason and the
    list `mutated` (the mutated code of each mutant the reason covers)."""
    tables = tomllib.loads(path.read_text(encoding="utf-8")).get("mutant", [])
    entries = []
    for table in tables:
        missing = {"file", "function", "mutated", "reason"} - set(table)
        if missing or not isinstance(table["mutated"], list):
            raise ValueError(f"{path}: an entry needs file, function, reason and a list "
                             f"`mutated`: {table}")
        entries += [Entry(table["file"], table["function"], normalise(code), table["reason"])
                    for code in table["mutated"]]
    return entries


class Equivalents:
    """The listed entries, and which of them matched a surviving mutant."""

    def __init__(self, entries: list[Entry]) -> None:
        self._entries = {(e.file, e.function, e.mutated): e for e in entries}
        self._matched: set[Entry] = set()

    def reason(self, file: str, function: str, mutated: str) -> str | None:
        """Why this surviving mutant is equivalent; None when it is not listed."""
        entry = self._entries.get((file, function, normalise(mutated)))
        if entry is None:
            return None
        self._matched.add(entry)
        return entry.reason

    def unmatched(self, files: set[str]) -> list[Entry]:
        """Entries of `files` no surviving mutant matched: killed now, or code changed."""
        return sorted((e for e in self._entries.values()
                       if e.file in files and e not in self._matched), key=str)
