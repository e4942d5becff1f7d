"""The librdkafka suite's pure parts, without librdkafka: test ranges, test.c's table,
test-runner's output, the outcome of each test and the table, which scenario each test
runs on, and each scenario's test.conf and environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from tools.librdkafka_suite.__main__ import main
from tools.librdkafka_suite.client_certs import write_client_files
from tools.librdkafka_suite.exception_list import EXCEPTIONS
from tools.librdkafka_suite.outcomes import (
    Row,
    SuiteInputError,
    SuiteTest,
    counts,
    derived_exception,
    error_line,
    exception_reason,
    parse_runner_output,
    parse_test_ranges,
    parse_test_table,
    render_markdown,
    render_table,
    rows_for_run,
    runs_by_scenario,
    split_runs,
    unexpected_failures,
)
from tools.librdkafka_suite.scenarios import (
    SCENARIOS,
    ClientFiles,
    conf_text,
    file_suffix,
    runner_environment,
)
from tools.tls_certs import write_cluster_tls

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
    assert exception_reason(tests["0045_subscribe_update_topic_remove"], {}) is None
    ak23_only = SuiteTest("0103_transactions_ak23", frozenset(), scenario="ak23")
    assert "'ak23' scenario" in (exception_reason(ak23_only, {}) or "")
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
    assert text[0].split() == ["test", "name", "scenario", "outcome", "seconds", "note"]
    assert text[1].split() == ["0001", "0001_multiobj", "default", "pass", "2.5"]
    assert len(text[2]) == 100
    assert text[2].endswith("...")
    markdown = render_markdown(rows).splitlines()
    assert markdown[3].startswith(
        "| 0022 | `0022_consume_batch` | default | fail | 8.2 | a / b x")
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


def test_each_selected_test_runs_on_its_scenario_one_run_per_number_default_first() -> None:
    """test.c's scenario (noautocreate), the runner's own (0097 on SSL, 0135 on SASL),
    the default otherwise; a test no cluster fits (only `ak23`) is shown with the default
    run; numbers outside the selection are left out."""
    table = [*parse_test_table(TEST_C), SuiteTest("0045_subscribe_update", frozenset()),
             SuiteTest("0097_ssl_verify", frozenset()),
             SuiteTest("0097_ssl_verify_local", frozenset({"TEST_F_LOCAL"})),
             SuiteTest("0103_transactions_ak23", frozenset(), scenario="ak23"),
             SuiteTest("0135_sasl_credentials", frozenset())]
    runs = runs_by_scenario(table, [1, 22, 45, 97, 103, 135])
    assert [(name, [[t.name for t in tests] for tests in by_number])
            for name, by_number in runs] == [
        ("default", [["0001_multiobj"], ["0022_consume_batch", "0022_consume_batch_local"],
                     ["0045_subscribe_update"],
                     ["0103_transactions", "0103_transactions_ak23"]]),
        ("noautocreate", [["0045_subscribe_update_topic_remove"]]),
        ("ssl", [["0097_ssl_verify", "0097_ssl_verify_local"]]),
        ("sasl_plain", [["0135_sasl_credentials"]])]
    assert runs_by_scenario(table, [1]) == [("default", [[table[0]]])]


def test_a_number_whose_tests_are_all_exceptions_is_not_run_unless_they_are_asked_for(
        ) -> None:
    """So a scenario with nothing else to run starts no cluster: 0097 is only its local
    test when 0097_ssl_verify is listed."""
    verify = SuiteTest("0097_ssl_verify", frozenset())
    local = SuiteTest("0097_ssl_verify_local", frozenset({"TEST_F_LOCAL"}))
    runs = [[verify, local]]
    assert split_runs(runs, {}, include_exceptions=False) == (runs, [])
    assert split_runs(runs, {"0097_ssl_verify": "x"}, include_exceptions=False) == ([], runs)
    assert split_runs(runs, {"0097_ssl_verify": "x"}, include_exceptions=True) == (runs, [])


def test_the_rows_of_a_run_name_the_scenario_their_tests_ran_on() -> None:
    tests = [SuiteTest("0045_subscribe_update_topic_remove", frozenset(),
                       scenario="noautocreate")]
    output = "| 0045_subscribe_update_topic_remove | PASSED | 1.500s |\n"
    assert rows_for_run(tests, output, 0, 2.0, {}) == [
        Row(45, "0045_subscribe_update_topic_remove", "pass", 1.5, "", "noautocreate")]


def test_scenario_settings_turn_off_auto_creation_or_secure_the_listener() -> None:
    assert SCENARIOS["default"].settings["auto.create.topics.enable"] is True
    assert SCENARIOS["noautocreate"].settings["auto.create.topics.enable"] is False
    assert SCENARIOS["noautocreate"].runner_scenario == "noautocreate"
    assert SCENARIOS["ssl"].tls
    assert not SCENARIOS["default"].tls
    sasl = SCENARIOS["sasl_plain"].settings
    assert "PLAINTEXT:SASL_PLAINTEXT" in str(sasl["listener.security.protocol.map"])
    assert 'user_testuser="testpass"' in str(
        sasl["listener.name.plaintext.plain.sasl.jaas.config"])
    for scenario in SCENARIOS.values():  # librdkafka's partitions and replicas everywhere
        assert (scenario.settings["num.partitions"],
                scenario.settings["default.replication.factor"]) == (4, 3)


def client_files(directory: Path) -> ClientFiles:
    return ClientFiles(
        priv_pem=directory / "p.pem", priv_der=directory / "p.der",
        pub_pem=directory / "c.pem", pub_der=directory / "c.der", pkcs=directory / "c.pfx",
        ca_pem=directory / "ca.pem", ca_der=directory / "ca.der",
        all_cas_pem=directory / "all.pem", password="pw")


def test_the_test_conf_names_the_brokers_and_how_each_scenario_logs_in() -> None:
    brokers = ["127.0.0.1:1", "127.0.0.1:2"]
    # librdkafka's own harness doubles each test's timeout (tests/LibrdkafkaTestApp.py)
    assert conf_text(SCENARIOS["default"], brokers) == \
        "metadata.broker.list=127.0.0.1:1,127.0.0.1:2\ntest.timeout.multiplier=2\n"
    assert conf_text(SCENARIOS["sasl_plain"], brokers).splitlines()[2:] == [
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
        "sasl.username=testuser", "sasl.password=testpass"]
    files = client_files(Path("/run"))
    assert conf_text(SCENARIOS["ssl"], brokers, files).splitlines()[2:] == [
        "security.protocol=SSL", "ssl.ca.location=/run/ca.pem",
        "ssl.certificate.location=/run/c.pem", "ssl.key.location=/run/p.pem",
        "ssl.key.password=pw"]
    with pytest.raises(ValueError, match="certificate files"):
        conf_text(SCENARIOS["ssl"], brokers)


def test_the_environment_gives_the_runners_scenario_and_trivups_ssl_files() -> None:
    assert runner_environment(SCENARIOS["default"]) == {"TEST_SCENARIO": "default"}
    assert runner_environment(SCENARIOS["noautocreate"]) == {"TEST_SCENARIO": "noautocreate"}
    environment = runner_environment(SCENARIOS["ssl"], client_files(Path("/run")))
    # every SSL_* variable 0097_ssl_verify reads, and the broker's ssl.client.auth
    assert {key: environment[key] for key in (
        "SSL_pkcs", "SSL_pub_der", "SSL_pub_pem", "SSL_priv_der", "SSL_priv_pem",
        "SSL_ca_der", "SSL_all_cas_pem", "SSL_password", "SSL_client_auth")} == {
        "SSL_pkcs": "/run/c.pfx", "SSL_pub_der": "/run/c.der", "SSL_pub_pem": "/run/c.pem",
        "SSL_priv_der": "/run/p.der", "SSL_priv_pem": "/run/p.pem",
        "SSL_ca_der": "/run/ca.der", "SSL_all_cas_pem": "/run/all.pem",
        "SSL_password": "pw", "SSL_client_auth": "required"}
    assert environment["TEST_SCENARIO"] == "default"


def test_only_the_default_scenarios_files_keep_their_old_names() -> None:
    assert file_suffix("default") == ""
    assert file_suffix("ssl") == "-ssl"


def test_the_client_files_are_one_key_and_certificate_signed_by_the_clusters_ca(
        tmp_path: Path) -> None:
    """In every form 0097_ssl_verify loads them: the PEM and DER pairs match, the PKCS#12
    opens with the password and carries the CA, the all-CAs file ends with the cluster's
    CA after another one; the keys are private to the user."""
    ca = write_cluster_tls(tmp_path / "cluster", [1]).ca_file
    files = write_client_files(tmp_path / "client", tmp_path / "cluster")
    ca_cert = x509.load_pem_x509_certificate(ca.read_bytes())
    chain = x509.load_pem_x509_certificates(files.pub_pem.read_bytes())
    assert chain[1] == ca_cert
    chain[0].verify_directly_issued_by(ca_cert)
    assert x509.load_der_x509_certificate(files.pub_der.read_bytes()) == chain[0]
    assert x509.load_der_x509_certificate(files.ca_der.read_bytes()) == ca_cert
    key = serialization.load_pem_private_key(files.priv_pem.read_bytes(), None)
    assert serialization.load_der_private_key(files.priv_der.read_bytes(), None) \
        .public_key() == key.public_key() == chain[0].public_key()
    bundle = pkcs12.load_pkcs12(files.pkcs.read_bytes(), files.password.encode())
    assert bundle.cert is not None
    assert bundle.cert.certificate == chain[0]
    assert [c.certificate for c in bundle.additional_certs] == [ca_cert]
    with pytest.raises(ValueError, match="Invalid password"):
        pkcs12.load_pkcs12(files.pkcs.read_bytes(), b"wrong")
    all_cas = x509.load_pem_x509_certificates(files.all_cas_pem.read_bytes())
    assert len(all_cas) == 2
    assert all_cas[0] != ca_cert
    assert all_cas[1] == ca_cert
    assert {p.stat().st_mode & 0o777 for p in (files.priv_pem, files.priv_der, files.pkcs)} \
        == {0o600}


def test_0097s_local_test_keeps_its_own_reason_while_its_broker_test_is_listed() -> None:
    verify = SuiteTest("0097_ssl_verify", frozenset())
    local = SuiteTest("0097_ssl_verify_local", frozenset({"TEST_F_LOCAL"}))
    assert exception_reason(verify, EXCEPTIONS) == EXCEPTIONS["0097_ssl_verify"]
    assert exception_reason(local, EXCEPTIONS) == derived_exception(local)
    assert derived_exception(local) is not None
