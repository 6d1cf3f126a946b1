"""``policy check --against`` compares scores as the engine does, on doubles: no equivalence is
claimed where a score off the 1/1024 grid (0.2, the constant itself) is decided differently, and
every witness found off the grid is replayed like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import Engine, parse_policy
from prunewarden.analysis import check_policies

HEADER = {"apiVersion": "prunewarden/v1", "kind": "Policy"}


def write(folder: Path, name: str, spec: dict[str, Any]) -> str:
    path = folder / f"{name}.yaml"
    document = {**HEADER, "metadata": {"name": name, "version": "1.0.0"}, "spec": spec}
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return str(path)


def deny(when: str) -> dict[str, Any]:
    return {
        "rules": [
            {"name": "low", "check": "eviction", "when": when, "effect": "deny", "message": "low"}
        ]
    }


def codes(policy: str, base: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for finding in check_policies([policy], base):
        found.setdefault(finding.code, []).append(finding)
    return found


class TestOffTheGrid:
    def test_a_strict_and_a_loose_bound_are_not_equivalent(self, tmp_path: Path) -> None:
        """``score < 0.2`` and ``score <= 0.2``: a turn scored exactly 0.2 (no multiple of
        1/1024) is allowed by one and denied by the other; the witness shows it."""
        strict = write(tmp_path, "strict", deny('score < 0.2 && segment.kind == "turn"'))
        loose = write(tmp_path, "loose", deny('score <= 0.2 && segment.kind == "turn"'))
        found = codes(loose, strict)
        assert "policies-equivalent" not in found
        (restrictive,) = found["overlay-more-restrictive"]
        witness = restrictive.witness
        assert witness["score"] == 0.2
        assert witness["segment"]["kind"] == "turn"
        for path, blocks in ((loose, True), (strict, False)):
            engine = Engine(parse_policy(Path(path).read_text(encoding="utf-8")))
            assert engine.evaluate(witness).blocks is blocks

    def test_the_other_way_is_more_permissive(self, tmp_path: Path) -> None:
        strict = write(tmp_path, "strict", deny("score < 0.2"))
        loose = write(tmp_path, "loose", deny("score <= 0.2"))
        found = codes(strict, loose)
        assert "policies-equivalent" not in found
        (permissive,) = found["overlay-more-permissive"]
        assert permissive.witness["score"] == 0.2

    @pytest.mark.parametrize(
        ("mine", "theirs"),
        [
            ("score < 0.2", "0.2 > score"),
            ("score <= 0.2", "!(score > 0.2)"),
            ("score < 0.30000000000000004", "score < 0.30000000000000004"),
        ],
    )
    def test_the_same_condition_written_twice_is_equivalent(
        self, tmp_path: Path, mine: str, theirs: str
    ) -> None:
        """The exact comparison still proves what holds on every double."""
        found = codes(write(tmp_path, "a", deny(mine)), write(tmp_path, "b", deny(theirs)))
        assert "policies-equivalent" in found, found

    def test_a_stability_delta_off_the_grid_is_told_apart(self, tmp_path: Path) -> None:
        """Deltas 0.2 and 0.2000001 differ only for moves between them: no grid point holds
        one, a double does, and it is found and replayed."""
        mine = write(tmp_path, "a", {"eviction": {"stability_delta": 0.2000001}})
        theirs = write(tmp_path, "b", {"eviction": {"stability_delta": 0.2}})
        found = codes(mine, theirs)
        assert "policies-equivalent" not in found
        assert "overlay-more-permissive" in found or "not-analysed" in found

    def test_arithmetic_on_scores_is_not_claimed_equivalent(self, tmp_path: Path) -> None:
        """A rule that computes with scores rounds as doubles do; where two policies' rules
        differ in such a rule, the comparison says it is not analysed rather than equivalent."""
        mine = write(tmp_path, "a", deny("score + 0.1 < 0.3"))
        theirs = write(tmp_path, "b", deny("score < 0.2"))
        found = codes(mine, theirs)
        assert "policies-equivalent" not in found
