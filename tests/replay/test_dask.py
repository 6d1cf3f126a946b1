"""``--executor dask``: replay and diff on a real LocalCluster of two worker processes give the
serial run's decisions, line for line, and exit as it does."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.fleet import generated_traces
from distributed import Client, LocalCluster
from prunewarden.cli._main import run

pytestmark = pytest.mark.spawns

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(str(path) for path in (ROOT / "examples" / "traces").glob("*.jsonl"))
LOOSE = str(ROOT / "examples" / "policies" / "loose-candidate.yaml")
GENERATED = 200
# Bounds on the cluster's start and on every run: a hung cluster fails the test, never CI.
TIMEOUT = 120
_ID = re.compile(r'"[0-9a-f]{32}(-[0-9]+)?"')
_TIME = re.compile(r'"evaluated_at":"[^"]*"')


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def without_ids(lines: str) -> list[str]:
    """Decision lines with the decision ids (wherever they are quoted) and times blanked."""
    return [_TIME.sub('"evaluated_at":""', _ID.sub('""', line)) for line in lines.splitlines()]


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A LocalCluster of two worker processes on the loopback, closed after the module."""
    cluster = LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # its HTTP server, on a free loopback port
        timeout=TIMEOUT,
    )
    try:
        with Client(cluster, timeout=TIMEOUT) as client:  # type: ignore[no-untyped-call]
            client.wait_for_workers(2, timeout=TIMEOUT)
        yield cluster.scheduler_address
    finally:
        cluster.close(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The example traces, then 200 generated healthy sessions of a few turns each."""
    return [*EXAMPLES, *generated_traces(tmp_path_factory.mktemp("generated"), GENERATED)]


class TestDaskReplay:
    def test_decisions_equal_the_serial_run(
        self, scheduler: str, traces: list[str], tmp_path: Path
    ) -> None:
        """Every decision line, in order, and the JSON report are the serial run's."""
        serial, dask = tmp_path / "serial.jsonl", tmp_path / "dask.jsonl"
        code, report, err = cli("replay", *traces, "--decisions", str(serial), "--format", "json")
        assert (code, err) == (0, "")
        code, dask_report, err = cli(
            "replay",
            *traces,
            "--decisions",
            str(dask),
            "--format",
            "json",
            "--executor",
            "dask",
            "--scheduler",
            scheduler,
        )
        assert (code, err) == (0, "")
        expected = without_ids(serial.read_text())
        assert len(expected) > 1000
        assert without_ids(dask.read_text()) == expected
        assert json.loads(dask_report)["traces"] == json.loads(report)["traces"]

    def test_a_diff_exits_as_the_serial_diff(self, scheduler: str, traces: list[str]) -> None:
        """diff on the cluster finds the same changes and exits 1 as the serial diff does."""
        serial = cli("diff", *traces, "--base", "builtin:default", "--candidate", LOOSE)
        dask = cli(
            "diff",
            *traces,
            "--base",
            "builtin:default",
            "--candidate",
            LOOSE,
            "--executor",
            "dask",
            "--scheduler",
            scheduler,
        )
        assert serial[0] == 1
        assert dask == serial

    def test_a_malformed_trace_stops_only_itself(self, scheduler: str, tmp_path: Path) -> None:
        """A bad line is reported located and exits 2; the traces around it still replay."""
        bad = tmp_path / "bad.jsonl"
        bad.write_text(
            '{"type": "session", "trace_version": 1, "session_id": "s"}\n{"type": "cycle"}\n'
        )
        argv = ("replay", EXAMPLES[0], str(bad), EXAMPLES[1], "--format", "json")
        serial = cli(*argv)
        dask = cli(*argv, "--executor", "dask", "--scheduler", scheduler)
        assert serial[0] == 2
        assert f"{bad}:2:" in serial[2]
        assert dask == serial

    def test_calibrate_compares_on_the_cluster(self, scheduler: str, tmp_path: Path) -> None:
        """calibrate's per-trace comparison on the cluster prints what the serial run prints."""
        named = {Path(path).name: path for path in EXAMPLES}
        healthy = [named["healthy-session.jsonl"], named["healthy-homogeneous.jsonl"]]
        argv = (
            "calibrate", "--healthy", *healthy,
            "--collapsed", named["collapse-narrowing.jsonl"],
            "--base", "builtin:default", "--date", "2026-11-30", "--accept-degenerate",
        )  # fmt: skip
        out = str(tmp_path / "fitted.yaml")
        serial = cli(*argv, "--out", out)
        dask = cli(*argv, "--out", out, "--executor", "dask", "--scheduler", scheduler)
        assert serial[0] == 0
        assert "halt at cycle 12 (collapse_detected) -> halt at cycle" in serial[1]
        assert dask == serial


class TestDaskOptions:
    def test_a_local_cluster_sized_by_jobs(self, tmp_path: Path) -> None:
        """Without --scheduler, a LocalCluster of --jobs workers runs for the command."""
        out = tmp_path / "out.jsonl"
        argv = ("replay", *EXAMPLES[:3], "--decisions", str(out), "--jobs", "2")
        code, _, err = cli(*argv, "--executor", "dask")
        assert code == 0, err
        dask = without_ids(out.read_text())
        assert cli(*argv)[0] == 0
        assert dask == without_ids(out.read_text())

    def test_scheduler_needs_the_dask_executor(self) -> None:
        """--scheduler with the process pool is a usage error (exit 2)."""
        code, _, err = cli("replay", EXAMPLES[0], "--scheduler", "tcp://127.0.0.1:1")
        assert code == 2
        assert "--scheduler needs --executor dask" in err

    def test_a_missing_extra_is_named(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without distributed installed, the error says which extra to install (exit 2)."""
        monkeypatch.setitem(sys.modules, "distributed", None)
        code, _, err = cli("replay", *EXAMPLES[:2], "--executor", "dask")
        assert code == 2
        assert "pip install 'prunewarden[dask]'" in err
