"""`gc_paused()`: the cyclic garbage collector off while a bulk load builds an image.

A replay of a million partitions keeps every object it makes (the partition images, the
shards that hold them), so each full collection on the way walks everything built so
far, and CPython runs one every time the survivors grow by a quarter: 14 full
collections, a third of a 1.1-million-record rebuild (`bench/rebuild_bench.py`). What a
replay throws away (decoded maps, lists) holds no cycles and goes by reference counting
anyway. Used around whole-image loads (a snapshot file, a log read from disk) and each
batch replayed in bulk (`metadata/delta.py` `apply_records`); what replay decides does
not change with it.

Process-wide, as the collector is: two pauses that overlap in two threads end when the
first of them ends (the collector is only ever left as it was found, never turned on
that some caller turned off).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(*, freeze: bool = False) -> Iterator[None]:
    """The collector disabled inside, then enabled again if it was. `freeze`: once the
    body has returned, `gc.freeze()`: every object alive then (the image just loaded,
    and whatever else the process holds) is left out of all later collections. For a
    load whose result lives long and holds no cycles (an image: frozen objects are still
    freed by reference counting when the next image drops them); without it, a full
    collection of a process holding a million partitions walks 1.4 million objects,
    3 s the first time. The price: cyclic garbage that exists at that moment is never
    collected, so it is for loads as rare as a node's start or a fetched snapshot."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
