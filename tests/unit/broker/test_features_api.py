"""UpdateFeatures on the broker's Kafka listener (broker/kafka/admin/features_api.py),
through the dispatcher with no controller client and no raft forwarder: v0's
allow_downgrade is a safe downgrade, kraft.version is decided against the broker's raft
core before anything is sent, a feature named twice is refused whole, and metadata.version
goes to the controllers (here: none to ask, NOT_CONTROLLER)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.index import load_request_schema

from broker.kafka.admin.features_api import image_shows
from metadata import records as rec
from metadata.delta import replay
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tests.unit.broker.test_kafka_listener import make_dispatcher, roundtrip

UPDATE_FEATURES = 57


def _request(version: int, *updates: dict[str, Any], validate_only: bool = False) -> Any:
    return build(load_request_schema(UPDATE_FEATURES, version), {
        "timeout": 1_000, "validate_only": validate_only, "feature_updates": list(updates)})


async def _results(tmp_path: Path, request: Any, kraft_version: int = 0
                   ) -> tuple[int, dict[str, tuple[int, str | None]]]:
    dispatcher = make_dispatcher(tmp_path)
    dispatcher.context.kraft_version = lambda: kraft_version
    response = await roundtrip(dispatcher, request)
    return int(response.error_code), {r.feature: (int(r.error_code), r.error_message)
                                      for r in response.results}


async def test_a_v0_downgrade_of_kraft_version_is_refused_as_kafka_refuses_it(
        tmp_path: Path) -> None:
    code, results = await _results(tmp_path, _request(0, {
        "feature": "kraft.version", "max_version_level": 0, "allow_downgrade": True}),
        kraft_version=1)
    assert code == 0
    assert results["kraft.version"][0] == ErrorCode.INVALID_UPDATE_VERSION
    assert "Downgrading kraft.version is not supported" in str(results["kraft.version"][1])


async def test_kraft_version_is_checked_here_and_needs_the_raft_leader_to_change(
        tmp_path: Path) -> None:
    up = {"feature": "kraft.version", "max_version_level": 1, "upgrade_type": 1}
    assert (await _results(tmp_path, _request(1, up, validate_only=True)))[1] == {
        "kraft.version": (0, None)}
    assert (await _results(tmp_path, _request(1, up), kraft_version=1))[1] == {
        "kraft.version": (0, None)}  # already there: nothing to send
    _, results = await _results(tmp_path, _request(1, up))
    assert results["kraft.version"][0] == ErrorCode.UNKNOWN_SERVER_ERROR  # no forwarder
    too_high = {"feature": "kraft.version", "max_version_level": 2, "upgrade_type": 1}
    _, results = await _results(tmp_path, _request(1, too_high))
    assert results["kraft.version"][0] == ErrorCode.INVALID_UPDATE_VERSION


async def test_metadata_version_goes_to_the_controllers(tmp_path: Path) -> None:
    _, results = await _results(tmp_path, _request(1, {
        "feature": "metadata.version", "max_version_level": 2, "upgrade_type": 1}))
    assert results["metadata.version"][0] == ErrorCode.NOT_CONTROLLER


async def test_a_feature_named_twice_is_refused_whole(tmp_path: Path) -> None:
    update = {"feature": "metadata.version", "max_version_level": 2, "upgrade_type": 1}
    code, results = await _results(tmp_path, _request(1, update, update))
    assert code == ErrorCode.INVALID_REQUEST
    assert results == {"metadata.version": (ErrorCode.INVALID_REQUEST, None)}


def test_the_answer_waits_for_the_level_replay_gives() -> None:
    """An upgrade to the level an unrecorded log already replays at writes nothing: the
    broker's image shows it at once, so the answer does not wait out its timeout."""
    unrecorded = replay([(0, rec.NoOp())])
    assert image_shows(unrecorded, {"metadata.version": 2})
    assert not image_shows(unrecorded, {"metadata.version": 1})
    recorded = replay([(0, rec.FeatureLevel(name="metadata.version", feature_level=1))])
    assert image_shows(recorded, {"metadata.version": 1})
    assert not image_shows(recorded, {"metadata.version": 2})
