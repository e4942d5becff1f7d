"""The librdkafka suite's pure parts, without librdkafka: test ranges, test.c's table,
test-runner's output, the outcome of each test and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.librdkafka_suite.__main__ import main
from tools.librdkafka_suite.outcomes import (
    Row,
    SuiteInputError,
    SuiteTest,
    counts,
    error_line,
    exception_reason,
    parse_runner_output,
    parse_test_ranges,
    parse_test_table,
    render_markdown,
    render_table,
    rows_for_run,
    unexpected_failures,
)

TEST_C = r'''
static struct test tests_unrelated[] = {{.name = "x"}};
struct test tests[] = {
    /* Special MAIN test to hold over-all timings, etc. */
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0001_multiobj, 0),
    _TEST(0022_consume_batch, 0),
    _TEST(0022_consume_batch_local, TEST_F_LOCAL),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0),
          .extra = "https://example.invalid/529"),
#if WITH_SOCKEM
    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),
#endif
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
    _TEST(0066_plugins,
          TEST_F_LOCAL | TEST_F_KNOWN_ISSUE_WIN32 | TEST_F_KNOWN_ISSUE_OSX,
          .extra =
              "dynamic loading of tests might not be fixed "
              "for this platform"),
    _TEST(0069_consumer_add_parts, TEST_F_KNOWN_ISSUE_WIN32, TEST_BRKVER(1, 0, 0, 0)),
    _TEST(0103_transactions, 0, TEST_BRKVER(0, 11, 0, 0), .scenario = "default,ak23"),
    /* Manual tests */
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
'''

# what test-runner prints (colours included), trimmed
OUTPUT = '''\
[0022_consume_batch       /  1.203s] Consumed 100 messages
\x1b[31m### Test "0022_consume_batch (do_test_consume_batch_oauthbearer_cb)" failed at \
0022-consume_batch.c:212:do_test() at Thu Nov 29 12:01:02 2026: ###
Expected 10 messages, got 9
[<MAIN>                   /  9.100s] 1 thread(s) in use by librdkafka
TEST 20261129120102 (bare, scenario default) SUMMARY
#==================================================================#
|\x1b[31m <MAIN>                                   |     PASSED |   9.100s \x1b[0m|
|\x1b[31m 0022_consume_batch                       |     FAILED |   8.250s \x1b[0m|\x1b[31m \
do_test():212: Expected 10 messages, got 9\x1b[0m
|\x1b[36m 0022_consume_batch_local                 |    SKIPPED |   0.000s \x1b[0m|\x1b[36m \
Filtered due to negative test flags\x1b[0m
#==================================================================#
'''


def test_ranges_are_expanded_sorted_and_deduplicated_when_parts_overlap() -> None:
    assert parse_test_ranges("0003-0005, 0001,0004-0006") == [1, 3, 4, 5, 6]


@pytest.mark.parametrize("text", ["", "12a", "0005-0003", "1-", "0001-10000", "0001,,0002"])
def test_a_bad_range_is_one_clear_error_when_it_is_parsed(text: str) -> None:
    with pytest.raises(SuiteInputError, match="bad test range"):
        parse_test_ranges(text)


def test_the_table_of_test_c_gives_each_entry_with_its_linux_flags_and_scenario() -> None:
    tests = {t.name: t for t in parse_test_table(TEST_C)}
    assert list(tests) == [
        "0001_multiobj", "0022_consume_batch", "0022_consume_batch_local",
        "0028_long_topicnames", "0049_consume_conn_close",
        "0045_subscribe_update_topic_remove", "0066_plugins", "0069_consumer_add_parts",
        "0103_transactions", "8000_idle"]
    assert tests["0066_plugins"].flags == {"TEST_F_LOCAL"}
    assert tests["0066_plugins"].extra == ("dynamic loading of tests might not be fixed "
                                           "for this platform")
    assert tests["0069_consumer_add_parts"].flags == frozenset()
    assert tests["0049_consume_conn_close"].flags == {"TEST_F_SOCKEM"}
    assert tests["0045_subscribe_update_topic_remove"].scenario == "noautocreate"
    assert tests["0022_consume_batch"].number == 22


def test_a_file_without_the_table_is_refused_when_parsed() -> None:
    with pytest.raises(SuiteInputError, match="no `struct test tests"):
        parse_test_table("int main(void) { return 0; }")


def test_test_c_flags_make_exceptions_and_the_list_overrides_them_when_reasons_are_asked(
        ) -> None:
    tests = {t.name: t for t in parse_test_table(TEST_C)}
    listed = {"0001": "needs KAFKA_PATH", "0022_consume_batch": "by name"}
    assert exception_reason(tests["0001_multiobj"], listed) == "needs KAFKA_PATH"
    assert exception_reason(tests["0022_consume_batch"], listed) == "by name"
    assert "TEST_F_LOCAL" in (exception_reason(tests["0022_consume_batch_local"], {}) or "")
    assert "https://example.invalid/529" in (
        exception_reason(tests["0028_long_topicnames"], {}) or "")
    assert "noautocreate" in (
        exception_reason(tests["0045_subscribe_update_topic_remove"], {}) or "")
    assert "TEST_F_MANUAL" in (exception_reason(tests["8000_idle"], {}) or "")
    assert exception_reason(tests["0103_transactions"], {}) is None  # default among its own
    assert exception_reason(tests["0049_consume_conn_close"], {}) is None


def test_the_summary_rows_are_read_without_colours_when_the_runner_printed_them() -> None:
    ran = parse_runner_output(OUTPUT)
    assert set(ran) == {"0022_consume_batch", "0022_consume_batch_local"}
    assert ran["0022_consume_batch"].state == "FAILED"
    assert ran["0022_consume_batch"].seconds == 8.25
    assert ran["0022_consume_batch"].message == "do_test():212: Expected 10 messages, got 9"
    assert ran["0022_consume_batch_local"].state == "SKIPPED"


def test_the_error_line_is_the_tests_first_failure_banner_not_the_ones_after_it() -> None:
    output = ('### Test "0081_admin (AlterConfigs:725)" failed at a.c:882:f() at T: ###\n'
              "ConfigResource #1: expected NO_ERROR (0), got INVALID_REQUEST\n"
              '### Test "0081_admin (AlterConfigs:725)" failed at a.c:891:f() at T: ###\n'
              'Test assertion failed: "!fails": See 1 previous failure(s)\n')
    assert error_line(output, "0081_admin") == \
        "ConfigResource #1: expected NO_ERROR (0), got INVALID_REQUEST"


def test_the_error_line_is_the_failure_banners_message_else_an_error_line() -> None:
    assert error_line(OUTPUT) == "Expected 10 messages, got 9"
    assert error_line("starting\n%3|ERROR|rdkafka: Connection refused\nbye\n") == \
        "%3|ERROR|rdkafka: Connection refused"
    assert error_line("only this\n\n") == "only this"
    assert error_line("") == ""


def test_a_run_gives_fail_and_exception_rows_when_one_test_failed_and_a_local_one_skipped(
        ) -> None:
    tests = [t for t in parse_test_table(TEST_C) if t.number == 22]
    rows = rows_for_run(tests, OUTPUT, 1, 9.1, {})
    assert [(r.name, r.outcome) for r in rows] == [
        ("0022_consume_batch", "fail"), ("0022_consume_batch_local", "exception")]
    assert rows[0].note == "do_test():212: Expected 10 messages, got 9"
    assert rows[0].seconds == 8.25


def test_a_killed_run_fails_its_tests_but_keeps_exceptions_when_no_summary_was_printed(
        ) -> None:
    tests = [t for t in parse_test_table(TEST_C) if t.number == 22]
    rows = rows_for_run(tests, "[0022_consume_batch / 1.0s] waiting\n", None, 120.0, {})
    assert [(r.outcome, r.seconds) for r in rows] == [("fail", 120.0), ("exception", 0.0)]
    assert rows[0].note.startswith("killed at the time bound (120 s)")


def test_a_crashed_runner_fails_the_test_with_its_exit_code_when_the_summary_lacks_it(
        ) -> None:
    tests = [SuiteTest("0001_multiobj", frozenset())]
    rows = rows_for_run(tests, "Segmentation fault\n", -11, 3.0, {})
    assert rows[0].outcome == "fail"
    assert rows[0].note == "test-runner exited -11 without finishing it: Segmentation fault"


def test_an_aborted_runner_names_the_tests_own_failure_when_main_failed_after_it() -> None:
    output = ('### Test "0011_produce_batch (record_fail:629)" failed at x.c:718:f() at T: ###\n'
              'Test assertion failed: "invalid_record_fail_cnt == 10"\n'
              '### Test "<MAIN>" failed at test.c:1946:test_wait_exit() at T: ###\n'
              "5 thread(s) still active in librdkafka\n"
              "test-runner: test.c:7702: test_fail0: Assertion `0' failed.\n")
    rows = rows_for_run([SuiteTest("0011_produce_batch", frozenset())], output, -6, 4.4, {})
    assert rows[0].note == ("test-runner exited -6 without finishing it: Test assertion "
                            'failed: "invalid_record_fail_cnt == 10"')


def test_a_pass_and_a_skip_by_the_runner_keep_its_seconds_and_reason() -> None:
    tests = [SuiteTest("0001_multiobj", frozenset()), SuiteTest("0002_unkpart", frozenset())]
    output = ("| 0001_multiobj | PASSED | 2.500s |\n"
              "| 0002_unkpart | SKIPPED | 0.010s | not applicable for broker version\n")
    rows = rows_for_run(tests, output, 0, 3.0, {})
    assert [(r.outcome, r.seconds, r.note) for r in rows] == [
        ("pass", 2.5, ""), ("skip", 0.01, "not applicable for broker version")]


def test_only_failures_outside_the_exceptions_fail_the_run_when_rows_are_checked() -> None:
    tests = {t.name: t for t in parse_test_table(TEST_C)}
    rows = [Row(1, "0001_multiobj", "fail", 1.0, "x"),
            Row(22, "0022_consume_batch", "fail", 1.0, "y"),
            Row(49, "0049_consume_conn_close", "pass", 1.0, "")]
    assert unexpected_failures(rows, {"0001": "needs KAFKA_PATH"}, tests) == [rows[1]]


def test_the_tables_show_every_row_and_the_counts_name_every_outcome() -> None:
    rows = [Row(1, "0001_multiobj", "pass", 2.5, ""),
            Row(22, "0022_consume_batch", "fail", 8.25, "a | b " + "x" * 200)]
    text = render_table(rows, width=100).splitlines()
    assert text[0].split() == ["test", "name", "outcome", "seconds", "note"]
    assert text[1].split() == ["0001", "0001_multiobj", "pass", "2.5"]
    assert len(text[2]) == 100
    assert text[2].endswith("...")
    markdown = render_markdown(rows).splitlines()
    assert markdown[3].startswith("| 0022 | `0022_consume_batch` | fail | 8.2 | a / b x")
    assert counts(rows) == {"pass": 1, "fail": 1, "skip": 0, "exception": 0}


@pytest.mark.parametrize("args", [["--tests", "0001-0099"], ["--tests", "99-1"]])
def test_bad_input_is_one_line_and_exit_2_before_anything_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    """A directory that is no librdkafka checkout, or a bad range: nothing is built or
    started (the work directory is not even made)."""
    assert main(["--source", str(tmp_path), "--work-dir", str(tmp_path / "work"), *args]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("error: ")
    assert not (tmp_path / "work").exists()
