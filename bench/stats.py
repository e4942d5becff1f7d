"""What the benches print: percentiles, a target's verdict, and the rate at which a
cluster's metadata segments read back (the bound of any replay of them)."""

from __future__ import annotations

import time
from pathlib import Path

from tools.replay import METADATA_DIR

READ_CHUNK = 1 << 20


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` (0..1) of the sorted values, by rank; 0.0 when empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def segment_read_rate(cluster: Path) -> tuple[int, float]:
    """(bytes, seconds) of a sequential read of every node's metadata segments in 1 MiB
    reads, the second of two (the page cache's rate)."""
    paths = sorted(cluster.glob(f"node-*/data/{METADATA_DIR}/*.log"))
    total, elapsed = 0, 0.0
    for _ in range(2):
        total, started = 0, time.monotonic()
        for path in paths:
            with open(path, "rb", buffering=0) as handle:
                while chunk := handle.read(READ_CHUNK):
                    total += len(chunk)
        elapsed = time.monotonic() - started
    return total, elapsed
