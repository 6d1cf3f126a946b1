"""The eviction check of a resolved policy as one formula over a symbolic request.

An eviction request is a handful of facts (score, perturbed score, kind, flags, whether a score
dependency is also slated for eviction, tokens); the eviction guard is threshold tests over them
(guards/eviction.py) and the policy's eviction rules tighten it. Two policies are compared over
the same symbols, so a model of "one refuses, the other allows" is a request that shows it.

The engine compares doubles. Witnesses are looked for first among scores that are multiples of
1/1024 (``grid``): exact as doubles, and every difference of two is exact too, so such a witness
never rests on rounding at a threshold (a real-valued witness 0.45 - 0.1 is 0.35 only on paper).
Where the grid holds none, the search goes on over every real score (``grid=False``), with each
constant at the exact value of its double: a score exactly 0.2 is found where ``score < 0.2``
and ``score <= 0.2`` part. There, what the engine computes in floating point (a score's move
``|score - perturbed|``, a calibrated score) is a value within half an ulp of the real result,
so that a claim over these reals holds for every double; a rule that computes with doubles is
not translated there (its rounding is not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import z3

from prunewarden.analysis._cel import Strings, Translator, Value
from prunewarden.analysis._symbols import Symbols
from prunewarden.policy import Calibration, Policy
from prunewarden.rules._symbolic import NotTranslated, symbolic_term

GRID = 1024
# Round to nearest: a double result is within this relative error of the real one, give or
# take half the smallest subnormal.
UNIT_ROUNDOFF = Fraction(1, 2**53)
SUBNORMAL_HALF = Fraction(1, 2**1075)
MAX_IDS = 100_000  # input.v1: maxItems of a list of ids
SEGMENT_ID = "segment"
DEPENDENCY_ID = "dependency"


@dataclass
class EvictionInputs:
    """The raw request, shared by every policy modelled over it."""

    strings: Strings
    scale: tuple[float, float]
    grid: bool = True
    constraints: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.steps: list[Any] = []
        self.computed: dict[tuple[Any, ...], Any] = {}
        self.score = self._score("score")
        self.perturbed = self._score("perturbed_score")
        self.measured = z3.Bool("perturbed_score?measured")
        self.kind = z3.Int("segment.kind")
        self.non_recoverable = z3.Bool("segment.non_recoverable")
        self.tombstone = z3.Bool("segment.tombstone_written")
        self.pending = z3.Bool("segment.dependency_pending")
        self.tokens = z3.Int("segment.tokens")
        self.counted = z3.Bool("segment.tokens?counted")
        # How many score dependencies and eviction candidates, for rules that read size();
        # a pending dependency is one of each.
        self.dependencies = z3.Int("segment.score_dependencies#")
        self.candidates = z3.Int("candidates#")
        self.constraints += [
            z3.Implies(self.pending, z3.And(self.dependencies >= 1, self.candidates >= 1)),
            self.dependencies >= 0,
            self.candidates >= 0,
            self.dependencies <= MAX_IDS,
            self.candidates <= MAX_IDS,
            self.kind >= 0,
            self.kind < len(self.strings.names),
            self.tokens >= 0,
            self.tokens <= 10**9,
        ]

    def _score(self, name: str) -> Any:
        low, high = (z3.RealVal(Fraction(bound)) for bound in self.scale)
        if self.grid:
            step = z3.Int(name + "*1024")
            self.steps.append(step)
            value = z3.ToReal(step) / GRID
        else:
            value = z3.Real(name)
        self.constraints.append(z3.And(value >= low, value <= high))
        return value

    def rounded(self, key: tuple[Any, ...], exact: Any) -> Any:
        """What the engine computes in floating point for the real ``exact``: the same on the
        grid (where it is exact); else a value within rounding of it, one per ``key``, so two
        policies computing the same thing share it."""
        if self.grid:
            return exact
        if key not in self.computed:
            value = z3.Real("~" + "/".join(map(str, key)))
            size = z3.If(exact >= 0, exact, -exact)
            slack = size * z3.RealVal(UNIT_ROUNDOFF) + z3.RealVal(SUBNORMAL_HALF)
            self.constraints += [value >= exact - slack, value <= exact + slack]
            self.computed[key] = value
        return self.computed[key]

    def judged(self, calibration: Calibration | None, raw: Any, name: str) -> Any:
        """A raw score on the scale the guard judges: pipeline._calibration's map, ``(raw -
        low) / (high - low)`` clipped to [0, 1], each operation rounded as a double."""
        if calibration is None:
            return raw
        low, high = calibration.low, calibration.high
        key = ("calibrated", name, low, high)
        shifted = self.rounded((*key, "-"), raw - z3.RealVal(Fraction(low)))
        scaled = self.rounded(key, shifted / z3.RealVal(Fraction(high - low)))
        return z3.If(scaled < 0, z3.RealVal(0), z3.If(scaled > 1, z3.RealVal(1), scaled))

    def moved(self, calibration: Calibration | None, score: Any, perturbed: Any) -> Any:
        """``abs(score - perturbed)`` as the eviction guard computes it."""
        key = ("moved", *(() if calibration is None else (calibration.low, calibration.high)))
        return self.rounded(key, z3.If(score >= perturbed, score - perturbed, perturbed - score))

    def plain(self) -> tuple[Any, ...]:
        """What a plain witness is: an ordinary kind, tombstoned, measured, no dependency,
        no other candidate, no token count; the solver departs from it only where it must."""
        return (
            self.kind == len(self.strings.names) - 1,
            z3.Not(self.non_recoverable),
            z3.Not(self.pending),
            self.tombstone,
            self.measured,
            self.dependencies == 0,
            self.candidates == 0,
            z3.Not(self.counted),
        )

    def smallest(self) -> tuple[Any, ...]:
        """The numbers a witness keeps as small as it can, first to last."""
        return (*self.steps, self.tokens, self.dependencies, self.candidates)

    def document(self, model: Any) -> dict[str, Any]:
        """The input document of a model: what ``prunewarden evaluate`` reads."""

        def number(expression: Any) -> float:
            value = model.eval(expression, model_completion=True)
            return float(Fraction(value.as_fraction()))

        def flag(expression: Any) -> bool:
            return bool(z3.is_true(model.eval(expression, model_completion=True)))

        def count(expression: Any) -> int:
            return int(model.eval(expression, model_completion=True).as_long())

        pending = flag(self.pending)
        dependencies = [f"{DEPENDENCY_ID}-{i}" for i in range(count(self.dependencies))]
        # The first dependency is the pending one; the other candidates are unrelated.
        candidates = dependencies[:1] if pending else []
        candidates += [f"other-{i}" for i in range(count(self.candidates) - len(candidates))]
        segment: dict[str, Any] = {
            "id": SEGMENT_ID,
            "kind": self.strings.names[count(self.kind)],
            "non_recoverable": flag(self.non_recoverable),
            "score_dependencies": dependencies,
            "tombstone_written": flag(self.tombstone),
        }
        if flag(self.counted):
            segment["tokens"] = count(self.tokens)
        return {
            "check": "eviction",
            "segment": segment,
            "score": number(self.score),
            "perturbed_score": number(self.perturbed) if flag(self.measured) else None,
            "eviction_candidates": candidates,
        }


@dataclass
class EvictionModel:
    """One policy's eviction check over shared inputs.

    ``refuses``: the policy refuses the eviction and enforces it (an audit or off mode never
    stops an eviction). ``matches``: each eviction rule's condition (a rule not analysed is an
    unknown, named in ``unanalysed`` with why).
    """

    refuses: Any
    guard: Any
    matches: dict[str, Any]
    unknowns: list[Any]
    unanalysed: dict[str, str]


def model_eviction(policy: Policy, inputs: EvictionInputs, tag: str) -> EvictionModel:
    settings = policy.spec.eviction
    calibration = policy.spec.calibration
    score = inputs.judged(calibration, inputs.score, "score")
    perturbed = inputs.judged(calibration, inputs.perturbed, "perturbed_score")
    names = inputs.strings.names
    pinned = z3.Or(
        inputs.non_recoverable,
        *(inputs.kind == names.index(kind) for kind in sorted(settings.pinned_kinds)),
    )
    delta = z3.RealVal(Fraction(settings.stability_delta))
    moved = inputs.moved(calibration, score, perturbed)
    guard = z3.Or(
        pinned,
        inputs.pending,
        z3.And(z3.Not(inputs.measured), z3.BoolVal(settings.require_perturbation)),
        z3.And(inputs.measured, moved > delta),
        z3.And(z3.BoolVal(settings.require_tombstone), z3.Not(inputs.tombstone)),
    )
    matches, unknowns, unanalysed = _rules(policy, inputs, score, perturbed, tag)
    refusing = [
        matches[rule.name]
        for rule in policy.rules
        if rule.check == "eviction" and rule.mode == "enforce" and rule.effect != "warn"
    ]
    refuses = z3.And(z3.BoolVal(settings.mode == "enforce"), z3.Or(guard, *refusing))
    return EvictionModel(refuses, guard, matches, unknowns, unanalysed)


def _rules(
    policy: Policy, inputs: EvictionInputs, score: Any, perturbed: Any, tag: str
) -> tuple[dict[str, Any], list[Any], dict[str, str]]:
    overrides = {
        ("score",): Value.of("double", score),
        ("perturbed_score",): Value.of("double", perturbed, z3.Not(inputs.measured)),
        ("segment", "kind"): Value.of("string", inputs.kind),
        ("segment", "non_recoverable"): Value.of("bool", inputs.non_recoverable),
        ("segment", "tombstone_written"): Value.of("bool", inputs.tombstone),
        ("segment", "tokens"): Value.of("double", z3.ToReal(inputs.tokens), z3.Not(inputs.counted)),
        ("segment", "score_dependencies"): Value.of("list", inputs.dependencies),
        ("candidates",): Value.of("list", inputs.candidates),
    }
    symbols = Symbols("eviction", inputs.scale, inputs.strings, tag, overrides)
    params = policy.document["spec"].get("params", {})
    translator = Translator(symbols, params, inputs.strings, rounded=not inputs.grid)
    matches: dict[str, Any] = {}
    unknowns: list[Any] = []
    unanalysed: dict[str, str] = {}
    for rule in policy.rules:
        if rule.check != "eviction":
            continue
        try:
            matches[rule.name] = translator.matched(symbolic_term(rule.when.tree))
        except NotTranslated as exc:
            # Unknown, and the same unknown for the same condition over the same params in
            # either policy: two policies sharing a rule still compare equal.
            params = repr(sorted(policy.document["spec"].get("params", {}).items()))
            unknown = z3.Bool(f"rule?{rule.when.source}?{params}")
            matches[rule.name] = unknown
            unknowns.append(unknown)
            unanalysed[rule.name] = str(exc)
    inputs.constraints.extend(symbols.constraints)
    return matches, unknowns, unanalysed
