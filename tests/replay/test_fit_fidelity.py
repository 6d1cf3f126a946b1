"""``prunewarden calibrate --fidelity``: the meaning method's floor fitted to faithful pairs.

The pairs are a slice of the benchmark's (``benchmarks/fidelity/pairs.jsonl``), embedded by the
bundled MiniLM model, offline.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
import yaml
from prunewarden import load_builtin_policy, load_policy
from prunewarden.cli._main import run
from prunewarden.fidelity import FidelitySettings, check_fidelity
from prunewarden.replay._fit import bump_minor
from prunewarden.replay._fit_fidelity import largest_quiet_floor, read_pairs, similarities
from prunewarden.scoring.embed import MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "benchmarks" / "fidelity" / "pairs.jsonl"
DEFAULT = ROOT / "policies" / "default.yaml"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The eighty pairs of two conversations, half faithful and half lossy, labelled."""
    lines = [
        line
        for line in PAIRS.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["source"] in {"ferry-trip", "utc-export"}
    ]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fitted(pairs_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("fit") / "fitted.yaml"
    code, stdout, stderr = cli(
        "calibrate", "--fidelity", str(pairs_file), "--base", "builtin:default", "--out",
        str(out), "--date", "2026-12-01",
    )  # fmt: skip
    assert (code, stderr) == (0, "")
    return out, stdout


class TestFloor:
    @pytest.mark.parametrize(
        ("values", "rate", "expected"),
        [
            ([0.9, 0.5, 0.7, 0.8], 0.0, 0.5),
            ([0.9, 0.5, 0.7, 0.8], 0.25, 0.7),
            ([0.9, 0.5, 0.7, 0.8], 0.49, 0.7),
            ([0.9, 0.5], 1.0, 1.0),
        ],
    )
    def test_largest_floor_refusing_at_most_the_rate(
        self, values: list[float], rate: float, expected: float
    ) -> None:
        """The floor is the largest at which at most ``rate`` of the values lie below it."""
        assert largest_quiet_floor(values, rate) == expected


class TestCalibrateFidelity:
    def test_the_new_version_states_the_floor_and_what_it_was_fitted_on(
        self, fitted: tuple[Path, str], pairs_file: Path
    ) -> None:
        """A new minor version extending the base, method both and the fitted floor, with the
        file's digest, counts and results in metadata.calibration."""
        out, _ = fitted
        policy = load_policy(str(out))
        base = load_builtin_policy("default")
        document = yaml.safe_load(out.read_text(encoding="utf-8"))
        assert document["extends"] == "builtin:default"
        assert policy.version == bump_minor(base.version)
        assert document["metadata"]["calibration"]["base"] == base.identity.to_dict()
        floor = document["spec"]["fidelity"]["embedding_floor"]
        assert document["spec"]["fidelity"]["method"] == "both"
        assert policy.spec.fidelity.method == "both"
        assert policy.spec.fidelity.embedding_floor == floor
        calibration = document["metadata"]["calibration"]["fidelity"]
        digest = hashlib.sha256(pairs_file.read_bytes()).hexdigest()
        assert calibration["pairs"]["sha256"] == digest
        assert calibration["pairs"]["faithful"] == 40
        assert calibration["pairs"]["lossy"] == 40
        assert calibration["embedding_floor"]["fitted"] == floor
        assert calibration["results"]["faithful_refused"] <= 2  # at most 5% of 40

    def test_the_fitted_floor_refuses_what_the_report_says(
        self, fitted: tuple[Path, str], pairs_file: Path
    ) -> None:
        """Checked again through check_fidelity at the fitted floor, the faithful pairs refused
        by the meaning method are the count the report prints."""
        out, stdout = fitted
        floor = load_policy(str(out)).spec.fidelity.embedding_floor
        pairs, _ = read_pairs(str(pairs_file))
        settings = FidelitySettings(method="embedding", embedding_floor=floor)
        embedder = MiniLMEmbedder()
        refused = sum(
            check_fidelity(p.parents, ("s", p.summary), settings, embedder=embedder).refused
            for p in pairs
            if p.label == "faithful"
        )
        assert f"faithful pairs the meaning method refuses: {refused} of 40" in stdout
        faithful = [p for p in pairs if p.label == "faithful"]
        assert sum(s < floor for s in similarities(faithful, embedder)) == refused

    def test_deterministic(self, fitted: tuple[Path, str], pairs_file: Path) -> None:
        """The same pairs, base and date write the same bytes."""
        out, _ = fitted
        again = out.with_name("again.yaml")
        code, _, _ = cli(
            "calibrate", "--fidelity", str(pairs_file), "--base", "builtin:default", "--out",
            str(again), "--date", "2026-12-01",
        )  # fmt: skip
        assert code == 0
        assert again.read_bytes().replace(b"again.yaml", b"") == out.read_bytes().replace(
            b"fitted.yaml", b""
        )


class TestBadInput:
    @pytest.mark.parametrize(
        ("line", "expected"),
        [
            ("{not json", ":1:2: $: not JSON: Expecting property name enclosed in double quotes"),
            ('{"parents": [], "summary": "s"}', ":1:1: $.parents: [] is not a non-empty list"),
            ('{"parents": ["p"], "summary": 3}', ":1:1: $.summary: 3 is not a string"),
            (
                '{"parents": [{"id": "a"}], "summary": "s"}',
                ":1:1: $.parents[0]: {'id': 'a'} is neither a text nor {id, text}",
            ),
            (
                '{"parents": ["p"], "summary": "s", "label": "good"}',
                ":1:1: $.label: 'good' is not one of faithful, lossy",
            ),
        ],
    )
    def test_a_bad_line_is_located_and_nothing_is_written(
        self, tmp_path: Path, line: str, expected: str
    ) -> None:
        """A malformed pair: exit 2, one located line (file, line:column, JSON path, value)."""
        pairs = tmp_path / "pairs.jsonl"
        pairs.write_text(line + "\n", encoding="utf-8")
        out = tmp_path / "out.yaml"
        code, stdout, stderr = cli(
            "calibrate", "--fidelity", str(pairs), "--base", str(DEFAULT), "--out", str(out)
        )
        assert (code, stdout) == (2, "")
        assert stderr.strip().endswith(f"{pairs}{expected}")
        assert not out.exists()

    def test_options_of_the_trace_fit_are_refused_with_pairs(self, tmp_path: Path) -> None:
        """--power or --collapsed with --fidelity: a usage error naming them, nothing written."""
        out = tmp_path / "out.yaml"
        code, _, stderr = cli(
            "calibrate", "--fidelity", str(PAIRS), "--power", "--collapsed", "t.jsonl",
            "--base", str(DEFAULT), "--out", str(out),
        )  # fmt: skip
        assert code == 2
        assert "--collapsed, --power: fit traces, not --fidelity pairs" in stderr
        assert not out.exists()

    def test_healthy_and_fidelity_are_exclusive(self, tmp_path: Path) -> None:
        """Both, or neither, of --healthy and --fidelity: a usage error."""
        out = str(tmp_path / "out.yaml")
        code, _, stderr = cli("calibrate", "--base", str(DEFAULT), "--out", out)
        assert code == 2
        assert "give either --healthy TRACE... or --fidelity PAIRS" in stderr
