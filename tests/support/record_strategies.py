"""Hypothesis strategies for metadata records of every type (`metadata.records`), field by
field from their type hints: `ANY_RECORD`, and `JUNK` for values of no field's type."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from hypothesis import strategies as st

from metadata import records as rec
from raft.common.uuid import Uuid

INTS = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
UUIDS = st.integers(min_value=0, max_value=(1 << 128) - 1).map(Uuid)


def field_strategy(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy for one field, from its type hint (the types records use)."""
    if isinstance(hint, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return st.none() | field_strategy(inner)
    if typing.get_origin(hint) is tuple:
        return st.lists(field_strategy(typing.get_args(hint)[0]), max_size=5).map(tuple)
    if dataclasses.is_dataclass(hint) and hint is not Uuid:  # a VotersRecord's voters
        nested = typing.get_type_hints(hint)
        return st.builds(hint, **{f.name: field_strategy(nested[f.name])  # type: ignore[arg-type]
                                  for f in dataclasses.fields(hint)})
    return {int: INTS, str: st.text(max_size=20), Uuid: UUIDS, bool: st.booleans(),
            bytes: st.binary(max_size=20)}[hint]


def record_strategy(cls: type[rec.Record]) -> st.SearchStrategy[rec.Record]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: field_strategy(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


ANY_RECORD = st.one_of([record_strategy(cls) for cls in rec.RECORD_CLASSES.values()])
JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.binary(max_size=17),
    lambda inner: st.lists(inner, max_size=3), max_leaves=8)
INT64 = 1 << 63
# values a Partition field may be broken into: the edges of the codec's checks
EDGE_VALUES: tuple[Any, ...] = (
    True, False, 0, -1, 1, 3, 7, INT64 - 1, INT64, -INT64, (1 << 64) - 1, 1.0, "1", b"\x01",
    bytes(16), None, [], [1], [True], [INT64], [-INT64], [1.5], [1, False], [[0, 1]], {})
PARTITION_FIELDS = ("type", "version", "topic_id", "partition", "replicas", "isr", "leader",
                    "leader_epoch", "partition_epoch", "leader_epoch_after_creation",
                    "leader_epoch_before_deletion", "future")
