"""The pure parts of the librdkafka suite run: which tests a checkout has (its
tests/test.c table), which of them are exceptions, what one `test-runner` run printed,
and the table of outcomes.

A test's outcome is one of `pass`, `fail`, `skip` (the test-runner skipped it itself: a
broker version, a missing library feature) or `exception` (listed in
`tools/librdkafka_suite/exception_list.py`, or flagged in test.c as needing no broker, a
scenario no cluster of `scenarios.py` gives, or a known librdkafka issue; not run). Each
row names the scenario its test runs on. The run passes when no test outside the
exceptions failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tools.librdkafka_suite.scenarios import DEFAULT, SCENARIOS, scenario_for

LOCAL, KNOWN_ISSUE, MANUAL, SOCKEM = "TEST_F_LOCAL", "TEST_F_KNOWN_ISSUE", "TEST_F_MANUAL", \
    "TEST_F_SOCKEM"
# flags test.h defines as 0 on Linux
LINUX_NO_FLAGS = frozenset({"0", "TEST_F_KNOWN_ISSUE_WIN32", "TEST_F_KNOWN_ISSUE_OSX"})
OUTCOMES = ("pass", "fail", "skip", "exception")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TABLE = re.compile(r"struct test tests\[\]\s*=\s*\{(.*?)\{\s*NULL\s*\}\s*\};", re.S)
_ENTRY = re.compile(r"_TEST\(\s*(\d{4}\w*)\s*,\s*([^,)]*)(.*?)\)\s*,?\s*(?=_TEST\(|$)", re.S)
_SCENARIO = re.compile(r'\.scenario\s*=\s*"([^"]*)"')
_EXTRA = re.compile(r'\.extra\s*=\s*((?:"[^"]*"\s*)+)')
_SUMMARY_ROW = re.compile(r"^\|\s*(\d{4}\w*)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|"
                          r"\s*([\d.]+)s\s*\|\s*(.*)$")
_FAILURE_HEAD = re.compile(r'^### Test "([^" ]*).*" failed at .*###$')
_ERROR_WORDS = re.compile(r"error|fail|assert|abort|timed out", re.I)


class SuiteInputError(ValueError):
    """A test range or a checkout the suite cannot use."""


@dataclass(frozen=True)
class SuiteTest:
    """One `_TEST(...)` entry of librdkafka's tests/test.c."""
    name: str  # e.g. 0022_consume_batch_local
    flags: frozenset[str]
    scenario: str = DEFAULT  # test.c's list, e.g. `default,ak23`
    extra: str = ""

    @property
    def number(self) -> int:
        return int(self.name[:4])


@dataclass(frozen=True)
class Ran:
    """What one test-runner run printed about one test."""
    state: str  # PASSED, FAILED, SKIPPED, RUNNING (never finished), DNS (never started)
    seconds: float
    message: str  # the failure or skip reason test-runner printed


@dataclass(frozen=True)
class Row:
    number: int
    name: str
    outcome: str  # one of OUTCOMES
    seconds: float
    note: str  # a failure's last error line, a skip's or an exception's reason
    scenario: str = DEFAULT  # the cluster it ran on (`scenarios.SCENARIOS`)


def parse_test_ranges(text: str) -> list[int]:
    """`0001-0099,0112-0137,0150` as the test numbers it names, ascending."""
    numbers: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not (low.isdigit() and (not dash or high.isdigit())):
            raise SuiteInputError(f"bad test range {part!r}: expected NNNN or NNNN-MMMM")
        first, last = int(low), int(high) if dash else int(low)
        if first > last or last > 9999:
            raise SuiteInputError(f"bad test range {part!r}: from {first} to {last}")
        numbers.update(range(first, last + 1))
    return sorted(numbers)


def parse_test_table(test_c: str) -> list[SuiteTest]:
    """The entries of test.c's `tests[]` table, in its order (comments and `#if` lines
    dropped: the suite is built WITH_SOCKEM on Linux)."""
    table = _TABLE.search(test_c)
    if table is None:
        raise SuiteInputError("no `struct test tests[]` table in tests/test.c")
    body = re.sub(r"/\*.*?\*/", "", table.group(1), flags=re.S)
    body = "\n".join(line for line in body.splitlines() if not line.strip().startswith("#"))
    tests = []
    for name, flags_text, rest in _ENTRY.findall(body):
        flags = frozenset(f.strip() for f in flags_text.split("|")) - LINUX_NO_FLAGS
        scenario = _SCENARIO.search(rest)
        extra = _EXTRA.search(rest)
        tests.append(SuiteTest(name, flags, scenario.group(1) if scenario else DEFAULT,
                               "".join(re.findall(r'"([^"]*)"', extra.group(1)))
                               if extra else ""))
    return tests


def derived_exception(test: SuiteTest) -> str | None:
    """Why test.c's own flags keep `test` out of a run against a real cluster (None: they
    do not)."""
    if LOCAL in test.flags:
        return ("TEST_F_LOCAL: runs without a broker (librdkafka's unit tests or its mock "
                "cluster)")
    if MANUAL in test.flags:
        return "TEST_F_MANUAL: run by hand only"
    if KNOWN_ISSUE in test.flags:
        return "TEST_F_KNOWN_ISSUE: librdkafka's own known issue" + (
            f" ({test.extra})" if test.extra else "")
    if scenario_for(test.name, test.scenario) is None:
        return (f"needs librdkafka's {test.scenario!r} scenario (a cluster with other "
                "broker settings), which tools/librdkafka_suite/scenarios.py does not "
                "set up")
    return None


def scenario_of(test: SuiteTest) -> str:
    """The scenario whose cluster `test` runs on; the default one for a test none fits
    (an exception, shown with the default run's tests)."""
    return scenario_for(test.name, test.scenario) or DEFAULT


def runs_by_scenario(table: Iterable[SuiteTest], numbers: Iterable[int]
                     ) -> list[tuple[str, list[list[SuiteTest]]]]:
    """The selected tests as test-runner runs: per scenario that has any (in the order
    of SCENARIOS), the tests of each test number that run on it (ascending numbers,
    test.c's order within one)."""
    selected = set(numbers)
    runs: dict[str, dict[int, list[SuiteTest]]] = {name: {} for name in SCENARIOS}
    for test in table:
        if test.number in selected:
            runs[scenario_of(test)].setdefault(test.number, []).append(test)
    return [(name, [by_number[n] for n in sorted(by_number)])
            for name, by_number in runs.items() if by_number]


def exception_reason(test: SuiteTest, listed: Mapping[str, str]) -> str | None:
    """The listed reason (by full name, then by number), else the derived one."""
    return (listed.get(test.name) or listed.get(test.name[:4]) or derived_exception(test))


def split_runs(runs: Iterable[list[SuiteTest]], listed: Mapping[str, str], *,
               include_exceptions: bool) -> tuple[list[list[SuiteTest]], list[list[SuiteTest]]]:
    """`runs` (the tests of each test number) as (those to run, those not run because
    every test of theirs is an exception, unless `include_exceptions`)."""
    to_run: list[list[SuiteTest]] = []
    not_run: list[list[SuiteTest]] = []
    for tests in runs:
        excepted = all(exception_reason(t, listed) for t in tests)
        (not_run if excepted and not include_exceptions else to_run).append(tests)
    return to_run, not_run


def parse_runner_output(output: str) -> dict[str, Ran]:
    """Test name -> what test-runner's summary table says of it (its last table: a
    timed-out test makes it print one early)."""
    found: dict[str, Ran] = {}
    for line in _ANSI.sub("", output).splitlines():
        match = _SUMMARY_ROW.match(line.strip())
        if match:
            name, state, seconds, message = match.groups()
            found[name] = Ran(state, float(seconds), message.strip())
    return found


def error_line(output: str, name: str = "") -> str:
    """The message under test-runner's first `### Test "NAME..." failed at ...` banner
    of test `name` (its root cause: a failed test adds `!fails` banners after it, and an
    aborted runner `<MAIN>`'s), else under its last banner; else the last line naming
    an error; else the last line ("" for no output)."""
    lines = [line.strip() for line in _ANSI.sub("", output).splitlines() if line.strip()]
    banners = [(match.group(1), lines[index + 1]) for index, line in enumerate(lines[:-1])
               if (match := _FAILURE_HEAD.match(line))]
    own = [message for test, message in banners if test == name]
    if own:
        return own[0]
    if banners:
        return banners[-1][1]
    for line in reversed(lines):
        if _ERROR_WORDS.search(line) and not _SUMMARY_ROW.match(line):
            return line
    return lines[-1] if lines else ""


def rows_for_run(tests: Iterable[SuiteTest], output: str, exit_code: int | None,
                 seconds: float, listed: Mapping[str, str]) -> list[Row]:
    """The rows of the tests of one number after one test-runner run: `exit_code` None
    when it was killed at its time bound after `seconds`. A test the summary does not
    show finished failed, unless it is an exception; an exception that ran (on request,
    or beside another test of its number) keeps its real outcome."""
    ran = parse_runner_output(output)
    rows = []
    for test in tests:
        reason = exception_reason(test, listed)
        result = ran.get(test.name)
        if result is not None and result.state == "PASSED":
            outcome, took, note = "pass", result.seconds, ""
        elif result is not None and result.state == "SKIPPED":
            outcome, took, note = ("exception" if reason else "skip", result.seconds,
                                   reason or result.message)
        elif result is not None and result.state == "FAILED":
            outcome, took, note = ("fail", result.seconds,
                                   result.message or error_line(output, test.name))
        elif reason is not None:  # not run, or cut short with the run of its number
            outcome, took, note = "exception", 0.0, reason
        elif exit_code is None:
            outcome, took, note = ("fail", seconds,
                                   f"killed at the time bound ({seconds:.0f} s): "
                                   f"{error_line(output, test.name)}")
        else:
            outcome, took, note = ("fail", seconds,
                                   f"test-runner exited {exit_code} without finishing it: "
                                   f"{error_line(output, test.name)}")
        rows.append(Row(test.number, test.name, outcome, took, note, scenario_of(test)))
    return rows


def unexpected_failures(rows: Iterable[Row], listed: Mapping[str, str],
                        tests: Mapping[str, SuiteTest]) -> list[Row]:
    """The failed rows of tests that are not exceptions: what makes the run fail."""
    return [row for row in rows if row.outcome == "fail"
            and exception_reason(tests[row.name], listed) is None]


def render_table(rows: Iterable[Row], width: int = 126) -> str:
    """A fixed-width text table: test, name, scenario, outcome, seconds, note (cut to
    `width`)."""
    lines = [f"{'test':<4}  {'name':<46}  {'scenario':<12}  {'outcome':<9}  {'seconds':>7}  "
             "note"]
    for row in rows:
        line = (f"{row.number:04d}  {row.name:<46}  {row.scenario:<12}  {row.outcome:<9}  "
                f"{row.seconds:7.1f}  {row.note}")
        lines.append(line if len(line) <= width else line[:width - 3] + "...")
    return "\n".join(lines)


def render_markdown(rows: Iterable[Row]) -> str:
    """The same rows as a Markdown table (docs/librdkafka-suite.md)."""
    lines = ["| test | name | scenario | outcome | seconds | note |",
             "|---|---|---|---|---:|---|"]
    lines += [f"| {row.number:04d} | `{row.name}` | {row.scenario} | {row.outcome} | "
              f"{row.seconds:.1f} | {row.note.replace('|', '/')} |" for row in rows]
    return "\n".join(lines)


def counts(rows: Iterable[Row]) -> dict[str, int]:
    """How many rows have each outcome (every outcome named, zero included)."""
    total = dict.fromkeys(OUTCOMES, 0)
    for row in rows:
        total[row.outcome] += 1
    return total
