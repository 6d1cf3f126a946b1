"""``audit verify`` (and the Node verifier) refuse a version 3 pass record whose columns
contradict themselves, naming its line and pass: each forgery below is re-sealed, so that the
chain itself verifies and only the record's meaning can give it away."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from prunewarden import AuditLog, Engine
from prunewarden.audit import seal
from prunewarden.audit._chain import GENESIS
from prunewarden.audit._columns_check import EVICTION_ACTIONS, EVICTION_CODES, columns_problem
from prunewarden.cli._main import run
from prunewarden.guards.eviction import CODE_ACTIONS, CODES

ROOT = Path(__file__).resolve().parents[2]
VERIFIER = ROOT / "examples" / "verify" / "jcs_verify.mjs"
EVICTIONS, PLAN = 1, 2  # the lines (from 0) of the two version 3 passes
Forgery = Callable[[dict[str, Any]], None]


def _item(segment_id: str, perturbed: float | None = 0.11, **fields: Any) -> dict[str, Any]:
    segment = {"id": segment_id, "kind": "turn", "text": "t", "tombstone_written": True, **fields}
    return {"segment": segment, "score": 0.1, "perturbed_score": perturbed}


def _window(segment_id: str, score: float) -> dict[str, Any]:
    text = f"text of {segment_id}"
    return {
        "id": segment_id,
        "kind": "turn",
        "text": text,
        "tokens": 50,
        "score": score,
        "perturbed_score": score,
        "text_sha256": sha256(text.encode()).hexdigest(),
    }


@pytest.fixture
def written(tmp_path: Path) -> list[dict[str, Any]]:
    """An eviction pass over columns (a allowed, b refused: no perturbed score, c unscoreable:
    scored against b) and a plan over columns (w0 evicted), as the engine writes them."""
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        engine = Engine.default(audit=audit)
        engine.authorize_evictions(
            [_item("a"), _item("b", None), _item("c", score_dependencies=["b"])]
        )
        windows = [_window("w0", 0.1), _window("w1", 0.2), _window("w2", 0.9)]
        engine.plan({"segments": windows, "free_tokens": 50})
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(r["kind"], r["record_version"]) for r in records[1:]] == [("pass", 3), ("pass", 3)]
    assert (records[EVICTIONS]["allowed"], records[PLAN]["plan"]["evict"]) == ("100", ["w0"])
    return records


def _resealed(records: list[dict[str, Any]], path: Path) -> Path:
    """The records written as a chain again, each sealed after the one before."""
    previous, lines = GENESIS, []
    for record in records:
        body = {k: v for k, v in record.items() if k not in ("hash", "prev_hash")}
        line, previous = seal(body, previous, None)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return path


def _swap_codes(record: dict[str, Any]) -> None:
    for field in ("codes", "code_actions"):
        record[field][1], record[field][5] = record[field][5], record[field][1]


FORGERIES: dict[str, tuple[int, Forgery, str]] = {
    "allowed-yet-refusing": (
        EVICTIONS,
        lambda r: r.update(allowed="110"),
        "segment 1 ('b') is allowed yet its reasons are ['perturbation_missing']",
    ),
    "refused-yet-authorized": (
        EVICTIONS,
        lambda r: r.update(allowed="000"),
        "segment 0 ('a') is refused (deny) yet its reasons are ['authorized']",
    ),
    "allowed-with-more-reasons": (
        EVICTIONS,
        lambda r: r["reasons"].__setitem__(0, 1 | 32),
        "is allowed yet its reasons are ['authorized', 'no_tombstone']",
    ),
    "bits-past-the-table": (
        EVICTIONS,
        lambda r: r["reasons"].__setitem__(1, 8 | 64),
        "segment 1 ('b'): mask 72 has bits past the code table of 6 codes",
    ),
    "no-reason": (EVICTIONS, lambda r: r["reasons"].__setitem__(1, 0), "has no reason"),
    "codes-out-of-order": (EVICTIONS, _swap_codes, "codes out of table order"),
    "actions-changed": (
        EVICTIONS,
        lambda r: r["code_actions"].__setitem__(3, None),
        "are not the actions of the code table",
    ),
    "a-segment-too-many": (
        EVICTIONS,
        lambda r: r["segments"].append("d"),
        "4 segments, 3 reason masks and 3 outcomes: the columns disagree",
    ),
    "an-outcome-too-few": (EVICTIONS, lambda r: r.update(allowed="10"), "the columns disagree"),
    "decided-twice": (
        EVICTIONS,
        lambda r: r["segments"].__setitem__(2, "a"),
        "segment 'a' is decided twice",
    ),
    "dependencies-missing": (
        EVICTIONS,
        lambda r: r.update(dependencies={}),
        "segment 2 ('c') has no dependencies although its reasons ask",
    ),
    "dependencies-of-a-scoreable-one": (
        EVICTIONS,
        lambda r: r["dependencies"].update({"0": ["b"]}),
        "segment 0 ('a') has dependencies although its reasons do not ask",
    ),
    "dependencies-past-the-segments": (
        EVICTIONS,
        lambda r: r["dependencies"].update({"7": ["b"]}),
        "dependencies name segment '7', not one of the 3 segments",
    ),
    "verdicts-of-no-plan": (
        EVICTIONS,
        lambda r: r.update(verdicts=[], verdict_indices=[]),
        "verdicts and verdict_indices belong to a plan",
    ),
    "places-and-verdicts-disagree": (
        PLAN,
        lambda r: r["verdict_indices"].append(1),
        "1 verdicts and 2 verdict_indices: they disagree",
    ),
    "a-place-past-the-pass": (
        PLAN,
        lambda r: r.update(allowed="0", reasons=[8], verdict_indices=[5]),
        "are not distinct places",
    ),
    "evicts-what-it-refused": (
        PLAN,
        lambda r: r.update(allowed="0", reasons=[8]),
        "the plan evicts 'w0', which the pass did not allow",
    ),
}


def _forged(written: list[dict[str, Any]], name: str, tmp_path: Path) -> tuple[Path, int, str]:
    line, forge, _ = FORGERIES[name]
    forge(written[line])
    return _resealed(written, tmp_path / "forged.jsonl"), line + 1, written[line]["pass_id"]


class TestVerify:
    def test_the_engines_passes_verify(self, written: list[dict[str, Any]], tmp_path: Path) -> None:
        """What the engine wrote (and re-sealed as it was) says one thing: it verifies."""
        assert [columns_problem(r) for r in written[1:]] == [None, None]
        out, err = io.StringIO(), io.StringIO()
        path = _resealed(written, tmp_path / "again.jsonl")
        assert run(["audit", "verify", str(path)], out, err) == 0, out.getvalue()

    @pytest.mark.parametrize("name", sorted(FORGERIES))
    def test_a_pass_that_contradicts_itself_is_refused(
        self, written: list[dict[str, Any]], tmp_path: Path, name: str
    ) -> None:
        """audit verify fails (exit 5) at the forged record's line, naming its pass and what
        contradicts what."""
        path, line, pass_id = _forged(written, name, tmp_path)
        out, err = io.StringIO(), io.StringIO()
        assert run(["audit", "verify", str(path)], out, err) == 5
        message = f"{path}:{line}: pass {pass_id!r} contradicts itself: "
        assert message in out.getvalue() + err.getvalue()
        assert FORGERIES[name][2] in out.getvalue() + err.getvalue()

    def test_the_tables_are_the_guards(self) -> None:
        """The verifier's code table is the eviction guard's, in its order, with its actions."""
        assert (EVICTION_CODES, EVICTION_ACTIONS) == (CODES, CODE_ACTIONS)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
class TestNodeVerifier:
    def _chain(self, path: Path) -> subprocess.CompletedProcess[str]:
        node = shutil.which("node")
        assert node is not None
        command = [node, str(VERIFIER), "chain", str(path)]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    @pytest.mark.parametrize("name", sorted(FORGERIES))
    def test_node_refuses_the_same_records(
        self, written: list[dict[str, Any]], tmp_path: Path, name: str
    ) -> None:
        """The Node verifier fails on the same record, at the same line, naming the pass."""
        path, line, pass_id = _forged(written, name, tmp_path)
        done = self._chain(path)
        assert done.returncode == 1, done.stdout
        expected = f"FAIL line {line}: pass {json.dumps(pass_id)} contradicts itself: "
        assert done.stdout.startswith(expected), done.stdout

    def test_node_verifies_the_engines_passes(
        self, written: list[dict[str, Any]], tmp_path: Path
    ) -> None:
        done = self._chain(_resealed(written, tmp_path / "again.jsonl"))
        assert (done.returncode, done.stdout) == (0, "ok 3 records\n")
