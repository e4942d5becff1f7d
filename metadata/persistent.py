"""Immutable maps and sets that share structure between versions.

An image with 100,000 topics must not be copied whole for every record the controller
decides: `FrozenMap` splits its keys into shards (plain dicts) by hash, and a
`MapBuilder` copies only the shards it writes to. Building the next version after one
change costs a tuple of the shards and one shard, not n entries.

A map has 256 shards, doubled whenever it holds more than MAX_PER_SHARD entries a shard
(every key placed again, once per doubling: amortized O(1) a write), so a shard stays a
few entries however large the map grows: a reader that redoes its work only for the
shards a new version changed (`FrozenMap.shards`; a broker's followed partitions, its
marked partitions) does work proportional to the change, not to the map. With 256
shards of 100,000 topics, a batch of 100 new topics wrote to a third of them.

A map built from nothing (a snapshot load, a replay from offset 0) is built flat
(`FlatBuilder`, a plain dict) and sharded once when frozen: no shard copied or doubled
on the way.

Iteration order is shard by shard (by hash), not insertion order: callers that need an
order sort (string hashes differ between processes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence, Set, ValuesView
from itertools import chain
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_MIN_SHARDS = 256
MAX_PER_SHARD = 16  # entries a shard on average before the shards double
_EMPTY: dict[Any, Any] = {}  # shared by every empty shard; never written (copy first)


class _ShardedReads(Generic[K, V]):
    """The reads FrozenMap and MapBuilder share: a key lives in shard `hash(key) & _mask`
    (the shard count less one: a power of two)."""

    __slots__ = ()
    _len: int
    _mask: int
    _shards: Sequence[dict[K, V]]

    def __getitem__(self, key: K) -> V:
        return self._shards[hash(key) & self._mask][key]

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._shards[hash(key) & self._mask].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & self._mask]

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    def entries(self) -> Iterator[tuple[K, V]]:
        """(key, value) shard by shard: `items()` without hashing every key again to
        look its value up (a Python `__hash__` per key for Uuid keys)."""
        return chain.from_iterable(map(dict.items, self._shards))

    def values(self) -> ValuesView[V]:
        """A view whose iteration walks the shards (Mapping's looks every key up)."""
        return _ShardValues(self)

    def __len__(self) -> int:
        return self._len


class _ShardValues(ValuesView[V]):
    __slots__ = ()
    _mapping: _ShardedReads[Any, V]

    def __iter__(self) -> Iterator[V]:
        return chain.from_iterable(map(dict.values, self._mapping._shards))


# The ignores on the two classes below: their `get` (from _ShardedReads, a shard's
# dict.get, for speed) has one signature where Mapping.get has overloads.
class FrozenMap(_ShardedReads[K, V], Mapping[K, V]):  # type: ignore[misc]
    __slots__ = ("_len", "_mask", "_shards")
    _len: int
    _mask: int
    _shards: tuple[dict[K, V], ...]

    def __init__(self, items: Iterable[tuple[K, V]] = ()) -> None:
        built = _sharded(dict(items))
        self._shards, self._mask, self._len = built._shards, built._mask, built._len

    @classmethod
    def _from(cls, shards: tuple[dict[K, V], ...], length: int) -> FrozenMap[K, V]:
        result = cls.__new__(cls)
        result._shards = shards
        result._mask = len(shards) - 1
        result._len = length
        return result

    def __repr__(self) -> str:
        return f"FrozenMap({dict(self.items())!r})"

    def builder(self) -> Builder[K, V]:
        """A mutable map starting from this one: sharded, or flat from the empty map."""
        return MapBuilder(self) if self._len else FlatBuilder()

    def shards(self) -> tuple[Mapping[K, V], ...]:
        """The map's shards, never changed once frozen: a caller that derives something
        from each shard can tell an unchanged one in the next version by identity (`is`)
        and skip it (`broker.kafka.replication.follower.FollowedPartitions`). After the
        shards doubled, every one is new."""
        return self._shards

    def changed_keys(self, other: FrozenMap[K, V]) -> set[K]:
        """The keys present in only one of the two maps or bound to another object (`is
        not`) in each. Shards shared with `other` are skipped, so after a few changes
        this costs a few shards, not the whole map (the whole map when the shards
        doubled in between)."""
        changed: set[K] = set()
        if len(self._shards) != len(other._shards):
            changed.update(key for key, value in self.items()
                           if other.get(key, _ABSENT) is not value)
            changed.update(key for key in other if key not in self)
            return changed
        for mine, theirs in zip(self._shards, other._shards, strict=True):
            if mine is theirs:
                continue
            for key, value in mine.items():
                if theirs.get(key, _ABSENT) is not value:
                    changed.add(key)
            changed.update(key for key in theirs if key not in mine)
        return changed


_ABSENT: Any = object()
_EMPTY_MAP: FrozenMap[Any, Any] = FrozenMap._from((_EMPTY,) * _MIN_SHARDS, 0)


def empty_map() -> FrozenMap[Any, Any]:
    return _EMPTY_MAP


class MapBuilder(_ShardedReads[K, V], MutableMapping[K, V]):  # type: ignore[misc]
    """A mutable map on top of a FrozenMap; `freeze()` makes the next FrozenMap."""

    _shards: list[dict[K, V]]

    def __init__(self, base: FrozenMap[K, V]) -> None:
        self._shards = list(base._shards)
        self._owned = [False] * len(self._shards)
        self._mask: int = base._mask
        self._len: int = base._len

    def _writable(self, index: int) -> dict[K, V]:
        if not self._owned[index]:
            self._shards[index] = self._shards[index].copy()
            self._owned[index] = True
        return self._shards[index]

    def __setitem__(self, key: K, value: V) -> None:
        index = hash(key) & self._mask
        shard = self._shards[index] if self._owned[index] else self._writable(index)
        size = len(shard)  # hashing a key may run Python code (Uuid): once per dict op
        shard[key] = value
        self._len += len(shard) - size
        if self._len > MAX_PER_SHARD * len(self._shards):
            self._double()

    def __delitem__(self, key: K) -> None:
        del self._writable(hash(key) & self._mask)[key]
        self._len -= 1

    def _double(self) -> None:
        """Twice the shards, every entry placed again (new dicts: none is shared)."""
        count = 2 * len(self._shards)
        self._shards = _spread(self.entries(), count)
        self._owned, self._mask = [True] * count, count - 1

    def _shards_tuple(self) -> tuple[dict[K, V], ...]:
        self._owned = [False] * len(self._shards)  # frozen now: later writes copy again
        return tuple(self._shards)

    def freeze(self) -> FrozenMap[K, V]:
        return FrozenMap._from(self._shards_tuple(), self._len)


class FlatBuilder(dict[K, V]):
    """The builder of a map that starts empty (a snapshot load, a replay from offset 0):
    one plain dict, its writes in C and no shard doubling on the way, sharded once by
    `freeze()`: 100,000 Uuid keys written and frozen in half the time a sharded builder
    takes."""

    def entries(self) -> Iterator[tuple[K, V]]:
        return iter(self.items())

    def freeze(self) -> FrozenMap[K, V]:
        return _sharded(self)


Builder = MapBuilder[K, V] | FlatBuilder[K, V]


def _sharded(items: dict[K, V]) -> FrozenMap[K, V]:
    """A FrozenMap of `items`, with the shards the doubling rule would have reached."""
    count = _MIN_SHARDS
    while len(items) > MAX_PER_SHARD * count:
        count *= 2
    return FrozenMap._from(tuple(_spread(items.items(), count)), len(items))


def _spread(entries: Iterable[tuple[K, V]], count: int) -> list[dict[K, V]]:
    """`count` new shards (a power of two) holding `entries`, each in its hash's shard."""
    mask = count - 1
    shards: list[dict[K, V]] = [{} for _ in range(count)]
    for key, value in entries:
        shards[hash(key) & mask][key] = value
    return shards


class FrozenKeySet(Set[K]):
    """A read-only set view of a FrozenMap's keys (compares equal to any set)."""

    __slots__ = ("_map",)

    def __init__(self, keys: FrozenMap[K, Any] | None = None) -> None:
        self._map: FrozenMap[K, Any] = keys if keys is not None else _EMPTY_MAP

    @classmethod
    def _from_iterable(cls, items: Iterable[Any]) -> frozenset[Any]:
        return frozenset(items)  # results of &, |, - are plain frozensets

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"FrozenKeySet({set(self)!r})"

    @property
    def map(self) -> FrozenMap[K, Any]:
        return self._map
