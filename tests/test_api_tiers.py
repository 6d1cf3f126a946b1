"""The promise in three tiers (docs/api.md): every documented module in exactly one tier, and the
core API's names pinned, so that growing the core is a decision made here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from test_exports import documented

API = Path(__file__).resolve().parent.parent / "docs" / "api.md"
TIER = re.compile(r"^(Core|Ring|Internal) modules: (.*?)\.$", re.MULTILINE)

#: The most names the core API may have; docs/api.md states the same bound.
CORE_LIMIT = 110

#: ``prunewarden.limits`` is core too, but its size limits are values pinned by docs/limits.md.
CORE_MODULES_WITH_NAMES = (
    "prunewarden",
    "prunewarden.aio",
    "prunewarden.reload",
    "prunewarden.engine",
    "prunewarden.session",
    "prunewarden.policy",
    "prunewarden.scoring",
    "prunewarden.errors",
    "prunewarden.decision",
)

#: Every name under SemVer. A name added to a core module's ``__all__`` must be added here too.
CORE_NAMES = frozenset({
    "Action", "AsyncEngine", "AsyncSession", "AuditError", "AuditLog", "BUILTIN",
    "BatchDecisionHook", "Binder", "BundleError", "Calibration", "ClassifySettings",
    "CollapseSettings", "CompactionSettings", "CusumSettings", "DeadlinePassedError",
    "DecidingCalls", "Decision",
    "DecisionHook", "Engine", "EngineCalls", "EvictionSettings", "ExitCode", "Fitted",
    "HALT_ACTIONS", "Halt", "InputError", "LOCK_FILENAME", "LockOption", "Mode", "Outcome",
    "PassResult", "Perturbation", "Plan", "Policy", "PolicyError", "PolicyIdentity",
    "PolicySource", "Problem", "ProblemsError", "PrunewardenError", "Reason", "RecencyScorer",
    "RefusedError", "RelevanceCollapseError", "ReloadResult", "ReloadStatus", "ReloadingEngine",
    "Resolution", "RulePins", "SESSION_KEY_ENV", "ScoreRange", "Scorer", "Scores", "Session",
    "SessionBinding", "SessionIntegrityError", "SessionRegistry", "SessionStateError",
    "SessionStore", "SessionStoreError", "ShadowResult", "Spec", "SqliteSessionStore",
    "StaleScoreError", "StalenessSettings", "SuiteError", "TransitionSettings",
    "UnsafeTransitionError", "UntrustedEvictionError", "Verdict", "__version__", "bind_scores",
    "classifier", "disabled_reason", "load_builtin_policy", "load_policy", "parse_policy",
    "resolve_file", "save_deadline", "text_sha256", "without_halt",
})  # fmt: skip


def tiers() -> dict[str, list[str]]:
    """The modules docs/api.md puts in each tier."""
    text = API.read_text(encoding="utf-8")
    return {tier: re.findall(r"`([\w.]+)`", names) for tier, names in TIER.findall(text)}


class TestTiers:
    def test_the_page_names_three_tiers(self) -> None:
        assert sorted(tiers()) == ["Core", "Internal", "Ring"]

    def test_every_documented_module_is_in_exactly_one_tier(self) -> None:
        """A new package or public module is placed in a tier when its section is written."""
        placed = [module for modules in tiers().values() for module in modules]
        assert sorted(placed) == sorted({*documented(), "prunewarden.limits"})
        assert len(placed) == len(set(placed))

    def test_the_core_tier_is_the_modules_whose_names_are_pinned(self) -> None:
        assert sorted(tiers()["Core"]) == sorted([*CORE_MODULES_WITH_NAMES, "prunewarden.limits"])


class TestCoreNames:
    def test_the_core_names_are_the_pinned_ones(self) -> None:
        """The union of the core modules' ``__all__`` is exactly the pinned list."""
        found: set[str] = set()
        for module in CORE_MODULES_WITH_NAMES:
            found |= set(importlib.import_module(module).__all__)
        assert sorted(found - CORE_NAMES) == []
        assert sorted(CORE_NAMES - found) == []

    def test_the_core_stays_small(self) -> None:
        assert len(CORE_NAMES) <= CORE_LIMIT
