"""What the benches print: percentiles, and a target's verdict."""

from __future__ import annotations


def percentile(values: list[float], fraction: float) -> float:
    """The value at `fraction` (0..1) of the sorted values, by rank; 0.0 when empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"
