"""`kraft format --release-version` / `--feature metadata.version=N` (kafka-storage.sh's
flags): the bootstrap file starts with the level asked for, the latest by default, and a
level this build does not know, or another feature, is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata import bootstrap
from metadata import records as rec
from tools.cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _format(directory: Path, *options: str) -> int:
    return main(["format", "--dir", str(directory), "--cluster-id", CLUSTER, "--node-id", "1",
                 *options])


@pytest.mark.parametrize(("options", "level"), [
    ((), 3),
    (("--release-version", "0.1-IV0"), 1),
    (("--release-version", "2"), 2),
    (("--feature", "metadata.version=1"), 1),
])
def test_format_bootstraps_the_metadata_version_asked_for(
        tmp_path: Path, options: tuple[str, ...], level: int) -> None:
    assert _format(tmp_path, *options) == 0
    assert bootstrap.read_bootstrap_records(tmp_path)[0] == rec.FeatureLevel(
        name="metadata.version", feature_level=level)


@pytest.mark.parametrize(("options", "message"), [
    (("--release-version", "3.9"), "unknown metadata.version '3.9'"),
    (("--feature", "metadata.version=7"), "unknown metadata.version '7'"),
    (("--feature", "kraft.version=1"), "expected metadata.version=LEVEL once"),
    (("--feature", "metadata.version=1", "--feature", "metadata.version=2"),
     "expected metadata.version=LEVEL once"),
])
def test_format_refuses_a_level_or_feature_it_does_not_know(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...],
        message: str) -> None:
    assert _format(tmp_path, *options) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "meta.properties").exists()
