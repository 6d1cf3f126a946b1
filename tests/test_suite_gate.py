"""The suite's own rules (docs/dev/testing.md): Hypothesis derandomized by default, random only
under the fuzz profile, one test over the time limit failing the run by its name, a file's tests
on one worker of make test, and each test's CPU seconds in the JUnit report."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _support.scheduling import LONGEST_FIRST, group_of, misplaced, rank
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


# Four files, each with a fixture its module shares; each test writes where it ran.
GROUPED = """
import os
import pytest

@pytest.fixture(scope="module")
def shared(request):
    with open(os.environ["GROUPED_LOG"], "a") as log:
        log.write(f"setup {request.module.__name__} {os.getpid()}\\n")

@pytest.mark.parametrize("n", range(4))
def test_one(shared, n):
    with open(os.environ["GROUPED_LOG"], "a") as log:
        log.write(f"test {__name__} {os.getpid()}\\n")
"""


class TestWorkersGetWholeFiles:
    def test_a_module_fixture_is_made_once_on_one_worker(self, tmp_path: Path) -> None:
        """Under make test's -n 2 --dist loadgroup, each file's tests run on one worker, its
        module fixture set up once: pytest-xdist's own loadgroup, under pytest 9, split them
        and made each fixture on both workers."""
        for name in "abcd":
            (tmp_path / f"test_{name}.py").write_text(GROUPED, encoding="utf-8")
        log = tmp_path / "ran.log"
        path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
        env = {
            **os.environ,
            "PYTHONPATH": path,
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "GROUPED_LOG": str(log),
        }
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "_support.scheduling",
             "-p", "no:cacheprovider", "-q", "-n", "2", "--dist", "loadgroup"],
            cwd=tmp_path, capture_output=True, text=True, env=env, check=False, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
        setups = sorted(module for kind, module, _ in lines if kind == "setup")
        assert setups == ["test_a", "test_b", "test_c", "test_d"]
        workers = {module: {pid for _, m, pid in lines if m == module} for module in setups}
        assert all(len(pids) == 1 for pids in workers.values()), workers
        assert sum(kind == "test" for kind, _, _ in lines) == 16

    def test_a_group_is_its_file_or_the_group_its_files_share(self) -> None:
        """The wheel and pre-commit tests share the source tree: one group across two files;
        a suffix written by pytest-xdist wins."""
        assert group_of("tests/server/test_http.py::TestRoutes::test_a[x@y]") == (
            "tests/server/test_http.py"
        )
        assert group_of("tests/test_wheel.py::TestWheel::test_a") == "source-tree"
        assert group_of("tests/ci/test_precommit_hooks.py::test_b") == "source-tree"
        assert group_of("tests/test_json.py::test_c@named") == "named"

    def test_the_longest_files_are_handed_out_first(self) -> None:
        """LONGEST_FIRST in its order, then the other files, more tests first."""
        order = sorted(
            [("tests/test_json.py", 50), ("tests/test_x.py", 90), (LONGEST_FIRST[1], 3),
             (LONGEST_FIRST[0], 1)],
            key=lambda unit: rank(*unit),
        )  # fmt: skip
        assert [group for group, _ in order] == [
            LONGEST_FIRST[0],
            LONGEST_FIRST[1],
            "tests/test_x.py",
            "tests/test_json.py",
        ]

    def test_a_group_mark_the_scheduler_does_not_know_is_an_error(
        self, request: pytest.FixtureRequest
    ) -> None:
        """Every xdist_group mark of this run is honoured; one naming a group the scheduler
        would not give its test is named, file and group."""
        assert misplaced(request.session.items) == []
        item = request.node
        item.add_marker(pytest.mark.xdist_group("elsewhere"))
        expected = (
            "tests/test_suite_gate.py: xdist_group('elsewhere') is not in CROSS_FILE_GROUPS "
            "(tests/_support/scheduling.py)"
        )
        assert misplaced([item]) == [expected]

    def test_with_cpu_seconds_the_share_is_of_cpu(self, tmp_path: Path) -> None:
        """A report with each test's cpu_seconds gets a CPU column; rows rank by it."""
        report = tmp_path / "report.xml"
        cpu = '<properties><property name="cpu_seconds" value="{}" /></properties>'
        report.write_text(
            '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
            f'<testcase classname="tests.server.test_http" name="a" time="4.0">{cpu.format(1)}'
            "</testcase>"
            f'<testcase classname="tests.test_json" name="b" time="1.0">{cpu.format(3)}'
            "</testcase></testsuite></testsuites>",
            encoding="utf-8",
        )
        done = subprocess.run(
            [sys.executable, str(DURATIONS), str(report)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert done.stdout.splitlines() == [
            "| folder | tests | seconds | CPU seconds | share |",
            "|---|---:|---:|---:|---:|",
            "| `tests/*.py (the rest)` | 1 | 1 | 3 | 75% |",
            "| `tests/server/` | 1 | 4 | 1 | 25% |",
            "| all | 2 | 5 | 4 | 100% |",
        ]


SPENDING = """
import subprocess
import xml.etree.ElementTree as ET
import sys
import time

SPIN = "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass"

def test_spins():
    exec(SPIN)

def test_waits_for_a_child_that_spins():
    subprocess.run([sys.executable, "-c", SPIN], check=True)

def test_sleeps():
    time.sleep(0.3)
"""


class TestCpuSeconds:
    def test_each_test_reports_its_cpu_and_its_childrens(self, tmp_path: Path) -> None:
        """cpu_seconds counts the worker's CPU and that of the processes a test waited for;
        a test that sleeps costs next to nothing."""
        (tmp_path / "test_spending.py").write_text(SPENDING, encoding="utf-8")
        path = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
        env = {**os.environ, "PYTHONPATH": path, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "_support.cpu_time", "-p", "no:cacheprovider",
             "-q", "--junitxml", str(tmp_path / "report.xml")],
            cwd=tmp_path, capture_output=True, text=True, env=env, check=False, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        root = ET.parse(tmp_path / "report.xml").getroot()  # noqa: S314 - pytest's own file
        spent = {
            case.get("name"): float(prop.get("value", "nan"))
            for case in root.iter("testcase")
            for prop in case.iter("property")
            if prop.get("name") == "cpu_seconds"
        }
        assert spent["test_spins"] >= 0.3
        assert spent["test_waits_for_a_child_that_spins"] >= 0.3
        assert spent["test_sleeps"] < 0.1
