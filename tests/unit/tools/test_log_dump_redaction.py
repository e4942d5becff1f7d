"""Secrets in `kraft dump-log` and `kraft metadata-shell`: a SCRAM credential's salt,
StoredKey and ServerKey show as `(redacted)` in text and JSON, from segments and from
snapshot checkpoints, and a credential record that does not decode shows neither its
bytes nor its reason; `--print-sensitive` shows them (base64). Through the real CLI
entry point, on files written by the real log and snapshot writers. `kraft replay`
never carries them in its tables."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import msgpack
import pytest

from metadata import records as rec
from metadata.delta import replay
from metadata.image_snapshot import image_records
from raft.log import DiskLog
from raft.snapshot import SnapshotId
from tests.support.checkpoints import write_checkpoint
from tools.cli import main
from tools.replay.sequential import decode_record, record_columns

SALT = b"salt-salt-salt-salt-salt-salt-32"
STORED_KEY = bytes(range(100, 132))
SERVER_KEY = bytes(range(200, 232))
CREDENTIAL = rec.UserScramCredential(name="alice", mechanism="SCRAM-SHA-256", salt=SALT,
                                     stored_key=STORED_KEY, server_key=SERVER_KEY,
                                     iterations=4096)
SECRETS = (SALT, STORED_KEY, SERVER_KEY)


def leaked(out: str) -> list[str]:
    """Each secret in any form the dump could print it: base64, hex, Python's repr."""
    forms = []
    for secret in SECRETS:
        forms += [base64.b64encode(secret).decode(), secret.hex(), repr(secret)[2:-1]]
    return [form for form in forms if form in out]


def bad_credential() -> bytes:
    """A UserScramCredential whose salt is text: it does not decode, and the reason
    quotes the value."""
    fields = dict(CREDENTIAL.to_dict(), salt=SALT.decode())
    return msgpack.packb(fields)


def write_segment(log_dir: Path) -> Path:
    with DiskLog.open_metadata_log(log_dir) as log:
        log.append(1, [CREDENTIAL.encode(), bad_credential()])
        log.flush()
        return log.directory


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["dump-log", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("as_json", [False, True])
def test_segment_dump_redacts_scram_secrets_unless_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool) -> None:
    write_segment(tmp_path)
    json_flag = ["--json"] if as_json else []
    out = dump(capsys, "--dir", str(tmp_path), *json_flag)
    assert "UserScramCredential" in out
    assert out.count(rec.REDACTED) == 4  # three fields, and the bytes of the bad record
    assert leaked(out) == []
    shown = dump(capsys, "--dir", str(tmp_path), *json_flag, "--print-sensitive")
    assert rec.REDACTED not in shown
    assert len(leaked(shown)) >= len(SECRETS)


def test_segment_json_shows_redacted_fields_and_the_undecodable_credential_without_bytes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_segment(tmp_path)
    good, bad = (json.loads(line)
                 for line in dump(capsys, "--dir", str(tmp_path), "--json").splitlines())
    assert good["record"] == {"version": 0, "name": "alice", "mechanism": "SCRAM-SHA-256",
                              "salt": rec.REDACTED, "stored_key": rec.REDACTED,
                              "server_key": rec.REDACTED, "iterations": 4096}
    assert bad["raw"] == rec.REDACTED
    assert "UserScramCredential" in bad["error"]
    assert "--print-sensitive" in bad["error"]

    good, bad = (json.loads(line) for line in dump(
        capsys, "--dir", str(tmp_path), "--json", "--print-sensitive").splitlines())
    assert [base64.b64decode(good["record"][k]) for k in ("salt", "stored_key",
                                                           "server_key")] == list(SECRETS)
    assert bad["raw"] == bad_credential().hex()


@pytest.mark.parametrize("as_json", [False, True])
def test_checkpoint_dump_redacts_scram_secrets_unless_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool) -> None:
    image = replay(enumerate([CREDENTIAL]))
    path = write_checkpoint(tmp_path, SnapshotId(end_offset=1, epoch=1),
                            [r.encode() for r in image_records(image)])
    json_flag = ["--json"] if as_json else []
    out = dump(capsys, "--files", str(path), *json_flag)
    assert "UserScramCredential" in out
    assert out.count(rec.REDACTED) == 3
    assert leaked(out) == []
    assert len(leaked(dump(capsys, "--files", str(path), *json_flag,
                           "--print-sensitive"))) >= len(SECRETS)


def test_metadata_shell_redacts_scram_secrets_unless_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = replay(enumerate([CREDENTIAL]))
    path = write_checkpoint(tmp_path, SnapshotId(end_offset=1, epoch=1),
                            [r.encode() for r in image_records(image)])
    command = ["metadata-shell", "--snapshot", str(path)]
    assert main([*command, "--", "cat", "/image/scram/SCRAM-SHA-256/alice"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == {"name": "alice", "mechanism": "SCRAM-SHA-256", "salt": rec.REDACTED,
                     "stored_key": rec.REDACTED, "server_key": rec.REDACTED,
                     "iterations": 4096}
    assert main([*command, "--print-sensitive", "--", "cat",
                 "/image/scram/SCRAM-SHA-256/alice"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert base64.b64decode(shown["server_key"]) == SERVER_KEY


def test_replay_report_columns_of_a_credential_hold_no_secret_when_decoded() -> None:
    """`kraft replay`'s tables and examples show a record through `record_columns`,
    which keeps its type and name only."""
    kind, fields, detail = decode_record(CREDENTIAL.encode())
    columns = record_columns(kind, fields)
    assert columns == {"record_type": "USER_SCRAM_CREDENTIAL", "name": "alice"}
    assert detail is None
