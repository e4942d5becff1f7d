"""`kraft format --add-scram` and its bootstrap file (metadata.bootstrap): salted
credentials written durably, read back checked, damaged files and bad options refused
with one line, and the controller's rule for appending them (a fresh log only)."""

from __future__ import annotations

import hmac
from pathlib import Path

import pytest

from broker.kafka.sasl.scram import SCRAM_SHA_256, SCRAM_SHA_512, credential_from_password
from metadata import bootstrap
from metadata import records as rec
from metadata.controller import Controller
from metadata.delta import replay
from metadata.features import LATEST_METADATA_LEVEL
from metadata.image import MetadataImage
from raft.common.uuid import Uuid
from tools.cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def kraft_format(directory: Path, *scram: str) -> int:
    return main(["format", "--dir", str(directory), "--cluster-id", CLUSTER, "--node-id", "1",
                 *(f"--add-scram={s}" for s in scram)])


def test_format_writes_salted_credentials_when_given_add_scram(tmp_path: Path) -> None:
    assert kraft_format(tmp_path, "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                        "SCRAM-SHA-512=[name=bob,password=bob-pw,iterations=8192]") == 0
    data = (tmp_path / bootstrap.BOOTSTRAP_FILE).read_bytes()
    assert b"alice-secret" not in data
    assert b"bob-pw" not in data
    level, alice, bob = bootstrap.read_bootstrap_records(tmp_path)
    assert level == rec.FeatureLevel(name="metadata.version", feature_level=LATEST_METADATA_LEVEL)
    assert isinstance(alice, rec.UserScramCredential)
    assert isinstance(bob, rec.UserScramCredential)
    assert (alice.name, alice.mechanism, alice.iterations) == ("alice", "SCRAM-SHA-256", 4096)
    assert (bob.name, bob.mechanism, bob.iterations) == ("bob", "SCRAM-SHA-512", 8192)
    # the stored keys are the password's (a server checks a proof with them)
    expected = credential_from_password(SCRAM_SHA_512, "bob-pw", salt=bob.salt,
                                        iterations=8192)
    assert hmac.compare_digest(expected.stored_key, bob.stored_key)
    assert credential_from_password(SCRAM_SHA_256, "alice-secret", salt=alice.salt,
                                    iterations=4096).server_key == alice.server_key


def test_format_bootstraps_only_the_metadata_version_when_no_user_is_given(
        tmp_path: Path) -> None:
    assert kraft_format(tmp_path) == 0
    assert bootstrap.read_bootstrap_records(tmp_path) == [
        rec.FeatureLevel(name="metadata.version", feature_level=LATEST_METADATA_LEVEL)]


def test_a_directory_without_a_bootstrap_file_has_no_bootstrap_records(
        tmp_path: Path) -> None:
    assert bootstrap.read_bootstrap_records(tmp_path) == []


@pytest.mark.parametrize(("option", "message"), [
    ("SCRAM-SHA-1=[name=a,password=p]", "unknown SCRAM mechanism 'SCRAM-SHA-1'"),
    ("SCRAM-SHA-256=[password=p]", "needs name"),
    ("SCRAM-SHA-256=[name=a]", "needs password"),
    ("SCRAM-SHA-256=[name=a,password=p,colour=red]", "got 'colour'"),
    ("SCRAM-SHA-256=[name=a,password=p,iterations=99]", "iterations 99 outside 4096..16384"),
    ("SCRAM-SHA-256=[name=a,password=p,iterations=many]", "iterations must be a number"),
])
def test_format_refuses_add_scram_with_one_line_when_it_is_malformed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, message: str) -> None:
    assert kraft_format(tmp_path / "n", option) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "n" / "meta.properties").exists()  # nothing formatted


def test_damaged_bootstrap_file_is_refused_naming_it_when_read(tmp_path: Path) -> None:
    assert kraft_format(tmp_path, "SCRAM-SHA-256=[name=alice,password=pw]") == 0
    path = tmp_path / bootstrap.BOOTSTRAP_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(bootstrap.BootstrapError, match=f"{path}: checksum mismatch"):
        bootstrap.read_bootstrap_records(tmp_path)
    path.write_bytes(b"\x93not a bootstrap file")
    with pytest.raises(bootstrap.BootstrapError, match="unreadable|not a version 0"):
        bootstrap.read_bootstrap_records(tmp_path)


def test_bootstrap_refuses_records_other_than_credentials_when_written(tmp_path: Path) -> None:
    with pytest.raises(bootstrap.BootstrapError, match="only FeatureLevel and UserScramCredential"):
        bootstrap.write_bootstrap_records(tmp_path, [rec.Topic(name="t", topic_id=Uuid(7))])


def test_log_is_fresh_only_while_it_holds_raft_control_records() -> None:
    assert bootstrap.is_fresh_record(rec.LeaderChange(leader_id=1, voters=(1,)))
    assert bootstrap.is_fresh_record(rec.MetadataTopic(topic_id=Uuid(9)))
    assert not bootstrap.is_fresh_record(rec.RegisterBroker(
        broker_id=2, incarnation_id=Uuid(3), broker_epoch=4))
    assert not bootstrap.is_fresh_record(b"\xc1")  # undecodable: something was written
    assert bootstrap.is_fresh_image(MetadataImage.empty())
    assert bootstrap.is_fresh_image(replay([(0, rec.MetadataTopic(topic_id=Uuid(9)))]))
    assert not bootstrap.is_fresh_image(replay([
        (0, rec.Topic(name="t", topic_id=Uuid(7))), (1, rec.RemoveTopic(topic_id=Uuid(7)))]))


def test_controller_proposes_the_bootstrap_records_as_they_are_when_asked(
        tmp_path: Path) -> None:
    assert kraft_format(tmp_path, "SCRAM-SHA-256=[name=alice,password=pw]") == 0
    records = bootstrap.read_bootstrap_records(tmp_path)
    controller = Controller(replay([(0, rec.MetadataTopic(topic_id=Uuid(9)))]), now_ms=0)
    decision = controller.bootstrap(records, next_offset=1)
    assert decision.records == tuple(records)
    assert decision.base_offset == 1
    assert ("alice", "SCRAM-SHA-256") in controller.view.scram_credentials
