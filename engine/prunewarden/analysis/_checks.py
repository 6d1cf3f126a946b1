"""The checks of one policy (and of its pinned kinds against a base): each takes resolved
policies and yields findings; and what the comparisons of :mod:`._compare` share with them.

Claims about every input ("never matches") are proved by z3 over the symbols of
:mod:`prunewarden.analysis._symbols`, within the ranges any request has.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import z3

from prunewarden.analysis._cel import Strings, Translator
from prunewarden.analysis._findings import Finding, Location
from prunewarden.analysis._symbols import Symbols
from prunewarden.policy import Policy, Resolution
from prunewarden.policy._provenance import pointer
from prunewarden.rules._symbolic import NotTranslated, Term, symbolic_term

# Milliseconds z3 may take per query; an unknown answer is reported as not analysed.
QUERY_TIMEOUT_MS = 5000
# Seconds every check of one policy may take together (``policy check --timeout``).
DEFAULT_TIMEOUT_S = 60.0


class OutOfTime(Exception):  # noqa: N818 - reads as the outcome it reports
    """The total budget of a policy's checks ran out before this query."""


class Budget:
    """The time every check of one policy may take together, beside each query's own limit:
    a query gets what is left of it (at most :data:`QUERY_TIMEOUT_MS`), and none starts once
    it is spent. ``clock`` is monotonic seconds."""

    def __init__(
        self, seconds: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        self.started = clock()

    def left_ms(self) -> int:
        """What a query may take now; raises :class:`OutOfTime` when nothing is left."""
        left = self.seconds - (self.clock() - self.started)
        if left <= 0:
            raise OutOfTime
        return max(1, min(QUERY_TIMEOUT_MS, int(left * 1000)))

    def spent(self) -> bool:
        return self.clock() - self.started >= self.seconds


def not_reached(what: str, budget: Budget, name: str, where: tuple[Location, ...]) -> Finding:
    """The finding that says a check was not reached within the budget."""
    message = f"{what} was not reached: the total budget of {budget.seconds:g} s ran out"
    return Finding("not-reached", message, name, where)


# Thresholds and the range their source document supports (on a [0, 1] score scale):
# (section, field, low, high, what the source says).
SEED_RANGES: tuple[tuple[str, str, float | None, float | None, str], ...] = (
    (
        "collapse",
        "spread_floor",
        0.04,
        0.16,
        (
            "source 000 found a floor of ~0.08 for buffers of 40-200 entries (half to double: "
            "0.04-0.16)"
        ),
    ),
    (
        "collapse",
        "consecutive_cycles",
        2,
        None,
        (
            "source 000: one rewrite cycle cannot tell collapse from ordinary reweighting; it "
            "asks for 2 consecutive cycles"
        ),
    ),
    (
        "collapse",
        "canary_margin",
        0.125,
        0.5,
        "source 000 uses a canary margin of 0.25 (half to double: 0.125-0.5)",
    ),
    (
        "eviction",
        "stability_delta",
        0.05,
        0.25,
        (
            "source 001 observed that a score moving more than 0.25 under perturbation is "
            "context-dependent (0.05-0.25 keeps a stable score evictable)"
        ),
    ),
    (
        "staleness",
        "drift_tolerance",
        0.025,
        0.1,
        (
            "source 002: healthy compression keeps mean relevance within 5% (half to double: "
            "0.025-0.1)"
        ),
    ),
    (
        "staleness",
        "max_rewrites_without_recompute",
        None,
        2,
        "source 002: a span rewritten more than twice without a recompute is poisoned",
    ),
    (
        "staleness",
        "recompute_hops",
        1,
        None,
        "source 002: recompute modified spans and every span within one hop of them",
    ),
)


def locate(resolution: Resolution, *path: Any) -> Location:
    """Where the field at ``path`` of the resolved document was set."""
    origin = resolution.origin(tuple(path))
    file = resolution.policy.sources[0].path if resolution.policy.sources else ""
    if origin is None:
        return Location(pointer(tuple(path)), file)
    return Location(pointer(tuple(path)), origin.file, origin.line, origin.column)


def strings_of(*policies: Policy) -> Strings:
    """Every string the policies name (kinds, params, string literals of rules) and one they do
    not: any other string compares like that one, so these tell every string apart."""
    names: set[str] = set()
    for policy in policies:
        names.update(policy.spec.eviction.pinned_kinds, policy.spec.transition.pinned_kinds)
        _collect(policy.document["spec"].get("params", {}), names)
        for rule in policy.rules:
            try:
                names.update(_literals(symbolic_term(rule.when.tree)))
            except NotTranslated:
                continue  # not analysed: its strings are never compared
    other = "other"
    while other in names:
        other += "-kind"
    return Strings((*sorted(names), other))


def _collect(value: Any, names: set[str]) -> None:
    """The strings in a params value."""
    if isinstance(value, str):
        names.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, names)
    elif isinstance(value, list):
        for item in value:
            _collect(item, names)


def _literals(term: Term) -> Iterator[str]:
    """The string literals of a rule's term (the shapes of rules._symbolic)."""
    tag = term[0]
    if tag == "lit" and isinstance(term[1], str):
        yield term[1]
    elif tag == "size":
        yield from _literals(term[1])
    elif tag in {"list", "op"}:
        for child in term[-1]:
            yield from _literals(child)


def solve(
    *formulas: Any,
    budget: Budget,
    prefer: tuple[Any, ...] = (),
    smallest: tuple[Any, ...] = (),
) -> tuple[str, Any]:
    """``("sat", model)``, ``("unsat", None)`` or ``("unknown", reason)``; raises
    :class:`OutOfTime` when the ``budget`` is spent before the query or while it ran.

    A model meets as many of ``prefer`` as it can, then has the smallest ``smallest`` values,
    in order: what makes a witness read plainly, and the same whichever way z3 searched."""
    solver: Any = z3.Optimize() if prefer or smallest else z3.Solver()
    solver.set("timeout", budget.left_ms())
    solver.add(*formulas)
    for preference in prefer:
        solver.add_soft(preference)
    for value in smallest:
        solver.minimize(value)
    answer = solver.check()
    if answer == z3.sat:
        return "sat", solver.model()
    if answer == z3.unsat:
        return "unsat", None
    if budget.spent():
        raise OutOfTime
    return "unknown", solver.reason_unknown()


def judged_scale(policy: Policy) -> tuple[float, float]:
    """The scores rules and guards see: the calibrated [0, 1] or the policy's range."""
    if policy.spec.calibration is not None:
        return (0.0, 1.0)
    return (policy.spec.scores.min, policy.spec.scores.max)


def raw_scale(*policies: Policy) -> tuple[float, float]:
    """Raw scores every one of the policies accepts."""
    return (
        max(policy.spec.scores.min for policy in policies),
        min(policy.spec.scores.max for policy in policies),
    )


# --- rules ----------------------------------------------------------------------------------


def check_rules(resolution: Resolution, name: str, budget: Budget) -> Iterator[Finding]:
    """Rules that never or always match, over every request the input schema allows; and
    rules outside the translated subset; a rule the ``budget`` does not reach is said so."""
    policy = resolution.policy
    strings = strings_of(policy)
    params = policy.document["spec"].get("params", {})
    for index, rule in enumerate(policy.rules):
        where = (locate(resolution, "spec", "rules", index, "when"),)
        symbols = Symbols(rule.check, judged_scale(policy), strings, f"{rule.name}:")
        try:
            matched = Translator(symbols, params, strings).matched(symbolic_term(rule.when.tree))
        except NotTranslated as exc:
            message = f"rule {rule.name!r} is not analysed: it uses {exc}"
            yield Finding("not-analysed", message, name, where)
            continue
        domain = symbols.constraints
        try:
            can_match, _ = solve(*domain, matched, budget=budget)
            can_miss, _ = solve(*domain, z3.Not(matched), budget=budget)
        except OutOfTime:
            what = f"whether rule {rule.name!r} never or always matches"
            yield not_reached(what, budget, name, where)
            continue
        if "unknown" in {can_match, can_miss}:
            message = f"rule {rule.name!r} is not analysed: the solver gave up"
            yield Finding("not-analysed", message, name, where)
        elif can_match == "unsat":
            message = (
                f"rule {rule.name!r} ({rule.check}) never matches: `{rule.when.source}` is "
                "false for every input the schema and the score scale allow"
            )
            yield Finding("rule-never-matches", message, name, where)
        elif can_miss == "unsat":
            # A per-item rule runs once per canary or span: it matches wherever there is one.
            every = (
                f"every {rule.check} request with a {rule.per_item}"
                if rule.per_item
                else f"every {rule.check} request"
            )
            message = (
                f"rule {rule.name!r} ({rule.check}) always matches: `{rule.when.source}` holds "
                f"(or errors, which counts as matched) for every input; its effect "
                f"{rule.effect!r} applies to {every}"
            )
            yield Finding("rule-always-matches", message, name, where)


# --- settings -------------------------------------------------------------------------------


def check_production(resolution: Resolution, name: str) -> Iterator[Finding]:
    """Guards and rules not enforcing in a policy labelled ``environment: production``."""
    policy = resolution.policy
    labels = policy.document["metadata"].get("labels", {})
    if labels.get("environment") != "production":
        return
    label = locate(resolution, "metadata", "labels", "environment")
    for check in ("collapse", "eviction", "staleness", "transition"):
        mode = getattr(policy.spec, check).mode
        if mode != "enforce":
            message = (
                f"the {check} guard is in {mode} mode in a policy labelled environment: "
                "production; it refuses nothing"
            )
            yield Finding(
                "production-not-enforced",
                message,
                name,
                (locate(resolution, "spec", check, "mode"), label),
            )
    for index, rule in enumerate(policy.rules):
        if rule.mode != "enforce":
            message = (
                f"rule {rule.name!r} is in {rule.mode} mode in a policy labelled environment: "
                "production; it refuses nothing"
            )
            where = (locate(resolution, "spec", "rules", index, "mode"), label)
            yield Finding("production-not-enforced", message, name, where)


def check_thresholds(resolution: Resolution, name: str) -> Iterator[Finding]:
    """Thresholds outside the range their source document supports (scaled to the policy's
    score range for score distances)."""
    spec = resolution.policy.spec
    low_score, high_score = judged_scale(resolution.policy)
    width = high_score - low_score
    for section, field, low, high, why in SEED_RANGES:
        settings = getattr(spec, section)
        if field == "spread_floor" and settings.spread_floor_mode != "absolute":
            continue  # a relative floor or the cusum test is a ratio, not a score distance
        value = getattr(settings, field)
        scaled = isinstance(low or high, float)
        lower = None if low is None else low * (width if scaled else 1)
        upper = None if high is None else high * (width if scaled else 1)
        if (lower is not None and value < lower) or (upper is not None and value > upper):
            band = f"[{lower if lower is not None else '-'}, {upper if upper is not None else '-'}]"
            message = f"{section}.{field} is {value}, outside {band}: {why}"
            where = (locate(resolution, "spec", section, field),)
            yield Finding("threshold-outside-seed-range", message, name, where)


def check_pinned(resolution: Resolution, base: Resolution, name: str) -> Iterator[Finding]:
    """Kinds the base pins that the policy no longer pins (eviction, and transition where
    either policy sets its own: otherwise it follows the eviction section)."""
    own = any(
        "pinned_kinds" in r.policy.document["spec"].get("transition", {})
        for r in (resolution, base)
    )
    for section in ("eviction", "transition") if own else ("eviction",):
        mine = getattr(resolution.policy.spec, section).pinned_kinds
        theirs = getattr(base.policy.spec, section).pinned_kinds
        dropped = sorted(theirs - mine)
        if dropped:
            message = (
                f"{section}.pinned_kinds drops {', '.join(map(repr, dropped))}, pinned by "
                f"{base.policy.name}@{base.policy.version}: such segments become evictable"
            )
            where = (
                locate(resolution, "spec", section, "pinned_kinds"),
                locate(base, "spec", section, "pinned_kinds"),
            )
            yield Finding("pinned-kind-dropped", message, name, where)
