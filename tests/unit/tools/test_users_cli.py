"""`kraft users` usage: what it refuses before it dials anything (one line, exit 2), and
the kafka-configs.sh --add-config form it reads."""

from __future__ import annotations

import pytest

from tools.cli import main
from tools.commands.users import parse_scram_configs
from tools.errors import CommandError

TARGET = ["users", "--bootstrap-controller", "127.0.0.1:9"]  # never dialled here


def test_add_config_reads_mechanisms_with_bracketed_values_when_given() -> None:
    assert parse_scram_configs(
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=x=y]",
        option="--add-config", need=("password",), allowed=("iterations", "password")) == [
        ("SCRAM-SHA-256", {"iterations": "8192", "password": "alice-secret"}),
        ("SCRAM-SHA-512", {"password": "x=y"})]


def test_add_config_never_echoes_the_password_when_refused() -> None:
    with pytest.raises(CommandError) as caught:
        parse_scram_configs("SCRAM-SHA-256=[pasword=hunter2]", option="--add-config",
                            need=("password",), allowed=("iterations", "password"))
    assert "hunter2" not in str(caught.value)
    assert "'pasword'" in str(caught.value)


@pytest.mark.parametrize(("args", "message"), [
    (["--alter", "--add-config", "SCRAM-SHA-256=[password=p]"], "one --entity-name"),
    (["--alter", "--entity-name", "a"], "needs --add-config or --delete-config"),
    (["--alter", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[iterations=9000]"],
     "needs password"),
    (["--alter", "--entity-name", "a", "--delete-config", "PLAIN"],
     "unknown SCRAM mechanism 'PLAIN'"),
    (["--describe", "--add-config", "SCRAM-SHA-256=[password=p]"], "go with --alter"),
])
def test_usage_error_is_one_line_and_exit_2_when_options_are_wrong(
        capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main([*TARGET, *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("error: ")
