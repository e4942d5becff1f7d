"""The scan compiled by mypyc (tools/replay/compiled.py) finds what the interpreted scan
(tools/replay/sequential.py) finds, on any metadata log cut into batches of any size,
seeded from a snapshot's image or not: violations, counts, claims and aggregates. A
compiled module is typed at run time where the source is only annotated, so records the
codec would never write (undecodable bytes, wrong types, dead topics:
`tests.support.metadata_strategies`) are where the two could part.

`make compile` builds the module; the test fails when it is missing, rather than pass
without comparing anything (KRAFT_REPLAY_INTERPRETED set: skipped, nothing to compare).
"""

from __future__ import annotations

import dataclasses
import os
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.image import MetadataImage
from tests.support.metadata_strategies import images, metadata_logs
from tools.replay import compiled, sequential


@pytest.fixture(scope="module")
def compiled_scan() -> ModuleType:
    if os.environ.get(compiled.INTERPRETED):
        pytest.skip(f"{compiled.INTERPRETED} is set: only the interpreted scan runs")
    module = compiled.compiled_module()
    assert module is not None, "no current compiled scan: run `make compile`"
    assert module is not sequential
    return module


def _scan(module: ModuleType, records: list[bytes], cuts: list[int], analysis: bool,
          seed: MetadataImage | None) -> tuple[Any, ...]:
    scan = module.NodeScan(analysis=analysis)
    if seed is not None:
        scan.seed(seed, 0)
    start = 0
    for seq, end in enumerate([*sorted(set(cuts)), len(records)]):
        if end > start:
            scan.batch(seq, start, 1 + seq % 3, records[start:end])
            start = end
    result = scan.result()
    aggregates = result.aggregates
    return (result.violations, {k: list(v) for k, v in result.marks.items()}, result.claims,
            result.first_topic_batch, result.metadata_topic_batch,
            None if aggregates is None else
            [getattr(aggregates, f.name) for f in dataclasses.fields(sequential.Aggregates)])


@settings(max_examples=300, deadline=None)
@given(metadata_logs(max_steps=40), st.lists(st.integers(0, 120), max_size=30),
       st.booleans())
def test_compiled_scan_finds_what_the_interpreted_scan_finds(
        compiled_scan: ModuleType, log: list[tuple[int, bytes]], cuts: list[int],
        analysis: bool) -> None:
    records = [data for _, data in log]
    assert _scan(compiled_scan, records, cuts, analysis, None) == \
        _scan(sequential, records, cuts, analysis, None)


@settings(max_examples=100, deadline=None)
@given(images(max_steps=15), metadata_logs(max_steps=25),
       st.lists(st.integers(0, 80), max_size=10))
def test_compiled_scan_seeded_from_an_image_finds_what_the_interpreted_finds(
        compiled_scan: ModuleType, image: MetadataImage, log: list[tuple[int, bytes]],
        cuts: list[int]) -> None:
    records = [data for _, data in log]
    assert _scan(compiled_scan, records, cuts, True, image) == \
        _scan(sequential, records, cuts, True, image)


def test_a_stale_build_is_not_used(monkeypatch: pytest.MonkeyPatch,
                                   compiled_scan: ModuleType) -> None:
    """Built from other bytes than sequential.py's (an edit since `make compile`): the
    replay runs the interpreted scan."""
    monkeypatch.setattr(compiled, "source_digest", lambda: "0" * 64)
    assert compiled.compiled_module() is None


def test_interpreted_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled.scan_module.cache_clear()
    monkeypatch.setenv(compiled.INTERPRETED, "1")
    try:
        assert compiled.scan_module() is sequential
    finally:
        compiled.scan_module.cache_clear()
