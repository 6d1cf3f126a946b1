"""Policy test suites (``*_test.yaml``): loading, running, expectations, coverage and reports."""

from __future__ import annotations

from prunewarden.suites._coverage import Coverage
from prunewarden.suites._load import SUITE_SUFFIX, Case, Suite, discover_suites, load_suite
from prunewarden.suites._report import (
    Report,
    exit_status,
    render_json,
    render_junit,
    render_pretty,
    run_files,
)
from prunewarden.suites._run import CaseResult, SuiteResult, run_suite

__all__ = [
    "SUITE_SUFFIX",
    "Case",
    "CaseResult",
    "Coverage",
    "Report",
    "Suite",
    "SuiteResult",
    "discover_suites",
    "exit_status",
    "load_suite",
    "render_json",
    "render_junit",
    "render_pretty",
    "run_files",
    "run_suite",
]
