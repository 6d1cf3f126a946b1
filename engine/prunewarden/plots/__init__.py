"""Plots people read instead of tables: replays, diffs, calibrations and audit logs as PNGs.

Above ``replay`` and ``suites``, below the command line: it replays traces and reads logs
through the packages below it and draws with matplotlib, an optional extra
(``pip install 'prunewarden[plot]'``) imported only when a plot is drawn.
"""

from __future__ import annotations

from prunewarden.plots._canvas import PlotError, figure_class, prepare_file, prepare_folder
from prunewarden.plots._reports import (
    DailyCounts,
    count_daily,
    write_audit_plot,
    write_calibration_plot,
    write_power_plot,
)
from prunewarden.plots._series import (
    TraceSeries,
    collect_series,
)
from prunewarden.plots._traces import write_diff_plots, write_replay_plots

__all__ = [
    "DailyCounts",
    "PlotError",
    "TraceSeries",
    "collect_series",
    "count_daily",
    "figure_class",
    "prepare_file",
    "prepare_folder",
    "write_audit_plot",
    "write_calibration_plot",
    "write_diff_plots",
    "write_power_plot",
    "write_replay_plots",
]
