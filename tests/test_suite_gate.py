"""The suite's own rules (docs/dev/testing.md): Hypothesis derandomized by default, random only
under the fuzz profile, and one test over the time limit failing the run by its name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support.time_limit import limit_under_load
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
DURATIONS = TESTS.parent / "tools" / "durations.py"

TIMED = """
import time
import pytest

def test_quick():
    pass

def test_dawdles():
    time.sleep(0.6)

@pytest.mark.slow
def test_dawdles_but_is_slow():
    time.sleep(0.6)
"""


def run_pytest(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """A pytest run of TIMED in ``tmp_path`` with the time-limit plugin of this suite."""
    (tmp_path / "test_timed.py").write_text(TIMED, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers = slow: long\n", encoding="utf-8")
    path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    # Only this plugin: the installed ones (Hypothesis, xdist, schemathesis) cost seconds to load.
    env = {**os.environ, "PYTHONPATH": path, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "_support.time_limit",
            "-p",
            "no:cacheprovider",
            "-q",
            *options,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


class TestHypothesisProfiles:
    def test_make_test_runs_derandomized_without_a_database(
        self, request: pytest.FixtureRequest
    ) -> None:
        """The ci profile, loaded unless --hypothesis-profile names another: the same examples
        on every run, nothing replayed from an earlier run, a failure's blob printed."""
        ci = settings.get_profile("ci")
        assert (ci.derandomize, ci.database, ci.print_blob, ci.deadline) == (
            True,
            None,
            True,
            None,
        )
        chosen = request.config.getoption("--hypothesis-profile") or "ci"
        assert settings.get_profile(chosen) == settings.default

    def test_make_fuzz_explores_at_fifty_times_the_examples(self) -> None:
        """The fuzz profile draws at random (seeded by --hypothesis-seed) with
        PRUNEWARDEN_FUZZ_SCALE times Hypothesis' 100 examples."""
        fuzz = settings.get_profile("fuzz")
        scale = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))
        assert (fuzz.derandomize, fuzz.database, fuzz.max_examples) == (False, None, 100 * scale)


class TestTimeLimit:
    def test_a_test_over_the_limit_fails_the_run_by_name(self, tmp_path: Path) -> None:
        """With a 0.3 s limit, the 0.6 s test fails, named with its time; the quick one and
        the slow-marked one pass."""
        done = run_pytest(
            tmp_path, "-o", "test_time_limit=0.3", "-o", "test_time_limit_scales_with_load=false"
        )
        assert done.returncode == 1, done.stdout
        assert "1 failed, 2 passed" in done.stdout
        assert "test_timed.py::test_dawdles passed but took" in done.stdout
        assert "over the 0.3 s a test may take (load average" in done.stdout

    def test_the_limit_grows_with_the_load_per_core(self) -> None:
        """30 s up to one runnable process per core; five per core, five times as long."""
        assert limit_under_load(30, load=1.5, cores=2) == 30
        assert limit_under_load(30, load=2.0, cores=2) == 30
        assert limit_under_load(30, load=10.0, cores=2) == 150

    def test_no_limit_when_it_is_zero(self, tmp_path: Path) -> None:
        """make fuzz sets the limit to 0: nothing is timed."""
        done = run_pytest(tmp_path, "-o", "test_time_limit=0")
        assert done.returncode == 0, done.stdout
        assert "3 passed" in done.stdout


REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.server.test_http.TestRoutes" name="test_a" time="1.5" />
<testcase classname="tests.server.test_tenants" name="test_b" time="0.5" />
<testcase classname="tests.test_docs_python.TestPages" name="test_c" time="3.0" />
<testcase classname="tests.test_json" name="test_d" time="1.0" />
<testcase classname="tests.test_json" name="test_e" time="9.0"><skipped /></testcase>
</testsuite></testsuites>
"""


class TestDurationsByFolder:
    def test_the_table_sums_each_folder_and_leaves_out_skipped_tests(self, tmp_path: Path) -> None:
        """tools/durations.py: a row per folder of tests/, the docs tests in their own row,
        the most expensive first, the skipped test not counted."""
        report = tmp_path / "report.xml"
        report.write_text(REPORT, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(DURATIONS), str(report)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert done.stdout.splitlines()[2:] == [
            "| `tests/test_docs*.py` | 1 | 3 | 50% |",
            "| `tests/server/` | 2 | 2 | 33% |",
            "| `tests/*.py (the rest)` | 1 | 1 | 17% |",
            "| all | 4 | 6 | 100% |",
        ]
