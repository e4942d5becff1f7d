"""The replay report's pieces that need no Spark: the header line and the leader plot."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402

from tools.replay.report import _leader_plot, _run_html  # noqa: E402


def test_header_names_cluster_time_version_and_master() -> None:
    line = _run_html({"cluster_id": "OJ5EWLvLTRiFbAkhUYdbqg", "time": "2026-01-02T03:04:05+00:00",
                      "version": "0.1.0", "spark_master": "spark://127.0.0.1:7077",
                      "spark_version": "4.0.0"})
    for text in ("cluster <b>OJ5EWLvLTRiFbAkhUYdbqg</b>", "2026-01-02T03:04:05+00:00",
                 "kraft-py <b>0.1.0</b>", "Spark master <b>spark://127.0.0.1:7077</b>"):
        assert text in line
    assert "cluster <b>unknown</b>" in _run_html({"cluster_id": None, "version": "x"})
    assert _run_html(None) == ""


def test_leader_timeline_plot_ticks_only_integer_epochs() -> None:
    timeline = [{"epoch": e, "leader_id": e % 3 + 1, "first_offset": 10 * e,
                 "last_offset": 10 * e + 9} for e in (1, 2, 3)]
    figure, axes = plt.subplots()
    try:
        _leader_plot(timeline)(axes)
        figure.canvas.draw()
        ticks = [t for t in axes.get_yticks() if axes.get_ylim()[0] <= t <= axes.get_ylim()[1]]
    finally:
        plt.close(figure)
    assert ticks
    assert all(float(t).is_integer() for t in ticks)
