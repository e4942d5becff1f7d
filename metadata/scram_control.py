"""The controller's SCRAM credential decisions (pure): AlterUserScramCredentials in,
`UserScramCredential` / `RemoveUserScramCredential` records and per-user results out;
DescribeUserScramCredentials answered from an image. Kafka's rules (KRaft's
ScramControlManager, KIP-554):

- results are per user, in the order users first appear in the request; a user's
  alterations apply all together or not at all;
- a (user, mechanism) named twice in one request (two upsertions, or an upsertion and a
  deletion) fails that user with DUPLICATE_RESOURCE;
- an empty user name, too few or too many iterations, or keys of the wrong length are
  UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM;
- deleting a credential that does not exist is RESOURCE_NOT_FOUND;
- describing a user without credentials is RESOURCE_NOT_FOUND, a user named twice
  DUPLICATE_RESOURCE; no users (None or empty) describes every user.

`emit` applies a record to the controller's delta (`metadata.controller._Batch.emit`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from metadata import records as rec
from metadata.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    ScramCredentialInfo,
    ScramCredentialUpsertion,
)
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredentialImage,
)
from raft.common.errors import ErrorCode

Emit = Callable[[rec.Record], int]
_Failure = tuple[ErrorCode, str]


def alter_user_scram_credentials(delta: MetadataDelta, emit: Emit,
                                 request: AlterUserScramCredentialsRequest
                                 ) -> AlterUserScramCredentialsResponse:
    alterations: list[tuple[str, str]] = [(d.name, d.mechanism) for d in request.deletions]
    alterations += [(u.name, u.mechanism) for u in request.upsertions]
    users = list(dict.fromkeys(name for name, _ in alterations))
    twice = {name for (name, _), count in Counter(alterations).items() if count > 1}
    failures: dict[str, _Failure] = {
        name: (ErrorCode.DUPLICATE_RESOURCE,
               "A user credential cannot be altered twice in the same request")
        for name in twice}
    current = delta.scram_credentials()
    for deletion in request.deletions:
        if deletion.name in failures:
            continue
        failure = _common_failure(deletion.name, deletion.mechanism)
        if failure is None and (deletion.name, deletion.mechanism) not in current:
            failure = (ErrorCode.RESOURCE_NOT_FOUND,
                       "Attempt to delete a user credential that does not exist")
        if failure is not None:
            failures[deletion.name] = failure
    for upsertion in request.upsertions:
        if upsertion.name in failures:
            continue
        failure = _common_failure(upsertion.name, upsertion.mechanism) or \
            _upsertion_failure(upsertion)
        if failure is not None:
            failures[upsertion.name] = failure
    for deletion in request.deletions:
        if deletion.name not in failures:
            emit(rec.RemoveUserScramCredential(name=deletion.name,
                                               mechanism=deletion.mechanism))
    for u in request.upsertions:
        if u.name not in failures:
            emit(rec.UserScramCredential(name=u.name, mechanism=u.mechanism, salt=u.salt,
                                         stored_key=u.stored_key, server_key=u.server_key,
                                         iterations=u.iterations))
    return AlterUserScramCredentialsResponse(results=tuple(
        AlterUserScramCredentialsResult(user=name) if name not in failures else
        AlterUserScramCredentialsResult(user=name, error_code=failures[name][0],
                                        error_message=failures[name][1])
        for name in users))


def _common_failure(name: str, mechanism: str) -> _Failure | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISMS:
        return (ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"Unknown SCRAM mechanism {mechanism!r} (known: "
                f"{', '.join(SCRAM_MECHANISMS)})")
    return None


def _upsertion_failure(upsertion: ScramCredentialUpsertion) -> _Failure | None:
    if upsertion.iterations < MIN_ITERATIONS:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Too few iterations: {upsertion.iterations} (at least {MIN_ITERATIONS})")
    if upsertion.iterations > MAX_ITERATIONS:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Too many iterations: {upsertion.iterations} (at most {MAX_ITERATIONS})")
    digest_bytes = SCRAM_MECHANISMS[upsertion.mechanism][1]
    if not upsertion.salt:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt must not be empty"
    if len(upsertion.stored_key) != digest_bytes or len(upsertion.server_key) != digest_bytes:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"{upsertion.mechanism} keys must be {digest_bytes} bytes")
    return None


def describe_user_scram_credentials(image: MetadataImage,
                                    request: DescribeUserScramCredentialsRequest
                                    ) -> DescribeUserScramCredentialsResponse:
    by_user = credentials_by_user(image.scram_credentials)
    if not request.users:
        return DescribeUserScramCredentialsResponse(results=tuple(
            _described(name, by_user[name]) for name in sorted(by_user)))
    counts = Counter(request.users)
    results = []
    for name in dict.fromkeys(request.users):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice "
                              "in a single request"))
        elif name not in by_user:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message="Attempt to describe a user credential that does not exist"))
        else:
            results.append(_described(name, by_user[name]))
    return DescribeUserScramCredentialsResponse(results=tuple(results))


def credentials_by_user(credentials: Mapping[tuple[str, str], ScramCredentialImage]
                        ) -> dict[str, list[ScramCredentialImage]]:
    """user -> their credentials, by mechanism (SCRAM-SHA-256 first)."""
    by_user: dict[str, list[ScramCredentialImage]] = {}
    for key in sorted(credentials, key=lambda k: (k[0], SCRAM_MECHANISMS[k[1]][0])):
        by_user.setdefault(key[0], []).append(credentials[key])
    return by_user


def _described(name: str, credentials: list[ScramCredentialImage]
               ) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(user=name, credential_infos=tuple(
        ScramCredentialInfo(mechanism=c.mechanism, iterations=c.iterations)
        for c in credentials))
