"""UpdateFeatures and DescribeFeatures on the controller (pure), as Kafka 3.9's
FeatureControlManager decides them; the rules and the level table are
`metadata.features`'.

- metadata.version: a level the rules allow is one `FeatureLevel` record (none when it
  is already the finalized level, or with `validate_only`); a refusal is
  INVALID_UPDATE_VERSION with Kafka's message, per feature.
- kraft.version is raft's (KRaftVersionRecord and the first VotersRecord, written by the
  raft leader on UpdateKRaftVersion, with the voters' endpoints the caller knows): the
  command line and the brokers send that, so here it is INVALID_REQUEST.
- A feature named twice: INVALID_REQUEST for each.
"""

from __future__ import annotations

from collections import Counter

from metadata import records as rec
from metadata.admin import (
    DescribeFeaturesResponse,
    FeatureLevelRange,
    UpdatableFeatureResult,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from metadata.delta import MetadataDelta
from metadata.elections import Emit
from metadata.features import (
    KRAFT_VERSION,
    SUPPORTED,
    UpgradeType,
    finalized_levels,
    update_refusal,
)
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode


def update_features(delta: MetadataDelta, emit: Emit, request: UpdateFeaturesRequest
                    ) -> UpdateFeaturesResponse:
    counts = Counter(u.feature for u in request.feature_updates)
    results = []
    for update in request.feature_updates:
        code, message = ErrorCode.NONE, None
        try:
            upgrade_type = UpgradeType(update.upgrade_type)
        except ValueError:
            upgrade_type = None
        current = finalized_levels(delta.finalized_features).get(update.feature, 0)
        if counts[update.feature] > 1:
            code, message = (ErrorCode.INVALID_REQUEST,
                             f"feature {update.feature!r} appears more than once")
        elif upgrade_type is None:
            code, message = (ErrorCode.INVALID_REQUEST,
                             f"unknown upgrade type {update.upgrade_type}")
        elif update.feature == KRAFT_VERSION:
            code, message = (ErrorCode.INVALID_REQUEST, "kraft.version is the raft "
                             "leader's: send it UpdateKRaftVersion (kraft features upgrade, "
                             "or UpdateFeatures to a broker)")
        else:
            refusal = update_refusal(update.feature, current, update.max_version_level,
                                     upgrade_type)
            if refusal is not None:
                code, message = ErrorCode.INVALID_UPDATE_VERSION, refusal
            elif update.max_version_level != current and not request.validate_only:
                emit(rec.FeatureLevel(name=update.feature,
                                      feature_level=update.max_version_level))
        results.append(UpdatableFeatureResult(feature=update.feature, error_code=code,
                                              error_message=message))
    return UpdateFeaturesResponse(results=tuple(results))


def describe_features(image: MetadataImage, *, kraft_version: int) -> DescribeFeaturesResponse:
    """The supported ranges and the finalized levels (kraft.version as raft holds it,
    listed at 0 too), read at the image's offset."""
    finalized = {**finalized_levels(image.finalized_features), KRAFT_VERSION: kraft_version}
    return DescribeFeaturesResponse(
        supported=tuple(FeatureLevelRange(name=name, min_version=low, max_version=high)
                        for name, (low, high) in sorted(SUPPORTED.items())),
        finalized=tuple(FeatureLevelRange(name=name, min_version=level, max_version=level)
                        for name, level in sorted(finalized.items())),
        epoch=image.last_applied_offset)
