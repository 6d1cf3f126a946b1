"""``prunewarden calibrate``: a scale and a floor fitted to one scorer's healthy traces.

The traces are generated here, as an embedding scorer gives them: raw cosine-like scores bunched
around 0.63 (spread about 0.06, so always under the seed floor of 0.08), with a task canary that
drifts below the median in most healthy sessions, which the default policy takes for collapse.
Collapsed sessions start the same, then press every score towards the centre while the canary
sinks.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from prunewarden import Engine, PolicyError, load_builtin_policy, load_policy
from prunewarden.cli._main import run
from prunewarden.replay._fit import bump_minor, quantile
from prunewarden.replay._fit_extends import extends_reference
from prunewarden.replay._run import SilentLogger, replay_trace

DEFAULT = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"
CYCLES = 8
ENTRIES = 12


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def session(seed: int, *, collapsed: bool) -> list[dict[str, object]]:
    """One session's trace lines."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    drifts = rng.random() < 0.8  # the task statement sits below the median (topic drift)
    lines: list[dict[str, object]] = [
        {"type": "session", "trace_version": 1, "session_id": f"s{seed}", "labels": {}}
    ]
    for cycle in range(1, CYCLES + 1):
        squeeze = 0.5 ** (cycle - 1) if collapsed else 1.0
        scores = {
            f"e{i:02d}": round(min(0.91, max(0.35, 0.63 + rng.gauss(0, 0.06) * squeeze)), 4)
            for i in range(ENTRIES)
        }
        sinking = 0.75 - 0.04 * cycle
        canary = sinking if collapsed else 0.61 if drifts else 0.75
        scores["task"] = round(canary + rng.uniform(-0.005, 0.005), 4)
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


def halted(policy_path: str | None, traces: Sequence[str]) -> list[str]:
    """The traces on which the collapse guard halts under a policy (None: the default)."""
    policy = load_builtin_policy() if policy_path is None else load_policy(policy_path)
    engine = Engine(policy, logger=SilentLogger())
    return [t for t in traces if replay_trace(engine, t).outcomes["collapse"].get("halt", 0)]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("traces")
    return {
        "healthy": write(folder, "healthy", range(20), collapsed=False),
        "held_out": write(folder, "held-out", range(100, 120), collapsed=False),
        "collapsed": write(folder, "collapsed", range(200, 205), collapsed=True),
    }


@pytest.fixture(scope="module")
def fitted(
    traces: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, int, str, str]:
    out = tmp_path_factory.mktemp("fit") / "calibrated.yaml"
    code, stdout, stderr = cli(
        "calibrate",
        "--healthy",
        *traces["healthy"],
        "--collapsed",
        *traces["collapsed"],
        "--target-false-positive-rate",
        "0.05",
        "--base",
        "builtin:default",
        "--out",
        str(out),
        "--date",
        "2026-01-31",
    )
    return out, code, stdout, stderr


class TestHelpers:
    @pytest.mark.parametrize(
        ("values", "q", "expected"),
        [([1.0], 0.5, 1.0), ([0.0, 1.0], 0.05, 0.05), ([0.0, 1.0, 2.0, 3.0, 4.0], 0.95, 3.8)],
    )
    def test_quantile_interpolates(self, values: list[float], q: float, expected: float) -> None:
        """Linear interpolation between the closest ranks."""
        assert quantile(values, q) == pytest.approx(expected)

    @pytest.mark.parametrize(
        ("version", "expected"), [("1.0.0", "1.1.0"), ("2.7.3", "2.8.0"), ("1.2.0-rc.1", "1.3.0")]
    )
    def test_minor_version_bump(self, version: str, expected: str) -> None:
        """A fitted policy is the base's next minor version."""
        assert bump_minor(version) == expected

    def test_extends_reference(self, tmp_path: Path) -> None:
        """A builtin stays as given; a file is named relative to the fitted policy's folder."""
        assert extends_reference("builtin:default", "x.yaml") == "builtin:default"
        base = tmp_path / "policies" / "base.yaml"
        out = tmp_path / "fitted" / "new.yaml"
        assert extends_reference(str(base), str(out)) == "../policies/base.yaml"


class TestCalibrate:
    def test_default_policy_false_positives_on_healthy_traces(
        self, traces: dict[str, list[str]]
    ) -> None:
        """The premise: bunched raw scores make the seed thresholds halt healthy sessions."""
        assert len(halted(None, traces["held_out"])) >= 10

    def test_fitted_policy_is_quiet_on_held_out_healthy(
        self, fitted: tuple[Path, int, str, str], traces: dict[str, list[str]]
    ) -> None:
        """On healthy sessions it never saw, the fitted policy halts at most at the target rate."""
        out, code, _, stderr = fitted
        assert code == 0, stderr
        assert len(halted(str(out), traces["held_out"])) <= 0.05 * len(traces["held_out"])

    def test_fitted_policy_still_halts_on_collapse(
        self, fitted: tuple[Path, int, str, str], traces: dict[str, list[str]]
    ) -> None:
        """Every known-collapsed session still halts."""
        out, _, _, _ = fitted
        assert halted(str(out), traces["collapsed"]) == traces["collapsed"]

    def test_new_version_records_what_it_was_fitted_on(
        self, fitted: tuple[Path, int, str, str], traces: dict[str, list[str]]
    ) -> None:
        """Same name, next minor version, extends the base; metadata names every trace."""
        out, _, _, _ = fitted
        document = yaml.safe_load(out.read_text(encoding="utf-8"))
        assert document["extends"] == "builtin:default"
        policy = load_policy(out)
        assert (policy.name, policy.version) == ("default", "1.1.0")
        calibration = document["metadata"]["calibration"]
        assert calibration["date"] == "2026-01-31"
        assert calibration["target_false_positive_rate"] == 0.05
        assert calibration["base"]["digest"] == load_builtin_policy().digest
        first = calibration["healthy"][0]
        digest = hashlib.sha256(Path(traces["healthy"][0]).read_bytes()).hexdigest()
        assert first == {"trace": traces["healthy"][0], "sha256": digest, "cycles": CYCLES}
        assert len(calibration["collapsed"]) == len(traces["collapsed"])
        results = calibration["results"]
        assert results["calibrated"]["healthy_halted"] <= 1
        assert results["base"]["healthy_halted"] >= 10
        assert results["calibrated"]["collapsed_halted"] == len(traces["collapsed"])
        scale = policy.spec.calibration
        assert scale is not None
        assert 0.35 <= scale.low < 0.63 < scale.high <= 0.91

    def test_report_sets_base_beside_fitted(self, fitted: tuple[Path, int, str, str]) -> None:
        """The report gives the counts and every trace's first halt under both policies."""
        _, _, stdout, _ = fitted
        assert "base    default@1.0.0" in stdout
        assert "fitted  default@1.1.0" in stdout
        assert "healthy-0.jsonl" in stdout
        assert "halt at cycle" in stdout
        assert "5/5 halt" in stdout

    def test_deterministic(
        self, fitted: tuple[Path, int, str, str], traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """The same inputs write byte-identical policies."""
        out, _, _, _ = fitted
        again = tmp_path / "again.yaml"
        code, _, _ = cli(
            "calibrate",
            "--healthy",
            *traces["healthy"],
            "--collapsed",
            *traces["collapsed"],
            "--base",
            "builtin:default",
            "--out",
            str(again),
            "--date",
            "2026-01-31",
        )
        assert code == 0
        assert again.read_bytes() == out.read_bytes()

    def test_missed_collapse_is_named(self, traces: dict[str, list[str]], tmp_path: Path) -> None:
        """A 'collapsed' trace the fit does not halt on is named, exit 1, the policy written."""
        out = tmp_path / "new.yaml"
        missed = traces["held_out"][0]
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"], "--collapsed", missed,
            "--base", "builtin:default", "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 1
        assert f"{missed}: known collapsed, but the fitted policy does not halt on it" in stderr
        assert out.exists()

    def test_file_base_is_extended_relative(
        self, traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """A base file is extended by a path relative to the new policy, which loads."""
        base = tmp_path / "policies" / "team.yaml"
        base.parent.mkdir()
        base.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\n"
            "metadata: {name: team, version: 2.3.1}\nspec: {scores: {min: -1.0, max: 1.0}}\n",
            encoding="utf-8",
        )
        out = tmp_path / "fitted" / "team.yaml"
        out.parent.mkdir()
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:5], "--base", str(base),
            "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0, stderr
        with pytest.raises(PolicyError, match="outside the folder of this policy"):
            load_policy(out)  # the base is not in the fitted policy's folder
        policy = load_policy(out, base_dirs=(base.parent,))
        assert policy.version == "2.4.0"
        assert policy.spec.scores.min == -1.0
        assert yaml.safe_load(out.read_text(encoding="utf-8"))["extends"] == "../policies/team.yaml"

    def test_a_base_outside_the_folder_says_how_to_load_the_fit(
        self, traces: dict[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """calibrate --base base.yaml --out fitted/new.yaml prints the exact --base-dir the
        written policy needs, and the command it prints loads it (it exited 3 as written)."""
        monkeypatch.chdir(tmp_path)
        Path("base.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\n"
            "metadata: {name: team, version: 2.3.1}\nspec: {scores: {min: -1.0, max: 1.0}}\n",
            encoding="utf-8",
        )
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:5], "--base", "base.yaml",
            "--out", "fitted/new.yaml", "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0, stderr
        said, command = stderr.splitlines()[:2]
        assert said == (
            "fitted/new.yaml: extends ../base.yaml, outside its own folder: load it with "
            "--base-dir ., as in"
        )
        assert command == "  prunewarden --base-dir . replay --policy fitted/new.yaml TRACE..."
        assert cli("replay", "--policy", "fitted/new.yaml", traces["held_out"][0])[0] == 3
        argv = shlex.split(command)[1:-1]
        replayed, out, err = cli(*argv, traces["held_out"][0])
        assert (replayed, err) == (0, "")
        assert out.startswith("policy team@2.4.0 ")
        header = Path("fitted/new.yaml").read_text(encoding="utf-8").splitlines()[3]
        assert header.startswith("# Its base is outside this file's folder: load it with")

    def test_a_base_reached_through_a_base_dir_is_named_too(
        self, traces: dict[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A base whose own chain needed --base-dir: the printed command allows both folders,
        and loads the fit."""
        monkeypatch.chdir(tmp_path)
        for folder in ("shared", "team", "fitted"):
            Path(folder).mkdir()
        Path("shared/org.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\n"
            "metadata: {name: org, version: 1.0.0}\nspec: {scores: {min: -1.0, max: 1.0}}\n",
            encoding="utf-8",
        )
        Path("team/base.yaml").write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\nextends: ../shared/org.yaml\n"
            "metadata: {name: team, version: 2.3.1}\nspec: {}\n",
            encoding="utf-8",
        )
        code, _, stderr = cli(
            "--base-dir", "shared", "calibrate", "--healthy", *traces["healthy"][:5],
            "--base", "team/base.yaml", "--out", "fitted/new.yaml", "--date", "2026-01-31",
        )  # fmt: skip
        assert code == 0, stderr
        command = stderr.splitlines()[1]
        assert command == (
            "  prunewarden --base-dir team --base-dir shared replay --policy fitted/new.yaml "
            "TRACE..."
        )
        assert cli(*shlex.split(command)[1:-1], traces["held_out"][0])[0] == 0

    def test_a_base_in_the_folder_needs_nothing(
        self, traces: dict[str, list[str]], tmp_path: Path
    ) -> None:
        """A fit written beside its base loads as it is, and calibrate adds no instructions."""
        base = tmp_path / "base.yaml"
        base.write_text(
            "apiVersion: prunewarden/v1\nkind: Policy\n"
            "metadata: {name: team, version: 2.3.1}\nspec: {scores: {min: -1.0, max: 1.0}}\n",
            encoding="utf-8",
        )
        out = tmp_path / "new.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", *traces["healthy"][:5], "--base", str(base),
            "--out", str(out), "--date", "2026-01-31",
        )  # fmt: skip
        assert (code, stderr) == (0, "")
        assert cli("replay", "--policy", str(out), traces["held_out"][0])[0] == 0

    @pytest.mark.parametrize(
        ("line", "expected"),
        [
            ('{"type": "cycle", "cycle": 1, "scores": {"a": 1.5}}', "outside the policy's score"),
            ("not json", ":2:"),
        ],
    )
    def test_bad_trace_writes_nothing(self, tmp_path: Path, line: str, expected: str) -> None:
        """A malformed trace is an input error naming the line; nothing is written."""
        trace = tmp_path / "bad.jsonl"
        header = {"type": "session", "trace_version": 1, "session_id": "x"}
        trace.write_text(json.dumps(header) + "\n" + line + "\n", encoding="utf-8")
        out = tmp_path / "new.yaml"
        code, _, stderr = cli(
            "calibrate", "--healthy", str(trace), "--base", "builtin:default", "--out", str(out)
        )
        assert code == 2
        assert expected in stderr
        assert not out.exists()

    @pytest.mark.parametrize(
        ("option", "value"),
        [("--target-false-positive-rate", "1.5"), ("--headroom", "0"), ("--date", "31/01/2026")],
    )
    def test_bad_options_are_usage_errors(self, option: str, value: str, tmp_path: Path) -> None:
        """Out-of-range rates, headroom and dates are refused before anything runs."""
        code, _, _ = cli(
            "calibrate", "--healthy", "x.jsonl", "--base", "builtin:default",
            "--out", str(tmp_path / "o.yaml"), option, value,
        )  # fmt: skip
        assert code == 2

    def test_out_must_not_be_the_base(self, tmp_path: Path) -> None:
        """Overwriting the base would make the new policy extend itself: refused."""
        base = tmp_path / "base.yaml"
        base.write_text(DEFAULT.read_text(encoding="utf-8"), encoding="utf-8")
        code, _, stderr = cli(
            "calibrate", "--healthy", "x.jsonl", "--base", str(base), "--out", str(base)
        )
        assert code == 2
        assert "must not overwrite the base" in stderr
