"""Two policies compared: the eviction check exactly, the collapse check over an abstract history.

Claims that two policies decide alike are proved by z3; a claim that they differ comes with an
input that shows it, replayed through the engine before it is reported: a witness the engine does
not reproduce is reported as not analysed, never as a finding.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import z3

from prunewarden.analysis import _collapse as collapse
from prunewarden.analysis._checks import (
    Budget,
    OutOfTime,
    locate,
    not_reached,
    raw_scale,
    solve,
    strings_of,
)
from prunewarden.analysis._eviction import EvictionInputs, model_eviction
from prunewarden.analysis._findings import Finding, Location
from prunewarden.engine import Engine
from prunewarden.policy import Policy, Resolution


def compare(
    resolution: Resolution, base: Resolution, name: str, base_name: str, budget: Budget
) -> Iterator[Finding]:
    """The eviction check of ``resolution`` against ``base``: more permissive (a witness its
    base refuses and it allows), more restrictive, or equivalent; and the other checks'
    settings that differ, which the analysis does not model. A comparison the ``budget`` does
    not reach (or runs out in) is said so."""
    yield from _compare_eviction(resolution, base, name, base_name, budget)
    modelled = yield from compare_collapse(resolution, base, name, base_name, budget)
    yield from _unmodelled(resolution, base, name, base_name, skip=modelled)


def _compare_eviction(
    resolution: Resolution, base: Resolution, name: str, base_name: str, budget: Budget
) -> Iterator[Finding]:
    policy, reference = resolution.policy, base.policy
    strings, scale = strings_of(policy, reference), raw_scale(policy, reference)
    # The 1/1024 grid first (plain witnesses), then every real score (exact constants).
    searches = [EvictionInputs(strings, scale), EvictionInputs(strings, scale, grid=False)]
    models = [
        (inputs, model_eviction(policy, inputs, "a:"), model_eviction(reference, inputs, "b:"))
        for inputs in searches
    ]
    where = tuple(_changed(resolution, base))
    files = {name: policy, base_name: reference}
    answers = []
    for code, claim, expected in (
        (
            "overlay-more-permissive",
            f"allows an eviction that {base_name} refuses",
            {name: False, base_name: True},
        ),
        (
            "overlay-more-restrictive",
            f"refuses an eviction that {base_name} allows",
            {name: True, base_name: False},
        ),
    ):
        permissive = code.endswith("permissive")
        try:
            answer, witness = _eviction_witness(models, budget, permissive=permissive)
        except OutOfTime:
            yield not_reached(f"whether {name} {claim}", budget, name, where)
            answers.append("not-reached")
            continue
        answers.append(answer)
        if witness is not None:
            yield _witnessed(
                code,
                claim=claim,
                name=name,
                where=where,
                witness=witness,
                files=files,
                expected=expected,
            )
    _, mine, theirs = models[-1]  # the exact search: its rules not analysed include rounding
    unanalysed = sorted({*mine.unanalysed, *theirs.unanalysed})
    if answers == ["unsat", "unsat"]:
        if unanalysed and _differ(mine.unknowns, theirs.unknowns):
            message = (
                f"equivalence with {base_name} is not established: rule(s) "
                f"{', '.join(unanalysed)} are not analysed"
            )
            yield Finding("not-analysed", message, name, where)
        else:
            message = (
                f"decides every eviction request{_both(policy, reference)} as {base_name} does"
            )
            yield Finding("policies-equivalent", message, name, where)
    elif "unknown" in answers:
        yield Finding("not-analysed", f"the comparison with {base_name} timed out", name, where)


def _eviction_witness(
    models: list[tuple[EvictionInputs, Any, Any]], budget: Budget, *, permissive: bool
) -> tuple[str, dict[str, Any] | None]:
    """An eviction one policy refuses and the other allows (the base refuses it when
    ``permissive``): looked for on each search in turn until one answers other than unsat."""
    answer = "unsat"
    for inputs, mine, theirs in models:
        refusing, allowing = (theirs, mine) if permissive else (mine, theirs)
        # Rules not analysed match nowhere in a witness; the replay checks that they did not.
        quiet = [z3.Not(unknown) for unknown in (*mine.unknowns, *theirs.unknowns)]
        answer, model = solve(
            *inputs.constraints,
            *quiet,
            refusing.refuses,
            z3.Not(allowing.refuses),
            budget=budget,
            prefer=inputs.plain(),
            smallest=inputs.smallest(),
        )
        if answer == "sat":
            return answer, inputs.document(model)
        if answer != "unsat":
            return answer, None
    return answer, None


# What each direction of a collapse difference says, and what the two policies do with it.
_COLLAPSE_CLAIMS = {
    "overlay-more-permissive": "lets pruning go on over a history where {base} halts",
    "overlay-more-restrictive": "halts over a history where {base} lets pruning go on",
}


def compare_collapse(
    resolution: Resolution, base: Resolution, name: str, base_name: str, budget: Budget
) -> Generator[Finding, None, bool]:
    """The collapse check against ``base``, where the two differ at all; returns whether the
    collapse check was modelled (else its differing settings are reported as not analysed)."""
    policy, reference = resolution.policy, base.policy
    if _collapse_part(policy) == _collapse_part(reference):
        return True
    if (collapse.modelled(policy) or collapse.modelled(reference)) is not None:
        return False
    yield from _compare_collapse(resolution, base, name, base_name, budget)
    return True


def _collapse_where(resolution: Resolution, base: Resolution) -> tuple[Location, ...]:
    policy, reference = resolution.policy, base.policy
    return (
        *(
            locate(resolution, "spec", "collapse", key)
            for key in sorted(_differing(policy, reference, "collapse"))
        ),
        *_new_rules(resolution, base, "collapse"),
        *(
            locate(resolution, "spec", "scores", key)
            for key in sorted(_differing(policy, reference, "scores"))
        ),
    )


def _compare_collapse(
    resolution: Resolution, base: Resolution, name: str, base_name: str, budget: Budget
) -> Iterator[Finding]:
    policy, reference = resolution.policy, base.policy
    strings = strings_of(policy, reference)
    scale = raw_scale(policy, reference)
    depth = max(policy.spec.collapse.consecutive_cycles, reference.spec.collapse.consecutive_cycles)
    numbers, bounds = collapse.abstract(scale, depth)
    mine, unanalysed = collapse.refuses(policy, numbers, strings, "a:")
    theirs, also = collapse.refuses(reference, numbers, strings, "b:")
    where = _collapse_where(resolution, base)
    files = {name: policy, base_name: reference}
    answers = []
    for code, (refusing, allowing) in {
        "overlay-more-permissive": (theirs, mine),
        "overlay-more-restrictive": (mine, theirs),
    }.items():
        claim = _COLLAPSE_CLAIMS[code].format(base=base_name)
        try:
            answer, model = solve(*bounds, refusing, z3.Not(allowing), budget=budget)
            answers.append(answer)
            if answer != "sat":
                continue
            witness = _realize(
                model,
                numbers=numbers,
                scale=scale,
                policies=(policy, reference),
                strings=strings,
                code=code,
                budget=budget,
            )
        except OutOfTime:
            yield not_reached(f"whether {name} {claim}", budget, name, where)
            answers.append("not-reached")
            continue
        if witness is None:
            message = f"the analysis found that {name} {claim}, but could not build that history"
            yield Finding("not-analysed", message, name, where)
            continue
        expected = {name: code.endswith("restrictive"), base_name: code.endswith("permissive")}
        yield _witnessed(
            code,
            claim=claim,
            name=name,
            where=where,
            witness=witness,
            files=files,
            expected=expected,
        )
    if answers == ["unsat", "unsat"]:
        if unanalysed or also:
            rules = ", ".join(sorted({*unanalysed, *also}))
            message = f"collapse equivalence with {base_name} is not established: {rules}"
            yield Finding("not-analysed", message, name, where)
        else:
            message = (
                f"decides every collapse request{_both(policy, reference)} as {base_name} does"
            )
            yield Finding("policies-equivalent", message, name, where)
    elif "unknown" in answers:
        message = f"the collapse comparison with {base_name} timed out"
        yield Finding("not-analysed", message, name, where)


def _collapse_part(policy: Policy) -> tuple[Any, ...]:
    spec = policy.document["spec"]
    rules = [rule for rule in spec.get("rules", []) if rule.get("check") == "collapse"]
    return (spec.get("collapse"), spec.get("scores"), rules, spec.get("params") if rules else None)


def _differing(policy: Policy, reference: Policy, section: str) -> set[str]:
    mine = policy.document["spec"].get(section, {})
    theirs = reference.document["spec"].get(section, {})
    return {key for key in {*mine, *theirs} if mine.get(key) != theirs.get(key)}


def _realize(  # noqa: PLR0913 - the model and what it is realized against
    model: Any,
    *,
    numbers: collapse.Numbers,
    scale: tuple[float, float],
    policies: tuple[Policy, Policy],
    strings: Any,
    code: str,
    budget: Budget,
) -> dict[str, Any] | None:
    """A history showing the difference the abstract ``model`` found, or None."""
    for more in range(3):  # the model's entries, else a few more to spread over
        real, equations, layout = collapse.realized(model, numbers, scale, more)
        mine, _ = collapse.refuses(policies[0], real, strings, "ra:")
        theirs, _ = collapse.refuses(policies[1], real, strings, "rb:")
        refusing, allowing = (theirs, mine) if code.endswith("permissive") else (mine, theirs)
        differs = (*equations, refusing, z3.Not(allowing))
        # Clear of every threshold first (rounding cannot flip it); else as close as it must be.
        for extra in (collapse.clear_of(real, policies), []):
            answer, found = solve(*differs, *extra, budget=budget)
            if answer == "sat":
                return collapse.document(found, real, layout)
    return None


def _differ(mine: list[Any], theirs: list[Any]) -> bool:
    return {str(unknown) for unknown in mine} != {str(unknown) for unknown in theirs}


def _witnessed(  # noqa: PLR0913 - a finding's parts, named
    code: str,
    *,
    claim: str,
    name: str,
    where: tuple[Location, ...],
    witness: dict[str, Any],
    files: dict[str, Policy],
    expected: dict[str, bool],
) -> Finding:
    """The finding, once the engine reproduces its witness; else a not-analysed note."""
    outcomes: dict[str, str] = {}
    for file, policy in files.items():
        decision = Engine(policy).evaluate(witness)
        outcomes[file] = "refused" if decision.blocks else "allowed"
        if decision.blocks != expected[file]:
            message = f"the analysis found that it {claim}, but the engine does not reproduce it"
            return Finding("not-analysed", message, name, where, witness, outcomes)
    return Finding(code, f"{name} {claim}", name, where, witness, outcomes)


# The sections modelled symbolically (eviction, and the rules of every check) and the ones
# whose settings are only compared.
_UNMODELLED = ("collapse", "staleness", "transition", "scores")


def _unmodelled(
    resolution: Resolution, base: Resolution, name: str, base_name: str, *, skip: bool
) -> Iterator[Finding]:
    mine, theirs = resolution.policy.document["spec"], base.policy.document["spec"]
    for section in _UNMODELLED:
        if section == "scores" or mine.get(section) == theirs.get(section):
            continue
        if section == "collapse" and skip:
            continue
        fields = sorted(
            key
            for key in {*mine.get(section, {}), *theirs.get(section, {})}
            if mine.get(section, {}).get(key) != theirs.get(section, {}).get(key)
        )
        message = (
            f"{section} settings differ from {base_name} ({', '.join(fields)}); the analysis "
            f"does not model the {section} guard{_why(resolution, base, section)}, so how its "
            "decisions differ is not analysed (prunewarden diff replays traces under both)"
        )
        where = tuple(locate(resolution, "spec", section, key) for key in fields)
        yield Finding("not-analysed", message, name, where)


def _why(resolution: Resolution, base: Resolution, section: str) -> str:
    if section != "collapse":
        return ""
    why = collapse.modelled(resolution.policy) or collapse.modelled(base.policy)
    return f" with {why}" if why else ""


def _changed(resolution: Resolution, base: Resolution) -> Iterator[Location]:
    """The eviction fields, score settings and rules where the two policies differ."""
    mine, theirs = resolution.policy.document["spec"], base.policy.document["spec"]
    for section in ("eviction", "scores"):
        for key, value in mine.get(section, {}).items():
            if theirs.get(section, {}).get(key) != value:
                yield locate(resolution, "spec", section, key)
    yield from _new_rules(resolution, base, "eviction")


def _new_rules(resolution: Resolution, base: Resolution, check: str) -> Iterator[Location]:
    """The rules of ``check`` that ``base`` does not have as they are."""
    theirs = base.policy.document["spec"].get("rules", [])
    for index, rule in enumerate(resolution.policy.document["spec"].get("rules", [])):
        if rule.get("check") == check and rule not in theirs:
            yield locate(resolution, "spec", "rules", index)


def _both(policy: Policy, reference: Policy) -> str:
    """Said of equivalence when the score ranges differ: only scores both accept compare."""
    return "" if policy.spec.scores == reference.spec.scores else " that both accept"
