"""`--bootstrap-server` names brokers and `--bootstrap-controller` controllers, as in
Kafka's tools: the usage each verb accepts, checked before anything is sent."""

from __future__ import annotations

import pytest

from tools.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("args", "error"), [
    (("topics", "--bootstrap-server", " ", "--list"), "--bootstrap-server: no broker address"),
    (("topics", "--bootstrap-controller", "", "--list"), "--bootstrap-controller: no controller"),
    (("topics", "--bootstrap-server", "127.0.0.1:9", "--alter", "--topic", "t", "--new-name",
      "u"), "Kafka's protocol has no topic rename"),
    (("quorum", "describe", "--bootstrap-server", "", "--status"), "no broker address"),
    # Kafka's protocol has no Append; a broker's configs are the brokers' to describe
    (("quorum", "append", "--bootstrap-server", "127.0.0.1:9", "--count", "1"),
     "one of the arguments --bootstrap-controller --cluster is required"),
    (("configs", "--bootstrap-controller", "127.0.0.1:9", "--entity-type", "brokers",
      "--entity-name", "1", "--describe"), "give --bootstrap-server or --cluster"),
    (("configs", "--bootstrap-server", "127.0.0.1:9", "--entity-type", "brokers",
      "--entity-name", "b1", "--describe"), "a broker id (or --entity-default)"),
    (("configs", "--bootstrap-server", "127.0.0.1:9", "--entity-type", "topics",
      "--entity-default", "--describe"), "--entity-default goes with --entity-type brokers"),
])
def test_bad_targets_exit_2_naming_the_option(capsys: pytest.CaptureFixture[str],
                                              args: tuple[str, ...], error: str) -> None:
    code, err = run(capsys, *args)
    assert code == 2, err
    assert error in err


def test_bootstrap_controller_carries_no_deprecation_note(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listens on port 9: one error line, exit 1, and no note about the flag."""
    code, err = run(capsys, "topics", "--bootstrap-controller", "127.0.0.1:9", "--list",
                    "--timeout", "0.2")
    assert code == 1
    assert err.count("\n") == 1
    assert "deprecat" not in err
