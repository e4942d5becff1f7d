"""`kraft features` (tools/commands/features.py) before anything is sent: bad input is
one line and exit 2 (an unknown feature, a level outside this build's range, a feature
twice, an unknown --metadata release, nothing asked), and describe's rows put a feature
that is not finalized at level 0, as kafka-features.sh does."""

from __future__ import annotations

import pytest

from metadata.admin import DescribeFeaturesResponse, FeatureLevelRange
from tools.cli import main
from tools.commands.features import describe_rows

UNUSED = "127.0.0.1:1"  # nothing listens: every case must fail before dialling


@pytest.mark.parametrize(("argv", "message"), [
    (["upgrade", "--feature", "group.version=1"], "unknown feature 'group.version'"),
    (["upgrade", "--feature", "metadata.version=4"],
     "metadata.version level 4 is outside this build's 1-3"),
    (["upgrade", "--feature", "kraft.version=2"], "kraft.version level 2 is outside"),
    (["upgrade", "--feature", "metadata.version"], "equals sign not found"),
    (["upgrade", "--feature", "metadata.version=x"], "unable to parse x as a short"),
    (["upgrade", "--metadata", "3.9"], "Unsupported metadata version 3.9. Supported "
     "metadata versions are 0.1-IV0, 0.1-IV1, 0.1-IV2"),
    (["upgrade", "--metadata", "0.1-IV1", "--feature", "metadata.version=2"],
     "Feature metadata.version was specified more than once."),
    (["upgrade"], "You must specify at least one feature to upgrade"),
    (["disable", "--feature", "metadata.version"],
     "metadata.version level 0 is outside this build's 1-3"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                          argv: list[str], message: str) -> None:
    for target in (["--bootstrap-server", UNUSED], ["--bootstrap-controller", UNUSED]):
        assert main(["features", *target, *argv, "--timeout", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert message in err[0]


def test_describe_rows_list_every_supported_feature_by_name() -> None:
    rows = describe_rows(DescribeFeaturesResponse(
        supported=(FeatureLevelRange(name="metadata.version", min_version=1, max_version=2),
                   FeatureLevelRange(name="kraft.version", min_version=0, max_version=1)),
        finalized=(FeatureLevelRange(name="metadata.version", min_version=1,
                                     max_version=1),),
        epoch=41))
    assert rows == [
        {"feature": "kraft.version", "supported_min_version": 0, "supported_max_version": 1,
         "finalized_version_level": 0, "epoch": 41},
        {"feature": "metadata.version", "supported_min_version": 1,
         "supported_max_version": 2, "finalized_version_level": 1, "epoch": 41}]
