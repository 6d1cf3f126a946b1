"""Choosing the CEL backend: per engine, by the command line, the server's configuration or the
environment; never silently; and every record of a policy with rules names it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prunewarden import AuditLog, Engine, load_policy, parse_policy
from prunewarden._resources import schema
from prunewarden.cli._main import run
from prunewarden.rules import BackendUnavailableError, RuleSet, check_backend
from prunewarden.rules import _backend as backend_module
from prunewarden.server import ServerConfig, parse_listen

pytest.importorskip("cel_expr_python")

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "examples" / "policies" / "content-pins.yaml"
PLAIN = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: plain, version: 1.0.0}\n"
RECORDS = Draft202012Validator(schema("audit-record"))
NEGATION = {
    "check": "eviction",
    "segment": {"id": "s1", "kind": "turn", "text": "never do that", "tombstone_written": True},
    "score": 0.1,
    "perturbed_score": 0.1,
    "eviction_candidates": ["s1"],
}


class _Records:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:  # noqa: ARG002 - structlog's signature
        self.records.append(fields)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def without_native(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if cel-expr-python were not installed."""
    backend_module.cel_module.cache_clear()
    monkeypatch.setattr(backend_module, "_MODULE", "cel_expr_python_missing.cel")
    yield
    backend_module.cel_module.cache_clear()


class TestChoosing:
    def test_the_default_is_cel_python(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without a choice and without PRUNEWARDEN_CEL, an engine runs cel-python."""
        monkeypatch.delenv("PRUNEWARDEN_CEL", raising=False)
        assert Engine(load_policy(PINS)).cel == "python"

    def test_the_environment_chooses_when_the_caller_does_not(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """PRUNEWARDEN_CEL=native makes engines native; an explicit cel= wins over it."""
        monkeypatch.setenv("PRUNEWARDEN_CEL", "native")
        assert Engine(load_policy(PINS)).cel == "native"
        assert Engine(load_policy(PINS), cel="python").cel == "python"

    def test_an_unknown_backend_is_refused(self) -> None:
        """A backend name that is neither python nor native is a ValueError naming both."""
        with pytest.raises(ValueError, match="python, native"):
            Engine(load_policy(PINS), cel="rust")

    @pytest.mark.usefixtures("without_native")
    def test_native_without_the_extra_is_an_error(self) -> None:
        """Asking for native without cel-expr-python fails, saying what to install."""
        with pytest.raises(BackendUnavailableError, match=r"prunewarden\[cel-native\]") as caught:
            Engine(parse_policy(PLAIN), cel="native")
        assert caught.value.missing == "cel-expr-python"
        with pytest.raises(BackendUnavailableError):
            RuleSet("eviction", (), {}, backend="native")

    @pytest.mark.usefixtures("without_native")
    def test_the_cli_refuses_native_without_the_extra(self, tmp_path: Path) -> None:
        """evaluate --cel native without the extra: usage error (exit 2), nothing decided."""
        document = tmp_path / "input.json"
        document.write_text(json.dumps(NEGATION), encoding="utf-8")
        code, out, err = _cli("evaluate", "--policy", str(PINS), "--cel", "native", str(document))
        assert (code, out) == (2, "")
        assert "--cel native" in err
        assert "cel-native" in err

    def test_the_server_configuration_carries_the_backend(self) -> None:
        """ServerConfig.cel is the backend of the server's engines."""
        config = ServerConfig(
            policy=str(PINS), audit_log="a.log", listen=parse_listen("127.0.0.1:0"), cel="native"
        )
        assert config.cel == "native"
        assert check_backend(config.cel) == "native"


class TestRecords:
    @pytest.mark.parametrize("backend", ["python", "native"])
    def test_a_decision_record_names_the_backend(self, backend: str) -> None:
        """A decision under a policy with rules records which backend evaluated them."""
        records = _Records()
        decision = Engine(load_policy(PINS), logger=records, cel=backend).evaluate(NEGATION)
        assert decision.codes[-1] == "rule:pin-negations"
        assert records.records[-1]["cel"] == backend

    def test_a_policy_without_rules_records_no_backend(self) -> None:
        """Nothing was evaluated by a backend, so the record says none."""
        records = _Records()
        Engine(parse_policy(PLAIN), logger=records, cel="native").evaluate(NEGATION)
        assert "cel" not in records.records[-1]

    def test_a_pass_record_names_the_backend(self) -> None:
        """A pass under a policy with rules names the backend too."""
        records = _Records()
        engine = Engine(load_policy(PINS), logger=records, cel="native")
        item = {key: NEGATION[key] for key in ("segment", "score", "perturbed_score")}
        engine.authorize_evictions([item], ["s1"])
        assert records.records[-1]["cel"] == "native"

    def test_show_policy_prints_the_backend(self, tmp_path: Path) -> None:
        """audit show-policy names the backend of a decision's rules; the record is valid."""
        path = tmp_path / "audit.log"
        with AuditLog(path) as audit:
            decision = Engine(load_policy(PINS), audit=audit, cel="native").evaluate(NEGATION)
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not list(RECORDS.iter_errors(json.loads(line)))
        code, out, _ = _cli("audit", "show-policy", decision.decision_id, str(path))
        assert code == 0
        assert "# rules evaluated by the native CEL backend" in out

    def test_the_cli_option_reaches_the_record(self, tmp_path: Path) -> None:
        """evaluate --cel native decides with the native backend, and its record says so."""
        document = tmp_path / "input.json"
        document.write_text(json.dumps(NEGATION), encoding="utf-8")
        path = tmp_path / "audit.log"
        argv = ["evaluate", "--policy", str(PINS), "--cel", "native", "--audit-log", str(path)]
        code, _, _ = _cli(*argv, str(document))
        assert code == 1
        decisions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert [r["cel"] for r in decisions if r.get("kind") == "decision"] == ["native"]
