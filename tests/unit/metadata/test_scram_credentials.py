"""SCRAM credentials in the metadata: UserScramCredential / RemoveUserScramCredential
replayed into the image (in its content hash and its snapshot records), and the
controller's AlterUserScramCredentials / DescribeUserScramCredentials decisions."""

from __future__ import annotations

import random

import pytest

from metadata import records as rec
from metadata.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    decode_request,
    decode_response,
    encode_body,
)
from metadata.controller import Controller
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.image_snapshot import (
    image_from_bytes,
    image_from_records,
    image_record_bytes,
    image_records,
)
from metadata.scram_control import describe_user_scram_credentials
from raft.common.errors import ErrorCode


def credential(name: str = "alice", mechanism: str = "SCRAM-SHA-256", *,
               iterations: int = 4096, key: bytes = b"k") -> rec.UserScramCredential:
    size = 32 if mechanism == "SCRAM-SHA-256" else 64
    return rec.UserScramCredential(name=name, mechanism=mechanism, salt=b"salt-" + key,
                                   stored_key=key * size, server_key=b"s" * size,
                                   iterations=iterations)


def image_of(*records: rec.Record) -> MetadataImage:
    return replay(enumerate(records))


def test_credentials_are_in_the_image_when_replayed() -> None:
    image = image_of(credential(), credential(mechanism="SCRAM-SHA-512"),
                     credential("bob", key=b"b"),
                     credential(key=b"n"))  # replaces alice's SCRAM-SHA-256
    assert sorted(image.scram_credentials) == [
        ("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512"), ("bob", "SCRAM-SHA-256")]
    assert image.scram_credentials[("alice", "SCRAM-SHA-256")].stored_key == b"n" * 32
    assert image.anomaly_count == 0


def test_credential_is_gone_when_removed() -> None:
    image = image_of(credential(), credential(mechanism="SCRAM-SHA-512"),
                     rec.RemoveUserScramCredential(name="alice", mechanism="SCRAM-SHA-256"))
    assert list(image.scram_credentials) == [("alice", "SCRAM-SHA-512")]


@pytest.mark.parametrize(("record", "reason"), [
    (credential(mechanism="SCRAM-SHA-1"), "unknown SCRAM mechanism"),
    (credential(name=""), "empty user name"),
    (credential(iterations=4095), "iterations 4095 outside"),
    (credential(iterations=16385), "iterations 16385 outside"),
    (rec.UserScramCredential(name="a", mechanism="SCRAM-SHA-512", salt=b"s",
                             stored_key=b"x" * 32, server_key=b"y" * 32, iterations=4096),
     "keys must be 64 bytes"),
    (rec.RemoveUserScramCredential(name="nobody", mechanism="SCRAM-SHA-256"),
     "no SCRAM-SHA-256 credential for user 'nobody'"),
])
def test_replay_skips_a_credential_record_when_it_is_invalid(record: rec.Record,
                                                             reason: str) -> None:
    image = image_of(record)
    assert len(image.scram_credentials) == 0
    assert image.anomaly_count == 1
    assert reason in image.anomalies[0].reason


def test_content_hash_covers_credentials_when_any_are_set() -> None:
    base = image_of(rec.NoOp(), rec.NoOp())
    with_alice = image_of(rec.NoOp(), credential())
    other_key = image_of(rec.NoOp(), credential(key=b"z"))
    assert len({base.content_hash(), with_alice.content_hash(),
                other_key.content_hash()}) == 3
    # an image whose credentials were all removed hashes as one that never had any
    removed = image_of(credential(), rec.RemoveUserScramCredential(
        name="alice", mechanism="SCRAM-SHA-256"))
    assert removed.content_hash() == base.content_hash()


def test_snapshot_records_rebuild_the_credentials_when_replayed() -> None:
    image = image_of(credential("bob", key=b"b"), credential(),
                     credential(mechanism="SCRAM-SHA-512"), rec.NoOp())
    records = image_records(image)
    assert [(r.name, r.mechanism) for r in records if isinstance(r, rec.UserScramCredential)
            ] == [("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512"),
                  ("bob", "SCRAM-SHA-256")]
    rebuilt = image_from_records([rec.decode(r.encode()) for r in records],
                                 image.last_applied_offset)
    assert rebuilt.content_hash() == image.content_hash()
    assert dict(rebuilt.scram_credentials) == dict(image.scram_credentials)


# --- the controller's decisions --------------------------------------------------------


def upsertion(name: str = "alice", mechanism: str = "SCRAM-SHA-256", *,
              iterations: int = 8192) -> ScramCredentialUpsertion:
    size = 32 if mechanism == "SCRAM-SHA-256" else 64
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations,
                                    salt=b"salt", stored_key=b"k" * size,
                                    server_key=b"s" * size)


def alter(controller: Controller, *, upsertions: tuple[ScramCredentialUpsertion, ...] = (),
          deletions: tuple[ScramCredentialDeletion, ...] = ()
          ) -> tuple[list[rec.Record], list[tuple[str, int, str | None]]]:
    decision = controller.handle(
        AlterUserScramCredentialsRequest(upsertions=upsertions, deletions=deletions),
        now_ms=0, rng=random.Random(0))
    controller.on_committed([(decision.base_offset + i, r)
                             for i, r in enumerate(decision.records)])
    response = decision.response
    assert isinstance(response, AlterUserScramCredentialsResponse)
    return list(decision.records), [(r.user, r.error_code, r.error_message)
                                    for r in response.results]


def test_controller_writes_credential_records_when_users_are_altered() -> None:
    controller = Controller(MetadataImage.empty(), now_ms=0)
    records, results = alter(controller, upsertions=(
        upsertion(), upsertion(mechanism="SCRAM-SHA-512"), upsertion("bob")))
    assert [(type(r).__name__, r.name, r.mechanism) for r in records  # type: ignore[attr-defined]
            ] == [("UserScramCredential", "alice", "SCRAM-SHA-256"),
                  ("UserScramCredential", "alice", "SCRAM-SHA-512"),
                  ("UserScramCredential", "bob", "SCRAM-SHA-256")]
    assert results == [("alice", 0, None), ("bob", 0, None)]
    records, results = alter(controller, deletions=(
        ScramCredentialDeletion(name="alice", mechanism="SCRAM-SHA-512"),))
    assert records == [rec.RemoveUserScramCredential(name="alice", mechanism="SCRAM-SHA-512")]
    assert sorted(controller.committed.scram_credentials) == [
        ("alice", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-256")]


@pytest.mark.parametrize(("request_kwargs", "code", "message"), [
    ({"upsertions": (upsertion(iterations=100),)}, ErrorCode.UNACCEPTABLE_CREDENTIAL,
     "Too few iterations"),
    ({"upsertions": (upsertion(iterations=20000),)}, ErrorCode.UNACCEPTABLE_CREDENTIAL,
     "Too many iterations"),
    ({"upsertions": (upsertion(""),)}, ErrorCode.UNACCEPTABLE_CREDENTIAL,
     "Username must not be empty"),
    ({"upsertions": (upsertion(mechanism="PLAIN"),)}, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
     "Unknown SCRAM mechanism"),
    ({"upsertions": (upsertion(), upsertion(iterations=4096))}, ErrorCode.DUPLICATE_RESOURCE,
     "altered twice"),
    ({"upsertions": (upsertion(),),
      "deletions": (ScramCredentialDeletion(name="alice", mechanism="SCRAM-SHA-256"),)},
     ErrorCode.DUPLICATE_RESOURCE, "altered twice"),
    ({"deletions": (ScramCredentialDeletion(name="alice", mechanism="SCRAM-SHA-256"),)},
     ErrorCode.RESOURCE_NOT_FOUND, "does not exist"),
])
def test_controller_refuses_a_user_and_writes_nothing_for_them_when_an_alteration_is_bad(
        request_kwargs: dict[str, object], code: ErrorCode, message: str) -> None:
    controller = Controller(MetadataImage.empty(), now_ms=0)
    records, results = alter(controller, **request_kwargs)  # type: ignore[arg-type]
    assert records == []
    ((_, error, text),) = results
    assert error == code
    assert text is not None
    assert message in text


def test_other_users_are_altered_when_one_user_is_refused() -> None:
    controller = Controller(MetadataImage.empty(), now_ms=0)
    records, results = alter(controller, upsertions=(upsertion(iterations=1), upsertion("bob")))
    assert [r.name for r in records] == ["bob"]  # type: ignore[attr-defined]
    assert [(u, e) for u, e, _ in results] == [("alice", ErrorCode.UNACCEPTABLE_CREDENTIAL),
                                              ("bob", 0)]


def test_describe_lists_users_and_mechanisms_when_asked_for_all_or_some() -> None:
    image = image_of(credential("bob", key=b"b"), credential(mechanism="SCRAM-SHA-512"),
                     credential(iterations=8192))
    everyone = describe_user_scram_credentials(image, DescribeUserScramCredentialsRequest())
    assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in everyone.results] == [
        ("alice", [("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)]),
        ("bob", [("SCRAM-SHA-256", 4096)])]
    some = describe_user_scram_credentials(image, DescribeUserScramCredentialsRequest(
        users=("bob", "carol", "alice", "alice")))
    assert [(r.user, r.error_code) for r in some.results] == [
        ("bob", 0), ("carol", ErrorCode.RESOURCE_NOT_FOUND),
        ("alice", ErrorCode.DUPLICATE_RESOURCE)]


def test_admin_codec_carries_credentials_when_encoded_and_decoded() -> None:
    request = AlterUserScramCredentialsRequest(
        upsertions=(upsertion(),),
        deletions=(ScramCredentialDeletion(name="bob", mechanism="SCRAM-SHA-512"),))
    assert decode_request("AlterUserScramCredentials", encode_body(request)) == request
    response = describe_user_scram_credentials(
        image_of(credential()), DescribeUserScramCredentialsRequest(users=("alice",)))
    assert decode_response("DescribeUserScramCredentials", encode_body(response)) == response


def test_snapshot_bytes_keep_the_credentials_when_written_and_loaded() -> None:
    """The writer's path (image_record_bytes) and the loader's (image_from_bytes), as a
    node's snapshot file holds them."""
    image = image_of(credential("bob", key=b"b"), credential(mechanism="SCRAM-SHA-512"))
    loaded = image_from_bytes(list(image_record_bytes(image)), image.last_applied_offset)
    assert dict(loaded.scram_credentials) == dict(image.scram_credentials)
    assert loaded.content_hash() == image.content_hash()
