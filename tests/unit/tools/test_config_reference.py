"""docs/configuration.md's key table is `kraft config-keys`' output: a key added,
renamed or re-defaulted in tools/config/keys.py without that page fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.cli import main
from tools.config import KEYS, reference_table

README = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
BEGIN, END = "<!-- config-keys:begin -->\n", "\n<!-- config-keys:end -->"


def test_readme_config_table_matches_the_code() -> None:
    text = README.read_text()
    table = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    assert table == reference_table(), "paste `kraft config-keys` into docs/configuration.md"


def test_config_keys_command_prints_the_table_and_json(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config-keys"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == reference_table()
    assert main(["config-keys", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_key = {row["key"]: row for row in rows}
    assert set(by_key) >= {k.name for k in KEYS}
    assert by_key["controller.quorum.election.timeout.ms"]["aliases"] == \
        ["quorum.election.timeout.ms"]
    assert by_key["node.id"]["required"]
