"""UpdateFeatures (API 57, v0-v1; Kafka's `Admin.updateFeatures`, kafka-features.sh) on a
broker, forwarded as Kafka 3.9's brokers forward it; ApiVersions v3+ carries the
features (`broker.kafka.api_versions`).

- metadata.version (and any name but kraft.version) goes to the active controller as the
  `metadata.admin` UpdateFeatures RPC, decided by `metadata.feature_control` with
  Kafka's errors; the answer waits (bounded by the request's timeout) until this
  broker's image shows the new level, so a client's next ApiVersions here sees it.
- kraft.version is raft's: it is checked here against this broker's raft core
  (`metadata.features.update_refusal`) and an upgrade goes to the raft leader as
  UpdateKRaftVersion with the voters' endpoints this broker dials (a static quorum's
  `controller.quorum.voters`), the path `kraft features upgrade` takes.
- v0's allow_downgrade is SAFE_DOWNGRADE; v1 has upgrade_type and validate_only.

Authorization as Kafka's: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the
top and for every feature; nothing is forwarded.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.admin_api import forward_to_controller, kafka_error, request_timeout_s
from broker.kafka.admin.quorum_api import CONTROLLER_LISTENER, QuorumForwarder, QuorumUnavailable
from broker.kafka.context import BrokerContext
from metadata.admin import FeatureUpdate, UpdateFeaturesRequest, UpdateFeaturesResponse
from metadata.features import KRAFT_VERSION, UpgradeType, finalized_levels, update_refusal
from metadata.image import MetadataImage
from raft import messages
from raft.common.errors import ErrorCode
from raft.control_records import Endpoint

log = logging.getLogger(__name__)

Result = tuple[int, str | None]  # (error code, message) of one feature


def _updates(request: Any, version: int) -> list[FeatureUpdate]:
    return [FeatureUpdate(
        feature=u.feature, max_version_level=int(u.max_version_level),
        upgrade_type=int(u.upgrade_type) if version >= 1 else int(
            UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE))
        for u in request.feature_updates]


def _answer(updates: list[FeatureUpdate], results: dict[str, Result], code: int = 0,
            message: str | None = None) -> shapes.UpdateFeaturesResponse:
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "results": [{"feature": u.feature, "error_code": results[u.feature][0],
                         "error_message": results[u.feature][1]} for u in updates]}


async def handle_update_features_request(context: BrokerContext, request: Any, version: int,
                                         quorum: QuorumForwarder | None = None
                                         ) -> shapes.UpdateFeaturesResponse:
    updates = _updates(request, version)
    if not authz.cluster_allowed(context, authz.Op.ALTER):
        refused = (authz.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is not allowed")
        return _answer(updates, dict.fromkeys((u.feature for u in updates), refused),
                       *refused)
    if any(n > 1 for n in Counter(u.feature for u in updates).values()):
        return _answer(updates, dict.fromkeys(
            (u.feature for u in updates), (int(ErrorCode.INVALID_REQUEST), None)),
            int(ErrorCode.INVALID_REQUEST), "a feature is named more than once")
    validate_only = bool(getattr(request, "validate_only", False))
    timeout_s = request_timeout_s(request, context)
    results: dict[str, Result] = {}
    for update in updates:
        if update.feature == KRAFT_VERSION:
            results[update.feature] = await _kraft_version(context, quorum, update,
                                                           validate_only, timeout_s)
    forwarded = tuple(u for u in updates if u.feature != KRAFT_VERSION)
    if forwarded:
        results.update(await _forward(context, forwarded, validate_only, timeout_s))
    log.info("update features", extra={"results": results})
    return _answer(updates, results)


async def _forward(context: BrokerContext, updates: tuple[FeatureUpdate, ...],
                   validate_only: bool, timeout_s: float) -> dict[str, Result]:
    response, error, message = await forward_to_controller(
        context, UpdateFeaturesRequest(feature_updates=updates, validate_only=validate_only),
        timeout_s)
    if response is None:
        return {u.feature: (error, message) for u in updates}
    assert isinstance(response, UpdateFeaturesResponse)
    results = {r.feature: (kafka_error(r.error_code), r.error_message)
               for r in response.results}
    wanted = {u.feature: u.max_version_level for u in updates
              if results.get(u.feature, (-1, None))[0] == ErrorCode.NONE}
    if wanted and not validate_only:
        await context.wait_image(lambda image: image_shows(image, wanted), timeout_s)
    return results


def image_shows(image: MetadataImage, wanted: dict[str, int]) -> bool:
    """The image holds each feature at its wanted level (metadata.version as replay
    takes it: an unrecorded log's is level 2, where an upgrade to 2 writes nothing)."""
    levels = finalized_levels(image.finalized_features)
    return all(levels.get(name, 0) == level for name, level in wanted.items())


async def _kraft_version(context: BrokerContext, quorum: QuorumForwarder | None,
                         update: FeatureUpdate, validate_only: bool,
                         timeout_s: float) -> Result:
    current = context.kraft_version()
    try:
        upgrade_type = UpgradeType(update.upgrade_type)
    except ValueError:
        return int(ErrorCode.INVALID_REQUEST), f"unknown upgrade type {update.upgrade_type}"
    refusal = update_refusal(KRAFT_VERSION, current, update.max_version_level, upgrade_type)
    if refusal is not None:
        return int(ErrorCode.INVALID_UPDATE_VERSION), refusal
    if validate_only or update.max_version_level == current:
        return int(ErrorCode.NONE), None
    if quorum is None:
        return int(ErrorCode.UNKNOWN_SERVER_ERROR), "this listener knows no controllers"
    nodes = tuple(messages.NodeEndpoints(node_id=voter_id, listeners=(Endpoint(
        name=CONTROLLER_LISTENER, host=host, port=port),))
        for voter_id, (host, port) in sorted(quorum.voters.items()))
    try:
        reply = await quorum.ask_leader(messages.UpdateKRaftVersionRequest(
            cluster_id=quorum.cluster_id, kraft_version=update.max_version_level,
            nodes=nodes), timeout_s, is_write=True)
    except QuorumUnavailable as exc:
        return int(ErrorCode.REQUEST_TIMED_OUT), f"no controller answered: {exc}"
    code = kafka_error(int(reply.get("error_code", ErrorCode.UNKNOWN_SERVER_ERROR)))
    if code == ErrorCode.NONE:  # so a client's next ApiVersions here sees it
        await context.wait_image(
            lambda _: context.kraft_version() == update.max_version_level, timeout_s)
    return code, reply.get("error_message")
