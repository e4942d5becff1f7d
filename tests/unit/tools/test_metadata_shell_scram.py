"""kraft metadata-shell: /image/scram/<mechanism>/<user> shows a user's SCRAM credential
(its iterations; its salt and keys redacted)."""

from __future__ import annotations

import json

from metadata import records as rec
from tests.unit.tools.test_metadata_shell import run, shell_of


def credential(name: str, mechanism: str, iterations: int) -> rec.UserScramCredential:
    size = 32 if mechanism == "SCRAM-SHA-256" else 64
    return rec.UserScramCredential(name=name, mechanism=mechanism, salt=b"s" * 16,
                                   stored_key=b"k" * size, server_key=b"v" * size,
                                   iterations=iterations)


def test_scram_credentials_are_files_by_mechanism_and_user_when_set() -> None:
    shell = shell_of([credential("bob", "SCRAM-SHA-256", 4096),
                      credential("alice", "SCRAM-SHA-256", 8192),
                      credential("alice", "SCRAM-SHA-512", 4096)])
    assert run(shell, "ls /image/scram") == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert run(shell, "ls /image/scram/SCRAM-SHA-256") == ("alice", "bob")
    shown = json.loads("\n".join(run(shell, "cat /image/scram/SCRAM-SHA-256/alice")))
    assert shown == {"name": "alice", "mechanism": "SCRAM-SHA-256", "salt": rec.REDACTED,
                     "stored_key": rec.REDACTED, "server_key": rec.REDACTED,
                     "iterations": 8192}
    assert "a2tr" not in "\n".join(run(shell, "cat /image/scram/SCRAM-SHA-512/alice"))


def test_scram_directory_is_empty_when_no_user_has_a_credential() -> None:
    assert run(shell_of([rec.NoOp()]), "ls /image/scram") == ()
