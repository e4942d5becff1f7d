"""Topic auto-creation's rule (broker/kafka/admin/auto_create.py) and the Metadata answer
it shapes: created only when enabled, allowed by the request and by the caller's CREATE
right; illegal names refused; internal topics left to their owners."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema

from broker.kafka.admin import metadata_api
from broker.kafka.admin.auto_create import allows_auto_creation, unknown_topic_answer
from broker.settings import AutoCreateSettings
from metadata.image import MetadataImage
from metadata.topic_names import GROUP_METADATA_TOPIC_NAME, invalid_topic_name_reason
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tools.client import admin

ON = AutoCreateSettings()
OFF = AutoCreateSettings(enabled=False)
CREATE = ErrorCode.LEADER_NOT_AVAILABLE


@pytest.mark.parametrize(("settings", "requested", "may_create", "expected"), [
    (ON, True, True, CREATE),
    (OFF, True, True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ON, False, True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ON, True, False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
])
def test_a_legal_name_is_created_only_when_enabled_requested_and_allowed(
        settings: AutoCreateSettings, requested: bool, may_create: bool,
        expected: ErrorCode) -> None:
    assert unknown_topic_answer("orders", settings=settings, requested=requested,
                                may_create=may_create) == expected


@given(st.text(max_size=300))
def test_an_illegal_name_is_never_created(name: str) -> None:
    answer = unknown_topic_answer(name, settings=ON, requested=True, may_create=True)
    if invalid_topic_name_reason(name) is not None:
        assert answer == ErrorCode.INVALID_TOPIC_EXCEPTION
    else:
        assert answer == CREATE


def test_internal_topics_are_left_to_their_owners() -> None:
    assert unknown_topic_answer(GROUP_METADATA_TOPIC_NAME, settings=ON, requested=True,
                                may_create=True) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize(("version", "flag", "allowed"), [
    (0, False, True), (3, False, True), (4, False, False), (4, True, True),
    (12, False, False), (12, True, True)])
def test_requests_before_v4_always_allow_auto_creation(version: int, flag: bool,
                                                       allowed: bool) -> None:
    request = SimpleNamespace(allow_auto_topic_creation=flag)
    assert allows_auto_creation(request, version) is allowed


def test_metadata_answers_unknown_names_as_the_rule_says_and_known_ones_untouched() -> None:
    request = build(load_request_schema(admin.METADATA, 12), {
        "topics": [{"name": "new", "topic_id": None}, {"name": "bad name", "topic_id": None}],
        "allow_auto_topic_creation": True})
    asked: list[str] = []

    def unknown(name: str) -> ErrorCode:
        asked.append(name)
        return unknown_topic_answer(name, settings=ON, requested=True, may_create=True)
    response = metadata_api.handle_metadata_request(
        MetadataImage(), request, 12, broker_id=1, cluster_id="c", unknown_topic=unknown)
    assert asked == ["new", "bad name"]
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [
        ("new", int(ErrorCode.LEADER_NOT_AVAILABLE)),
        ("bad name", int(ErrorCode.INVALID_TOPIC_EXCEPTION))]
