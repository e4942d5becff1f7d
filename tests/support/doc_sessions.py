"""The runnable sessions of the project's Markdown (README.md, docs/*.md): a fenced block
whose info string is `console`. In it a `$ kraft ...` line is a command and the lines
after it, up to the next `$`, what it prints (stdout and stderr together):

- each expected line must match a line of the output, in order (output may hold more
  lines: a session shows what matters);
- `...` inside a line matches any text; a line that is only `...` is no check;
- `<NAME>` matches one word and binds it: later commands and lines use its value
  (a topic ID, the leader's id);
- a line in parentheses is a comment, not checked;
- output whose first expected line starts with `error:` is a failure the session shows:
  the command must exit non-zero; any other command must exit 0.

`/tmp/NAME` paths are the session's own directory (`relocate`), so sessions run side by
side. Pure functions: tests/integration/test_doc_sessions.py runs them against real
processes, tests/unit/tools/test_doc_sessions_parse.py checks the rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

FENCE = "```"
PROMPT = "$ "
_VARIABLE = re.compile(r"<([A-Z][A-Z_0-9]*)>")
_TMP_PATH = re.compile(r"/tmp/(?=[\w.-])")


@dataclass(frozen=True, slots=True)
class Step:
    command: str  # without the prompt, `kraft ...`
    expected: tuple[str, ...]
    line: int  # of the command, 1-based

    @property
    def expects_failure(self) -> bool:
        checked = [e for e in self.expected if not _is_comment(e)]
        return bool(checked) and checked[0].startswith("error:")


@dataclass(frozen=True, slots=True)
class Session:
    path: Path
    line: int  # of the opening fence
    steps: tuple[Step, ...]

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"


def sessions(path: Path) -> list[Session]:
    """Every `console` block of the Markdown file at `path`."""
    found: list[Session] = []
    block: list[tuple[int, str]] | None = None
    opened = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if block is None:
            if line.strip() == FENCE + "console":
                block, opened = [], number
        elif line.strip() == FENCE:
            found.append(Session(path, opened, _steps(block)))
            block = None
        else:
            block.append((number, line))
    return found


def _steps(lines: Sequence[tuple[int, str]]) -> tuple[Step, ...]:
    steps: list[Step] = []
    for number, line in lines:
        if line.startswith(PROMPT):
            steps.append(Step(line.removeprefix(PROMPT).strip(), (), number))
        elif steps and line.strip():
            last = steps[-1]
            steps[-1] = Step(last.command, (*last.expected, line.strip()), last.line)
        elif line.strip():
            raise ValueError(f"line {number}: output before any command: {line!r}")
    return tuple(steps)


def _is_comment(line: str) -> bool:
    return line.startswith("(") and line.endswith(")")


def relocate(text: str, directory: Path) -> str:
    """`text` with every `/tmp/NAME` path under `directory` instead."""
    return _TMP_PATH.sub(f"{directory}/", text)


def expand(text: str, bindings: Mapping[str, str]) -> str:
    """`text` with each bound `<NAME>` replaced by its value (ValueError: unbound)."""
    def value(found: re.Match[str]) -> str:
        if found.group(1) not in bindings:
            raise ValueError(f"<{found.group(1)}> is used before a line binds it")
        return bindings[found.group(1)]
    return _VARIABLE.sub(value, text)


def _pattern(expected: str, bindings: Mapping[str, str]) -> re.Pattern[str]:
    parts: list[str] = []
    position = 0
    for found in _VARIABLE.finditer(expected):
        parts.append(_literal(expected[position:found.start()]))
        name = found.group(1)
        parts.append(re.escape(bindings[name]) if name in bindings
                     else f"(?P<{name}>[^\\s,()]+)")
        position = found.end()
    parts.append(_literal(expected[position:]))
    return re.compile("".join(parts))


def _literal(text: str) -> str:
    return ".*".join(re.escape(re.sub(r"\s+", " ", piece)) for piece in text.split("..."))


def match(expected: Sequence[str], output: str, bindings: Mapping[str, str]
          ) -> dict[str, str] | str:
    """The bindings after `output` met every expected line in order, or what did not."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    bound = dict(bindings)
    position = 0
    for wanted in expected:
        if _is_comment(wanted) or wanted == "...":
            continue
        pattern = _pattern(wanted, bound)
        for index in range(position, len(lines)):
            hit = pattern.fullmatch(lines[index])
            if hit:
                bound.update(hit.groupdict())
                position = index + 1
                break
        else:
            return f"no line matches {wanted!r} (after line {position} of the output)"
    return bound
