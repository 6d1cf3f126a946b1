"""The safety-critical modules and the tests of their area.

Each module is mutated against the tests that own its behaviour, fastest and most targeted first
(a run stops at the first failure). The sets are chosen so that the whole run finishes on a
2-core machine within an hour: in-process tests, not the ones that start servers or processes.
"""

from __future__ import annotations

GUARDS = (
    "tests/mutation/test_promises.py",
    "tests/guards",
    "tests/test_cases.py",
)
PIPELINE = ("tests/mutation/test_promises.py", "tests/pipeline", "tests/test_faults.py")
RULES = (
    "tests/mutation/test_promises.py",
    "tests/rules/test_budget.py",
    "tests/rules/test_rules.py",
)
POLICY = (
    "tests/mutation/test_promises.py",
    "tests/policy/test_lock.py",
    "tests/policy/test_overlays.py",
    "tests/policy/test_policy.py",
)
AUDIT = (
    "tests/mutation/test_promises.py",
    "tests/audit/test_auditlog_chain.py",
    "tests/audit/test_auditlog.py",
)
SESSION = (
    "tests/mutation/test_sessions.py",
    "tests/test_session.py",
    "tests/session",
)
SERVER = ("tests/server/test_access_rules.py",)
ADAPTERS = ("tests/integrations/test_pass.py", "tests/mutation/test_sessions.py")
CALIBRATE = ("tests/mutation/test_promises.py", "tests/replay/test_fit.py")

# Module (under engine/) -> the tests of its area.
AREAS: dict[str, tuple[str, ...]] = {
    "prunewarden/guards/collapse.py": GUARDS,
    "prunewarden/guards/eviction.py": GUARDS,
    "prunewarden/guards/staleness.py": GUARDS,
    "prunewarden/pipeline/_compile.py": PIPELINE,
    "prunewarden/pipeline/_calibration.py": PIPELINE,
    "prunewarden/rules/_budget.py": RULES,
    "prunewarden/rules/_evaluation.py": RULES,
    "prunewarden/policy/_lock.py": POLICY,
    "prunewarden/policy/_guardrails.py": POLICY,
    "prunewarden/audit/_chain.py": AUDIT,
    "prunewarden/audit/_verify.py": AUDIT,
    "prunewarden/session/_model.py": SESSION,
    "prunewarden/session/_state.py": SESSION,
    "prunewarden/session/_registry.py": SESSION,
    "prunewarden/session/_store.py": SESSION,
    "prunewarden/server/_app.py": SERVER,
    "prunewarden/server/_config.py": SERVER,
    "prunewarden/server/_sessions.py": SERVER,
    "prunewarden/integrations/_pass.py": ADAPTERS,
    "prunewarden/replay/_fit.py": CALIBRATE,
}
