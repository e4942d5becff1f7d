"""Feature levels (KIP-584, KIP-778): the one table of `metadata.version` levels, what
each lets the controller write, and the rules that decide a level change (pure).

`metadata.version` says which records, and which of their fields, the metadata log may
hold; it is finalized in the log by a `FeatureLevel` record (Kafka's FeatureLevelRecord),
which `kraft format` writes first (`--release-version` / `--feature metadata.version=N`,
default the latest). The controller writes a field only at a level that has it
(`write_refusal`, asserted on every record it emits) and refuses a request that needs a
higher level with UNSUPPORTED_VERSION (`LEVEL_ERROR`).

A log with no `FeatureLevel` record was written before this module existed, by a build
that wrote every record and field of level 2: it replays as `UNRECORDED_METADATA_LEVEL`
(2), so such a cluster keeps what it could do.

`kraft.version` (KIP-853) is raft's, kept by `KRaftVersionRecord` (`raft.control_records`),
not here; this module only names its supported range (`SUPPORTED`) and the rule for
changing it.

Level changes follow Kafka 3.9's QuorumController (FeatureControlManager): an unknown
feature or a level outside the supported range, a higher level without UPGRADE, a lower
one with UPGRADE, and a `metadata.version` downgrade across a level that changed the
records (safe or unsafe: it might lose metadata) are INVALID_UPDATE_VERSION.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from metadata import records as rec
from raft.common.errors import ErrorCode

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
LEVEL_ERROR = ErrorCode.UNSUPPORTED_VERSION  # a request needs a higher metadata.version


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataLevel:
    level: int
    release: str  # the name `kraft features --metadata` and `--release-version` take
    enables: str  # what a controller may write from this level on
    changes_records: bool  # a downgrade below it might lose metadata


METADATA_LEVELS = (
    MetadataLevel(level=1, release="0.1-IV0", changes_records=True,
                  enables="every record as before partition reassignments"),
    MetadataLevel(level=2, release="0.1-IV1", changes_records=True,
                  enables="KIP-455 partition reassignments: Partition and PartitionChange "
                  "with adding_replicas / removing_replicas (AlterPartitionReassignments)"),
    MetadataLevel(level=3, release="0.1-IV2", changes_records=True,
                  enables="dynamic broker configs: ConfigRecord on BROKER resources "
                  "(the replication throttle rates; IncrementalAlterConfigs / AlterConfigs "
                  "of a broker)"),
)
MIN_METADATA_LEVEL = METADATA_LEVELS[0].level
LATEST_METADATA_LEVEL = METADATA_LEVELS[-1].level
UNRECORDED_METADATA_LEVEL = 2  # a log older than FeatureLevel records (see above)
REASSIGNMENTS_LEVEL = 2
BROKER_CONFIGS_LEVEL = 3

# feature -> (min, max) level this build supports (Kafka's SupportedFeatureKeys)
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MIN_METADATA_LEVEL, LATEST_METADATA_LEVEL),
    KRAFT_VERSION: (0, 1),
}


class UpgradeType(enum.IntEnum):
    """UpdateFeatures v1's upgrade_type (v0's allow_downgrade=true is SAFE_DOWNGRADE)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


def metadata_level(features: tuple[tuple[str, int], ...]) -> int:
    """The finalized metadata.version of an image's `finalized_features`."""
    return dict(features).get(METADATA_VERSION, UNRECORDED_METADATA_LEVEL)


def finalized_levels(features: tuple[tuple[str, int], ...]) -> dict[str, int]:
    """Each finalized feature's level, metadata.version's as replay takes it (an
    unrecorded log's included)."""
    return {**dict(features), METADATA_VERSION: metadata_level(features)}


def release_name(level: int) -> str:
    for entry in METADATA_LEVELS:
        if entry.level == level:
            return entry.release
    return str(level)


def parse_metadata_version(text: str) -> int:
    """A level given as its release name or as its number; ValueError naming the known."""
    for entry in METADATA_LEVELS:
        if text in (entry.release, str(entry.level)):
            return entry.level
    known = ", ".join(f"{e.release} ({e.level})" for e in METADATA_LEVELS)
    raise ValueError(f"unknown metadata.version {text!r} (this build knows {known})")


def replay_refusal(record: rec.FeatureLevel) -> str | None:
    """Why replay skips a FeatureLevel record, or None: a metadata.version this build
    cannot read (it would misread the records after it), or a negative level."""
    if record.feature_level < 0:
        return f"feature {record.name} level {record.feature_level} is negative"
    if record.name == METADATA_VERSION and not (
            MIN_METADATA_LEVEL <= record.feature_level <= LATEST_METADATA_LEVEL):
        return (f"metadata.version {record.feature_level} is outside this build's "
                f"{MIN_METADATA_LEVEL}-{LATEST_METADATA_LEVEL}")
    return None


def write_refusal(record: rec.Record, level: int) -> str | None:
    """Why the controller may not write `record` at metadata.version `level`, or None."""
    if level < REASSIGNMENTS_LEVEL and isinstance(record, rec.Partition | rec.PartitionChange) \
            and (record.adding_replicas is not None or record.removing_replicas is not None):
        return (f"reassignment fields need metadata.version {REASSIGNMENTS_LEVEL}, "
                f"the finalized level is {level}")
    if level < BROKER_CONFIGS_LEVEL and isinstance(record, rec.ConfigRecord):
        return (f"broker configs need metadata.version {BROKER_CONFIGS_LEVEL}, "
                f"the finalized level is {level}")
    return None


def update_refusal(name: str, current: int, new: int, upgrade_type: UpgradeType) -> str | None:
    """Why feature `name` may not go from level `current` to `new`, or None (new ==
    current is allowed: nothing to write). The message is Kafka's."""
    def invalid(reason: str) -> str:
        return f"Invalid update version {new} for feature {name}. {reason}"

    supported = SUPPORTED.get(name)
    if supported is None:
        return invalid("The controller does not support the given feature.")
    if new < 0:
        return invalid("A feature version cannot be less than 0.")
    if new > current and upgrade_type != UpgradeType.UPGRADE:
        return invalid("Can't downgrade to a newer version.")
    if new < current and upgrade_type == UpgradeType.UPGRADE:
        return invalid("Can't downgrade without setting the upgrade type to either safe "
                       "or unsafe downgrade.")
    low, high = supported
    if new != current and not low <= new <= high:
        return invalid(f"The controller supports levels {low}-{high} of {name}.")
    if new < current and name == METADATA_VERSION:
        if any(e.changes_records for e in METADATA_LEVELS if new < e.level <= current):
            return (f"Invalid metadata.version {new}. " + (
                "Unsafe metadata downgrade is not supported in this version."
                if upgrade_type == UpgradeType.UNSAFE_DOWNGRADE else
                "Refusing to perform the requested downgrade because it might delete "
                "metadata information."))
    if new < current and name == KRAFT_VERSION:
        return invalid("Downgrading kraft.version is not supported.")
    return None
