"""The transition corpus (tests/cases/transition/): real trim_messages and SDK edits stay real,
every reason code is covered, and a repair makes every restore-fixable refusal allowed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.sdk_corpus import CONTEXT_EDITS, SESSION_EDITS, document
from _support.trim_corpus import CASES, TRIMS, trimmed_document
from prunewarden import Engine, Policy

CASE_FILES = sorted(CASES.glob("*.yaml"))
# What a restore of the listed ids fixes (docs/transitions.md).
RESTORABLE = {"pinned_removed", "group_split", "no_tombstone", "pruning_halted", "unscored_removal"}
# What a repair fixes too: a lost parent restored, a lossy rewrite kept verbatim (fidelity.md).
REPAIRABLE_FIDELITY = {"fact_lost", "negation_lost", "summary_is_error"}
CODES = {
    "transition_clean",
    "pinned_removed",
    "group_split",
    "no_tombstone",
    "orphaned_parent",
    "hash_mismatch",
    "unbound_score",
    "invalidation_gap",
    "unscored_removal",
    "check_disabled",
    *REPAIRABLE_FIDELITY,
}


def _case(path: Path) -> dict[str, Any]:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(case, dict)
    return case


def _engine(case: dict[str, Any], make_policy: Callable[..., Policy]) -> Engine:
    return Engine(make_policy(**case["policy"])) if "policy" in case else Engine.default()


class TestCorpus:
    def test_the_corpus_covers_every_code_in_forty_cases(self) -> None:
        """At least 40 cases, every reason code of the guard among their expectations."""
        seen = {code for path in CASE_FILES for code in _case(path)["expect"]["reasons"]}
        assert len(CASE_FILES) >= 40
        assert seen == CODES
        assert len(REPAIRABLE) >= 15

    @pytest.mark.parametrize("name", sorted(TRIMS))
    def test_a_trim_case_holds_what_trim_messages_produces(self, name: str) -> None:
        """The recorded window after the edit is trim_messages' own output, run again."""
        assert _case(CASES / f"{name}.yaml")["input"] == trimmed_document(TRIMS[name])

    @pytest.mark.parametrize("name", sorted([*CONTEXT_EDITS, *SESSION_EDITS]))
    def test_an_sdk_case_holds_what_the_sdk_produces(self, name: str) -> None:
        """The recorded windows of a server-side context edit (rebuilt from the SDK's request
        and response types) or of a GuardedSession edit are produced again."""
        assert _case(CASES / f"{name}.yaml")["input"] == document(name)

    def test_the_sdk_edits_have_their_share_of_cases(self) -> None:
        """At least four Anthropic context edits and three Agents SDK edits, both refused and
        allowed."""
        for names, least in ((CONTEXT_EDITS, 4), (SESSION_EDITS, 3)):
            outcomes = {_case(CASES / f"{name}.yaml")["expect"]["outcome"] for name in names}
            assert len(names) >= least
            assert outcomes == {"allow", "deny"}


def _restore_fixable(path: Path) -> bool:
    expect = _case(path)["expect"]
    return (
        expect["outcome"] != "allow" and set(expect["reasons"]) <= RESTORABLE | REPAIRABLE_FIDELITY
    )


REPAIRABLE = [path for path in CASE_FILES if _restore_fixable(path)]


@pytest.mark.parametrize("path", REPAIRABLE, ids=lambda path: path.stem)
def test_repair_gives_a_window_the_policy_allows(
    path: Path, make_policy: Callable[..., Policy]
) -> None:
    """A case refused only for reasons a restore (or keep_verbatim) fixes is allowed once
    repaired."""
    case = _case(path)
    engine = _engine(case, make_policy)
    document = case["input"]
    decision = engine.evaluate(document)
    assert decision.refused
    repaired = decision.repair(document["before"], document["after"])
    again = engine.evaluate({**document, "after": repaired})
    assert (again.outcome, again.codes) == ("allow", ("transition_clean",))
