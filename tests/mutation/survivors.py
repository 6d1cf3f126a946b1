"""Mutants that once survived the suite, kept as a regression list: each, applied alone to a copy
of the source tree, must make the tests of its area fail (docs/dev/testing.md).

Run by ``make mutation`` (``pytest tests/mutation/survivors.py``), not by ``make test``: each
case runs its area's tests in a process of its own. ``test_runner.py`` checks in ``make test``
that every patch still applies to the source as it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mutation._areas import AREAS

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine"


@dataclass(frozen=True, slots=True)
class Regression:
    """A mutant as a patch: in ``module`` (under engine/), ``old`` (found exactly once)
    becomes ``new``; ``promise`` is the documented behaviour it breaks."""

    name: str
    module: str
    old: str
    new: str
    promise: str

    def apply(self, source: str) -> str:
        count = source.count(self.old)
        if count != 1:
            msg = f"{self.name}: the patch's text occurs {count} times in {self.module}"
            raise ValueError(msg)
        return source.replace(self.old, self.new)


REGRESSIONS = [
    Regression(
        "any-auth-scheme",
        "prunewarden/server/_credentials.py",
        'if scheme.lower() != "bearer" or not (server or tenant is not None):',
        "if not (server or tenant is not None):",
        "only Authorization: Bearer <token> is accepted (docs/server.md#access)",
    ),
    Regression(
        "metrics-without-token",
        "prunewarden/server/_app.py",
        "        try:\n            self.authorize(request)\n"
        "        except ServiceProblemError as exc:\n"
        "            return problem_response(exc.problem, {})\n"
        "        text = generate_latest(REGISTRY)",
        "        text = generate_latest(REGISTRY)",
        "/metrics needs the token like every route but the probes",
    ),
    Regression(
        "any-host-is-loopback",
        "prunewarden/server/_config.py",
        "return False  # a host name: it may resolve to anything",
        "return True",
        "only loopback addresses and localhost go without a token",
    ),
    Regression(
        "no-final-deadline-check",
        "prunewarden/rules/_evaluation.py",
        "    if deadline.expired():  # the last node, or an engine function, may have run past it\n"
        "        raise deadline.exceeded()\n",
        "",
        "a rule result computed past its deadline is refused",
    ),
    Regression(
        "budget-error-is-an-exception",
        "prunewarden/rules/_budget.py",
        "class BudgetExceededError(BaseException):",
        "class BudgetExceededError(Exception):",
        "no except Exception can swallow a spent budget",
    ),
    Regression(
        "text-hash-prefix",
        "prunewarden/guards/staleness.py",
        "if declared and declared != (digest or text_sha256(spans.texts[i])):",
        "if declared and declared[:8] != (digest or text_sha256(spans.texts[i]))[:8]:",
        "a score binds to the text's whole SHA-256",
    ),
    Regression(
        "lock-digest-prefix",
        "prunewarden/policy/_lock.py",
        "if locked is None or locked == digest:",
        "if locked is None or locked[:20] == digest[:20]:",
        "a lock file holds a version to its whole digest",
    ),
    Regression(
        "only-collapse-detected-halts",
        "prunewarden/session/_session.py",
        "            if decision.blocks:\n                code = decision.reasons[0].code\n",
        "            code = decision.reasons[0].code\n"
        '            if decision.blocks and code == "collapse_detected":\n',
        "every refusing collapse reason halts the session (no_canary, canary_missing, ...)",
    ),
    Regression(
        "delete-keeps-the-halt",
        "prunewarden/server/_holding.py",
        "        self.engine.engine.sessions.note(session_id, None)\n",
        "",
        "DELETE forgets the halt the engine remembers under the id",
    ),
    Regression(
        "ttl-only-by-sweep",
        "prunewarden/server/_holding.py",
        "                if used is not None and now - used > self.ttl:\n"
        "                    self._forget_locked(session_id)\n",
        "",
        "a session idle past the TTL starts afresh at its next call",
    ),
    Regression(
        "calibration-record-failure-allows",
        "prunewarden/pipeline/_compile.py",
        "            return Verdict(True, [reason])\n        verdict.reasons",
        "            return verdict\n        verdict.reasons",
        "a calibration record that cannot be built refuses",
    ),
    Regression(
        "tool-output-without-tombstone",
        "prunewarden/guards/eviction.py",
        "if s.require_tombstone and not seg.tombstone_written:",
        'if s.require_tombstone and not seg.tombstone_written and seg.kind != "tool_output":',
        "require_tombstone holds for every kind",
    ),
    Regression(
        "unscored-ranks-as-zero",
        "prunewarden/guards/staleness.py",
        "ranks = [(True, 0.0) if score is None",
        "ranks = [(False, -0.0) if score is None",
        "spans without a score rank last",
    ),
    Regression(
        "rotation-header-mid-file",
        "prunewarden/audit/_verify.py",
        "            if kind == _record.LOG_ROTATED:\n"
        '                self._fail(number, "a log_rotated header in the middle of a file")\n',
        "",
        "a log_rotated header is accepted only at the top of a file",
    ),
    Regression(
        "duplicate-cycles-restored",
        "prunewarden/session/_state.py",
        "if numbers[index] <= numbers[index - 1]:",
        "if numbers[index] < numbers[index - 1]:",
        "a restored state's cycle numbers increase",
    ),
    Regression(
        "connection-reused-after-fork",
        "prunewarden/session/_store.py",
        "        if self._connection is not None and self._pid == os.getpid():\n"
        "            return self._connection",
        "        if self._connection is not None:\n            return self._connection",
        "a connection inherited through fork is not used",
    ),
    Regression(
        "adapter-ignores-its-halt",
        "prunewarden/integrations/_pass.py",
        "        if collapse.blocks:\n"
        "            return self._frozen(session, budget, None, collapse.codes)\n",
        "",
        "the adapter's pass freezes on its own cycle's halt",
    ),
    Regression(
        "window-at-budget-pruned",
        "prunewarden/integrations/_pass.py",
        "if budget.tokens_after(()) <= self.budget_tokens:",
        "if budget.tokens_after(()) < self.budget_tokens:",
        "a window exactly at its budget is not pruned",
    ),
    Regression(
        "calibrate-rounds-up",
        "prunewarden/replay/_fit.py",
        "allowed = math.floor(rate * len(healthy) + 1e-9)",
        "allowed = math.ceil(rate * len(healthy) - 1e-9)",
        "a fraction of a trace is never an allowed false positive",
    ),
    Regression(
        "two-halts-to-count",
        "prunewarden/replay/_fit.py",
        'if summary.outcomes.get("collapse", {}).get("halt", 0):',
        'if summary.outcomes.get("collapse", {}).get("halt", 0) > 1:',
        "a trace halts when the guard halts once",
    ),
    # Not among the first twenty: found while writing their tests.
    Regression(
        "keyed-hash-compared-with-equals",
        "prunewarden/audit/_verify.py",
        "if not hmac.compare_digest(record_hash(body, self.key if keyed else None), claimed):",
        "if record_hash(body, self.key if keyed else None) != claimed:",
        "keyed record hashes are compared in constant time",
    ),
    Regression(
        "token-compared-with-equals",
        "prunewarden/server/_credentials.py",
        "hmac.compare_digest(given, self._server)",
        "given == self._server",
        "the token is compared in constant time",
    ),
    Regression(
        "transition-scores-uncalibrated",
        "prunewarden/pipeline/_calibration.py",
        "    if score is None and perturbed is None:\n        return segment\n",
        "    if score is not None and perturbed is None:\n        return segment\n",
        "a calibrated policy judges a transition's segment scores on its scale",
    ),
    Regression(
        "lock-unblamed-change-allowed",
        "prunewarden/policy/_guardrails.py",
        "            problems.append(merged.problem(target, message))\n",
        "            pass\n",
        "a change to a locked value is refused even when the overlay wrote another setting",
    ),
    # Hand-written mutants of the columnar passes, version 3 records and transitions that
    # survived their areas' tests when those were rewritten (issue #39's sample).
    Regression(
        "segment-twice-decided",
        "prunewarden/guards/eviction.py",
        "return PassColumns(ids, masks, dependencies) if len(set(ids)) == len(ids) else None",
        "return PassColumns(ids, masks, dependencies)",
        "a pass naming one segment twice is refused, not decided (nor evicted)",
    ),
    Regression(
        "nan-score-in-range",
        "prunewarden/inputs/_columns.py",
        "return low <= min(values) and max(values) <= high and not math.isnan(sum(values))",
        "return low <= min(values) and max(values) <= high",
        "a NaN score is refused wherever it stands in the list",
    ),
    Regression(
        "refused-pass-without-reason",
        "prunewarden/engine/_passes.py",
        "masks = [1] * len(refused)",
        "masks = [0] * len(refused)",
        "the record of a pass refused for its log gives each decision its reason",
    ),
    Regression(
        "pass-under-unactivated-policy",
        "prunewarden/audit/_verify.py",
        "elif kind in (_record.DECISION, _record.PRUNING_PASS):",
        "elif kind == _record.DECISION:",
        "a pass record under a policy no earlier record activates fails verification",
    ),
    Regression(
        "shadow-skips-staleness-columns",
        "prunewarden/engine/_engine.py",
        'self._staleness_columns = self._pipelines["staleness"].plain and self.shadow is None',
        'self._staleness_columns = self._pipelines["staleness"].plain',
        "a shadow policy decides every staleness document beside the active one",
    ),
    Regression(
        "tombstone-for-on-a-summary",
        "prunewarden/inputs/_validation.py",
        'segment["kind"] != TOMBSTONE_KIND or not before_ids.issuperset(named)',
        "not before_ids.issuperset(named)",
        "only a tombstone of after records removed ids (tombstone_for)",
    ),
    Regression(
        "rewrite-orphan-uncounted",
        "prunewarden/guards/transition.py",
        "made = set(edit.summaries) | set(edit.rewritten)",
        "made = set(edit.summaries)",
        "a rewrite deriving from a parent in neither window is an orphan",
    ),
    Regression(
        "explained-plan-over-columns",
        "prunewarden/planner/_selection.py",
        "self.columnar = None if inputs.explain else inputs.columnar",
        "self.columnar = inputs.columnar",
        "an explained plan's evictions carry would_allow (the columns give none)",
    ),
]


def copy_tree(into: Path) -> Path:
    """A copy of the package where the source checkout reads its data; the engine folder."""
    engine = into / "engine"
    shutil.copytree(
        ENGINE / "prunewarden",
        engine / "prunewarden",
        ignore=shutil.ignore_patterns("__pycache__", "_data"),
    )
    for name in ("schemas", "policies"):
        (into / name).symlink_to(ROOT / name, target_is_directory=True)
    return engine


def area_fails(regression: Regression, into: Path) -> int:
    """pytest's exit code for the first stage of the area's tests that fails on the patched
    copy (0: none failed, the mutant survived)."""
    engine = copy_tree(into)
    target = engine / regression.module
    target.write_text(regression.apply(target.read_text(encoding="utf-8")), encoding="utf-8")
    environment = {**os.environ, "PYTHONPATH": str(engine), "PYTHONDONTWRITEBYTECODE": "1"}
    environment["HYPOTHESIS_STORAGE_DIRECTORY"] = str(into / ".hypothesis")
    for stage in AREAS[regression.module]:
        command = [sys.executable, "-m", "pytest", *stage, "-x", "-q", "-p", "no:cacheprovider"]
        done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, check=False)
        if done.returncode != 0:
            return done.returncode
    return 0


def chosen(regressions: list[Regression], modules: str | None) -> list[Regression]:
    """The regressions of ``modules`` (names apart by white space; ``make mutation CHANGED=1``
    passes the modules a branch changed as ``MUTATION_MODULES``), all of them when None."""
    if modules is None:
        return regressions
    wanted = set(modules.split())
    return [regression for regression in regressions if regression.module in wanted]


class TestSurvivorsAreKilled:
    @pytest.mark.parametrize(
        "regression", chosen(REGRESSIONS, os.environ.get("MUTATION_MODULES")), ids=lambda r: r.name
    )
    def test_the_area_tests_fail(self, regression: Regression, tmp_path: Path) -> None:
        """The mutant makes a test of its area fail (exit code 1: a failure, not a crash)."""
        assert area_fails(regression, tmp_path) == 1
