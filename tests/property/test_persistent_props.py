"""FrozenMap and its builders against plain dicts: same contents after any sequence of
writes, and every frozen version keeps its contents forever (structure sharing never
leaks). A builder of the empty map is flat (`FlatBuilder`), of any other sharded
(`MapBuilder`): each test runs both."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata.persistent import (
    MAX_PER_SHARD,
    FlatBuilder,
    FrozenKeySet,
    FrozenMap,
    MapBuilder,
    empty_map,
)

KEYS = st.one_of(st.integers(-50, 50), st.text(max_size=3))
OPS = st.lists(st.tuples(st.sampled_from(["set", "del", "freeze"]), KEYS, st.integers()),
               max_size=60)


BASES = st.dictionaries(KEYS, st.integers(), max_size=4)  # {}: the flat builder


@given(base=BASES, ops=OPS)
def test_every_version_matches_a_dict_model_when_writes_and_freezes_interleave(
        base: dict[object, int], ops: list[tuple[str, object, int]]) -> None:
    """Copy-on-write per shard: a frozen map never sees later writes."""
    builder = FrozenMap(base.items()).builder()
    assert isinstance(builder, MapBuilder if base else FlatBuilder)
    model = dict(base)
    versions: list[tuple[FrozenMap[object, int], dict[object, int]]] = []
    for op, key, value in ops:
        if op == "set":
            builder[key] = value
            model[key] = value
        elif op == "del" and key in model:
            del builder[key]
            del model[key]
        elif op == "freeze":
            versions.append((builder.freeze(), dict(model)))
        assert len(builder) == len(model)
    versions.append((builder.freeze(), dict(model)))
    assert dict(builder.entries()) == model
    for frozen, expected in versions:
        assert dict(frozen.items()) == expected
        assert sorted(frozen.entries(), key=repr) == sorted(expected.items(), key=repr)
        assert len(frozen) == len(expected)
        assert frozen == expected
        for key in expected:
            assert key in frozen
            assert frozen.get(key) == expected[key]


def test_frozen_map_refuses_writes_when_assigned() -> None:
    """Immutable: no item assignment."""
    frozen = FrozenMap([(1, "a")])
    with pytest.raises(TypeError):
        frozen[2] = "b"  # type: ignore[index]
    assert frozen.get(2) is None
    assert frozen[1] == "a"


def test_key_set_compares_like_a_set_when_compared_with_builtin_sets() -> None:
    """used_topic_ids behaves as a set for ==, <=, & and in."""
    keys = FrozenKeySet(FrozenMap([(1, None), (2, None)]))
    assert keys == {1, 2}
    assert {1} <= keys
    assert not keys & {3}
    assert 2 in keys
    assert FrozenKeySet() == set()


@given(ops=OPS, more=OPS)
def test_changed_keys_are_exactly_those_written_differently_between_two_versions(
        ops: list[tuple[str, object, int]], more: list[tuple[str, object, int]]) -> None:
    """Values are compared by identity: each write stores a new object here."""
    def written(base: FrozenMap[object, list[int]], ops: list[tuple[str, object, int]]
                ) -> FrozenMap[object, list[int]]:
        builder = base.builder()
        for op, key, value in ops:
            if op == "set":
                builder[key] = [value]
            elif op == "del" and key in builder:
                del builder[key]
        return builder.freeze()

    before = written(empty_map(), ops)
    after = written(before, more)
    expected = {k for k in set(before) | set(after)
                if k not in before or k not in after or before[k] is not after[k]}
    assert after.changed_keys(before) == expected
    assert before.changed_keys(after) == expected


@pytest.mark.parametrize("first", [None, -1], ids=["flat", "sharded"])
def test_shards_double_as_the_map_grows_and_every_version_keeps_its_contents(
        first: int | None) -> None:
    """Past MAX_PER_SHARD entries a shard the shards double (all placed again; a flat
    builder places them once, at its freeze): the versions frozen before keep theirs, a
    later one is a few entries a shard, and the changed keys across a doubling are the
    ones written."""
    count = 300 * MAX_PER_SHARD  # past 256 shards' worth: one doubling at least
    base = empty_map() if first is None else FrozenMap([(first, [first])])
    builder = base.builder()
    small = None
    for key in range(count):
        builder[key] = [key]
        if key == 100:
            small = builder.freeze()
    assert small is not None
    large = builder.freeze()
    assert len(small.shards()) == 256
    assert len(large.shards()) == 512  # the fewest that keep MAX_PER_SHARD a shard
    assert len(large.shards()) * MAX_PER_SHARD >= len(large) == count + (first is not None)
    extra = set() if first is None else {first}
    assert set(small) == set(range(101)) | extra
    assert all(large[key] == [key] for key in range(count))
    assert large.changed_keys(small) == small.changed_keys(large) == set(range(101, count))
    more = large.builder()
    del more[0]
    more[count] = [count]
    after = more.freeze()
    assert after.changed_keys(large) == {0, count}
    assert sum(shard is not mine for shard, mine in zip(after.shards(), large.shards(),
                                                        strict=True)) == 2
