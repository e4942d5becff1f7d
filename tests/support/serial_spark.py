"""The few calls of Spark's RDD API the replay's checks make (`parallelize`, `map`,
`mapPartitions`, `flatMap`, `collect`), run in this process, one partition, in order.

Only for tests of the checks' logic: the same plants run through a real local[2]
SparkSession in the `spark`-marked tests. In process, the checks run in the default test
run and under `make mutation`, whose mutants are only seen by code in the test process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


class SerialRdd:
    def __init__(self, items: Iterable[Any]) -> None:
        self._items = list(items)

    def map(self, function: Callable[[Any], Any]) -> SerialRdd:
        return SerialRdd(map(function, self._items))

    def flatMap(self, function: Callable[[Any], Iterable[Any]]) -> SerialRdd:  # noqa: N802
        return SerialRdd(out for item in self._items for out in function(item))

    def mapPartitions(self, function: Callable[[Iterator[Any]], Iterable[Any]]  # noqa: N802
                      ) -> SerialRdd:
        return SerialRdd(function(iter(self._items)))

    def collect(self) -> list[Any]:
        return list(self._items)


class SerialContext:
    master = "serial (in process)"  # what the report's header names
    defaultParallelism = 1  # noqa: N815 (Spark's name): one partition, in order

    def parallelize(self, items: Iterable[Any], slices: int | None = None) -> SerialRdd:
        return SerialRdd(items)


class SerialSpark:
    """Stands in for a SparkSession where only `sparkContext` (and the version the report
    names) is used."""

    sparkContext = SerialContext()  # noqa: N815 (Spark's name)
    version = "none"
