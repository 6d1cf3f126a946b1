"""Every check over the policy files given, each against its base (``--against``, else the
policy it ``extends``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from prunewarden.analysis import _checks as checks
from prunewarden.analysis._compare import compare
from prunewarden.analysis._findings import SEVERITIES, Finding
from prunewarden.errors import ExitCode
from prunewarden.policy import Resolution, resolve_file
from prunewarden.policy._bases import BaseDirs


def check_policies(
    files: Sequence[str],
    against: str | None = None,
    base_dirs: BaseDirs = (),
    *,
    timeout: float = checks.DEFAULT_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
) -> list[Finding]:
    """The findings on each policy file (``builtin:NAME`` too), sorted by file and severity.
    Every check of one policy shares ``timeout`` seconds (on ``clock``); a check the budget
    does not reach is a ``not-reached`` finding naming it.

    Raises :class:`~prunewarden.errors.PolicyError` when a file does not load."""
    reference = resolve_file(against, base_dirs) if against is not None else None
    findings: list[Finding] = []
    for name in files:
        resolution = resolve_file(name, base_dirs)
        budget = checks.Budget(timeout, clock)
        findings += checks.check_production(resolution, name)
        findings += checks.check_thresholds(resolution, name)
        findings += checks.check_rules(resolution, name, budget)
        base, base_name = _base(resolution, reference, against, base_dirs)
        if base is not None:
            findings += checks.check_pinned(resolution, base, name)
            findings += compare(resolution, base, name, base_name, budget)
    order = {name: i for i, name in enumerate(files)}
    return sorted(findings, key=lambda f: (order[f.policy], SEVERITIES.index(f.severity)))


def _base(
    resolution: Resolution, reference: Resolution | None, against: str | None, dirs: BaseDirs
) -> tuple[Resolution | None, str]:
    if reference is not None and against is not None:
        return reference, against
    if len(resolution.layers) < 2:
        return None, ""
    parent = resolution.policy.sources[1].path
    return resolve_file(parent, dirs), parent


def exit_code(findings: Sequence[Finding]) -> int:
    """1 when any finding is an error; else 4 when a check was not reached within its
    policy's budget (the report is incomplete); else 0 (docs/policy-check.md)."""
    if any(f.severity == "error" for f in findings):
        return ExitCode.REFUSED
    if any(f.code == "not-reached" for f in findings):
        return ExitCode.FAILED
    return ExitCode.OK
