"""``prunewarden calibrate --spread-test cusum``: the cusum prior and threshold fitted to
healthy traces, recorded in ``metadata.calibration.cusum``.

Healthy traces hold a steady spread with a canary that often sits below the median (so signal B
alone is common); collapsed ones squeeze every score toward the centre from cycle 5 on.
"""

from __future__ import annotations

import io
import json
import math
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import Engine, load_builtin_policy, load_policy, parse_policy
from prunewarden._cusum import replay
from prunewarden.cli._main import run
from prunewarden.replay import SilentLogger, TraceData, read_trace, replay_trace
from prunewarden.replay._fit import spread_signal_traces

CYCLES = 10
ENTRIES = 12


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def session(seed: int, *, collapsed: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    width = rng.uniform(0.04, 0.08)  # each healthy session spreads its own way
    lines: list[dict[str, Any]] = [
        {"type": "session", "trace_version": 1, "session_id": f"s{seed}", "labels": {}}
    ]
    for cycle in range(1, CYCLES + 1):
        squeeze = 0.6 ** max(0, cycle - 4) if collapsed else 1.0
        scores = {
            f"e{i:02d}": round(min(0.95, max(0.3, 0.63 + rng.gauss(0, width) * squeeze)), 4)
            for i in range(ENTRIES)
        }
        scores["task"] = 0.55 if collapsed or rng.random() < 0.5 else 0.75
        lines.append({"type": "cycle", "cycle": cycle, "scores": scores, "pinned": ["task"]})
    return lines


def write(folder: Path, name: str, seeds: Sequence[int], *, collapsed: bool) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in seeds:
        path = folder / f"{name}-{seed}.jsonl"
        lines = session(seed, collapsed=collapsed)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("traces")
    return {
        "healthy": write(folder, "healthy", range(16), collapsed=False),
        "collapsed": write(folder, "collapsed", range(200, 204), collapsed=True),
    }


@pytest.fixture(scope="module")
def fitted(
    traces: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int, str]:
    out = tmp_path_factory.mktemp("fit") / "cusum.yaml"
    code, stdout, _ = cli(
        "calibrate", "--healthy", *traces["healthy"], "--collapsed", *traces["collapsed"],
        "--spread-test", "cusum", "--base", "builtin:default", "--out", str(out),
        "--date", "2026-01-31",
    )  # fmt: skip
    return out, code, stdout


def calibration(out: Path) -> dict[str, Any]:
    document = yaml.safe_load(out.read_text(encoding="utf-8"))
    found: dict[str, Any] = document["metadata"]["calibration"]
    return found


def spreads_on(path: str, low: float, high: float) -> list[float]:
    lines = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return [
        statistics.pstdev(
            min(max((v - low) / (high - low), 0.0), 1.0) for v in c["scores"].values()
        )
        for c in lines
        if c["type"] == "cycle"
    ]


class TestCusumFit:
    def test_the_fitted_policy_opts_in_and_records_the_fit(
        self, fitted: tuple[Path, int, str]
    ) -> None:
        """The fitted policy states the cusum mode; metadata.calibration.cusum holds the fit."""
        out, code, stdout = fitted
        assert code == 0
        policy = load_policy(out)
        assert policy.spec.collapse.spread_floor_mode == "cusum"
        record = calibration(out)["cusum"]
        assert "spread_floor" not in calibration(out)
        assert record["threshold"] == pytest.approx(record["largest_halting_threshold"] + 0.5)
        assert policy.spec.collapse.cusum is not None
        assert policy.spec.collapse.cusum.threshold == record["threshold"]
        assert policy.spec.collapse.cusum.prior_log_spread == record["prior_log_spread"]
        assert policy.spec.collapse.cusum.prior_weight == record["prior_weight"]
        assert "cusum   threshold" in stdout

    def test_the_prior_is_the_mean_of_each_traces_mean_log_spread(
        self, fitted: tuple[Path, int, str], traces: dict[str, list[str]]
    ) -> None:
        """mu is recomputed here from the traces on the fitted scale, to 6 decimals."""
        out, _, _ = fitted
        scale = calibration(out)["scale"]
        means = [
            statistics.fmean(
                math.log(max(s, 1e-6)) for s in spreads_on(p, scale["low"], scale["high"])
            )
            for p in traces["healthy"]
        ]
        assert calibration(out)["cusum"]["prior_log_spread"] == pytest.approx(
            statistics.fmean(means), abs=1e-6
        )

    def test_no_healthy_trace_reaches_the_fitted_threshold_on_spread_alone(
        self, fitted: tuple[Path, int, str], traces: dict[str, list[str]]
    ) -> None:
        """Replayed with the fitted parameters, no healthy trace raises signal A."""
        out, _, _ = fitted
        policy = load_policy(out)
        parameters = policy.spec.collapse.cusum_parameters()
        assert parameters is not None
        scale = calibration(out)["scale"]
        for path in traces["healthy"]:
            spreads = spreads_on(path, scale["low"], scale["high"])
            cycles = [(i, s, True) for i, s in enumerate(spreads, start=1)]
            assert replay(parameters, cycles).signal(parameters) is False

    def test_the_fitted_policy_halts_on_the_collapsed_traces(
        self, fitted: tuple[Path, int, str], traces: dict[str, list[str]]
    ) -> None:
        """Every squeezed trace halts under the fitted policy, and no healthy one does."""
        out, _, _ = fitted
        engine = Engine(load_policy(out), logger=SilentLogger())

        def halts(path: str) -> bool:
            return bool(replay_trace(engine, path).outcomes["collapse"].get("halt", 0))

        assert [halts(p) for p in traces["collapsed"]] == [True] * len(traces["collapsed"])
        assert not any(halts(p) for p in traces["healthy"])

    def test_a_plot_is_refused_for_the_cusum_fit(
        self, traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """--plot draws an absolute floor: with --spread-test cusum it is a usage error."""
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:2], "--spread-test", "cusum",
            "--base", "builtin:default", "--out", str(tmp_path / "x.yaml"),
            "--plot", str(tmp_path / "x.png"),
        )  # fmt: skip
        assert code == 2
        assert "--plot" in stderr
        assert not (tmp_path / "x.yaml").exists()


@pytest.fixture(scope="module")
def powered(
    traces: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int, str]:
    out = tmp_path_factory.mktemp("power") / "cusum.yaml"
    code, stdout, _ = cli(
        "calibrate", "--healthy", *traces["healthy"][:5], "--spread-test", "cusum", "--power",
        "--base", "builtin:default", "--out", str(out), "--date", "2026-01-31",
    )  # fmt: skip
    return out, code, stdout


class TestPower:
    def test_the_power_record_has_each_factor_for_both_policies(
        self, powered: tuple[Path, int, str]
    ) -> None:
        """metadata.calibration.power: recall and median delay per squeeze, for base and fit."""
        out, code, _ = powered
        assert code == 0
        record = calibration(out)["power"]
        assert record["factors"] == [0.2, 0.35, 0.5, 0.7]
        assert record["held_out"] == 5
        for name in ("base", "fitted"):
            assert len(record["recall"][name]) == 4
            assert all(0.0 <= r <= 1.0 for r in record["recall"][name])
        assert record["recall"]["fitted"][0] == 1.0  # squeezed to a fifth: every copy caught
        assert record["false_halts"] == 0.0

    def test_a_stronger_squeeze_is_caught_at_least_as_often(
        self, powered: tuple[Path, int, str]
    ) -> None:
        """The fitted recall does not rise as the squeeze gets milder (0.2 -> 0.7)."""
        recall = calibration(powered[0])["power"]["recall"]["fitted"]
        assert recall == sorted(recall, reverse=True)

    def test_the_table_says_the_injection_is_synthetic(
        self, powered: tuple[Path, int, str]
    ) -> None:
        """The printed table names its method's limits."""
        stdout = powered[2]
        assert "leave-one-out over 5 healthy trace(s)" in stdout
        assert "synthetic" in stdout
        assert "gradual collapse is caught less often" in stdout

    def test_power_is_deterministic(
        self, powered: tuple[Path, int, str], traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """The same traces and options give the same file, power included."""
        out = tmp_path / "cusum.yaml"
        cli(
            "calibrate", "--healthy", *traces["healthy"][:5], "--spread-test", "cusum",
            "--power", "--base", "builtin:default", "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert out.read_text(encoding="utf-8") == powered[0].read_text(encoding="utf-8")

    def test_one_healthy_trace_is_too_few(
        self, traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """--power with a single healthy trace is a usage error, and nothing is written."""
        out = tmp_path / "x.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", traces["healthy"][0], "--power",
            "--base", "builtin:default", "--out", str(out),
        )  # fmt: skip
        assert code == 2
        assert "--power needs at least two healthy traces" in stderr
        assert not out.exists()

    def test_the_power_plot_is_a_png(self, traces: dict[str, list[str]], tmp_path: Path) -> None:
        """--power-plot FILE writes recall versus squeeze as a PNG (real matplotlib)."""
        plot = tmp_path / "plots" / "power.png"
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:3], "--spread-test", "cusum",
            "--power", "--power-plot", str(plot), "--base", "builtin:default",
            "--out", str(tmp_path / "cusum.yaml"), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0
        assert f"power plot: written to {plot}\n" in stderr
        assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    def test_a_power_plot_needs_power(self, traces: dict[str, list[str]], tmp_path: Path) -> None:
        """--power-plot without --power is a usage error, and nothing is written."""
        out = tmp_path / "x.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:2], "--power-plot",
            str(tmp_path / "p.png"), "--base", "builtin:default", "--out", str(out),
        )  # fmt: skip
        assert code == 2
        assert "add --power" in stderr
        assert not out.exists()


def steady_canary_traces(folder: Path, count: int) -> list[str]:
    """Healthy traces whose canary sits on top of every cycle: it never inverts."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(count):
        rng = random.Random(seed)  # noqa: S311 - test data, not secrets
        lines: list[dict[str, Any]] = [
            {"type": "session", "trace_version": 1, "session_id": f"s{seed}", "labels": {}}
        ]
        for cycle in range(1, 7):
            scores = {f"e{i}": round(0.6 + rng.gauss(0, 0.05), 4) for i in range(8)}
            scores["task"] = 0.95
            lines.append({"type": "cycle", "cycle": cycle, "scores": scores, "pinned": ["task"]})
        path = folder / f"steady-{seed}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        paths.append(str(path))
    return paths


class TestCanaryOnlyFloor:
    def test_a_floor_above_every_healthy_spread_is_refused(self, tmp_path: Path) -> None:
        """A canary that never inverts lets the fit put the floor above every spread: nothing
        is written, exit 3, and every healthy trace is named with its largest spread."""
        healthy = steady_canary_traces(tmp_path / "traces", 2)
        out = tmp_path / "fit.yaml"
        code, stdout, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 3
        assert not out.exists()
        assert stdout == ""
        assert "is at or above every healthy spread" in stderr
        assert "--accept-degenerate" in stderr
        assert all(f"{path} (" in stderr for path in healthy)

    def test_accept_degenerate_writes_it_and_says_why(self, tmp_path: Path) -> None:
        healthy = steady_canary_traces(tmp_path / "traces", 2)
        out = tmp_path / "fit.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--accept-degenerate", "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0
        assert out.exists()
        assert stderr.startswith(f"warning: {out}: written with --accept-degenerate: ")

    def test_a_floor_above_every_healthy_spread_is_warned_about(self, tmp_path: Path) -> None:
        """Accepted, the same fit under --power also warns about the canary, naming the
        traces; the fitted file is written."""
        healthy = steady_canary_traces(tmp_path / "traces", 3)
        out = tmp_path / "fit.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default", "--power",
            "--accept-degenerate", "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0
        assert out.exists()
        assert "was not fitted on spread evidence" in stderr
        assert all(path in stderr for path in healthy)

    def test_a_fit_on_spread_evidence_is_not_warned_about(
        self, traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """Healthy traces whose canary inverts now and then give a floor the spreads bound."""
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:4], "--base", "builtin:default",
            "--power", "--out", str(tmp_path / "fit.yaml"), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0
        assert "warning" not in stderr


class TestFloorFromSpread:
    def test_the_floor_is_fitted_below_the_healthy_spreads(self, tmp_path: Path) -> None:
        """A canary that never inverts no longer lifts the floor: fitted on spread evidence
        alone, no healthy trace raises signal A, and the record says how it was fitted."""
        healthy = steady_canary_traces(tmp_path / "traces", 3)
        out = tmp_path / "fit.yaml"
        code, stdout, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--floor-from", "spread", "--power", "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0
        assert "warning" not in stderr
        record = calibration(out)["spread_floor"]
        assert record["from"] == "spread evidence alone (--floor-from spread)"
        assert "on spread evidence alone" in stdout
        low, high = calibration(out)["scale"]["low"], calibration(out)["scale"]["high"]
        spreads = [s for path in healthy for s in spreads_on(path, low, high)]
        assert record["largest_quiet"] < 1.0
        assert record["fitted"] < max(spreads)
        assert spread_signal_traces(load_policy(out, lock=False), read(healthy)) == []

    def test_the_largest_quiet_floor_is_the_last_before_signal_a(self, tmp_path: Path) -> None:
        """One step above the largest quiet floor, some healthy trace raises signal A."""
        healthy = steady_canary_traces(tmp_path / "traces", 3)
        out = tmp_path / "fit.yaml"
        code, _, _ = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--floor-from", "spread", "--headroom", "1", "--out", str(out),
        )  # fmt: skip
        assert code == 0
        fitted = load_policy(out, lock=False)
        document = {
            "apiVersion": "prunewarden/v1", "kind": "Policy", "extends": str(out),
            "metadata": {"name": "above", "version": "1.0.0"},
            "spec": {"collapse": {"spread_floor": fitted.spec.collapse.spread_floor + 1e-6}},
        }  # fmt: skip
        above = parse_policy(json.dumps(document), str(tmp_path / "above.yaml"))
        assert spread_signal_traces(above, read(healthy)) != []

    def test_the_default_fit_records_what_it_always_did(self, tmp_path: Path) -> None:
        """Without the option the floor record has no ``from``: the output is unchanged."""
        healthy = steady_canary_traces(tmp_path / "traces", 2)
        out = tmp_path / "fit.yaml"
        cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--accept-degenerate", "--out", str(out),
        )  # fmt: skip
        assert set(calibration(out)["spread_floor"]) == {"fitted", "largest_quiet"}

    def test_it_is_refused_for_the_cusum_test(self, tmp_path: Path) -> None:
        """The cusum test has no floor to fit: usage error, nothing written."""
        healthy = steady_canary_traces(tmp_path / "traces", 2)
        out = tmp_path / "fit.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", *healthy, "--base", "builtin:default",
            "--floor-from", "spread", "--spread-test", "cusum", "--out", str(out),
        )  # fmt: skip
        assert code == 2
        assert "--floor-from spread fits an absolute floor" in stderr
        assert not out.exists()


def read(paths: Sequence[str]) -> list[TraceData]:
    return [read_trace(path, load_builtin_policy()) for path in paths]
