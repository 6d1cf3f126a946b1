"""The variables a rule reads, as symbols within the ranges the input schema and policy allow.

Only variables whose every value the analysis can model are here: numbers, counts, flags, the
segment's kind (one of finitely many strings that tell kinds apart) and the sizes of lists.
Text, ids and metadata are not: a rule reading them is not analysed. A range here is never
narrower than what a request can carry, so "never matches" and "always matches" over these
symbols hold for every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from prunewarden.analysis._cel import Strings, Value
from prunewarden.rules._symbolic import NotTranslated

# kind of value, its range ("score": the judged score scale, "count": >= 0), whether it may
# be null. Scores are doubles and counts are ints, as the rule runtime receives them.
_Spec = tuple[str, str, bool]
VARIABLES: dict[str, dict[tuple[str, ...], _Spec]] = {
    "eviction": {
        ("score",): ("double", "score", False),
        ("perturbed_score",): ("double", "score", True),
        ("segment", "kind"): ("string", "", False),
        ("segment", "non_recoverable"): ("bool", "", False),
        ("segment", "tombstone_written"): ("bool", "", False),
        ("segment", "tokens"): ("int", "count", True),
        ("segment", "score_dependencies"): ("list", "", False),
        ("candidates",): ("list", "", False),
    },
    "collapse": {
        ("cycle",): ("int", "count", True),
        ("cycles",): ("int", "count", False),
        ("spread",): ("double", "count", True),
        ("median",): ("double", "score", True),
        ("canary", "score"): ("double", "score", True),
        ("canary", "baseline"): ("double", "score", True),
        ("pinned",): ("list", "", False),
        ("spreads",): ("list", "", False),
    },
    "staleness": {
        ("span", "score"): ("double", "score", True),
        ("span", "rewrite_count"): ("int", "count", False),
        ("span", "position"): ("int", "count", False),
        ("span", "derived_from"): ("list", "", False),
        ("spans",): ("list", "", False),
        ("tombstones",): ("list", "", False),
        ("turns",): ("list", "", False),
        ("keep_top_k",): ("int", "count", False),
        ("recompute_budget",): ("int", "count", True),
    },
    "transition": {
        ("transition", "before_count"): ("int", "count", False),
        ("transition", "after_count"): ("int", "count", False),
        **{
            ("transition", name): ("list", "", False)
            for name in ("kept", "rewritten", "folded", "removed", "summaries", "added")
        },
        ("before",): ("list", "", False),
        ("after",): ("list", "", False),
    },
}


@dataclass
class Symbols:
    """The symbols of one check's variables, made on first use, with their ranges.

    ``scale`` is the score range the rules see (the calibrated one when the policy calibrates);
    ``overrides`` are values another model already made (the eviction model's judged scores).
    """

    check: str
    scale: tuple[float, float]
    strings: Strings
    prefix: str = ""
    overrides: dict[tuple[str, ...], Value] = field(default_factory=dict)
    constraints: list[Any] = field(default_factory=list)
    made: dict[tuple[str, ...], Value] = field(default_factory=dict)

    def __call__(self, path: tuple[str, ...]) -> Value:
        if path in self.overrides:
            return self.overrides[path]
        if path not in self.made:
            self.made[path] = self._make(path)
        return self.made[path]

    def _make(self, path: tuple[str, ...]) -> Value:
        spec = VARIABLES[self.check].get(path)
        if spec is None:
            raise NotTranslated(".".join(path))
        kind, bounds, nullable = spec
        name = self.prefix + ".".join(path)
        null = z3.Bool(name + "?null") if nullable else z3.BoolVal(False)
        if kind == "bool":
            return Value.of("bool", z3.Bool(name), null)
        if kind == "string":
            symbol = z3.Int(name)
            self.constraints.append(z3.And(symbol >= 0, symbol < len(self.strings.names)))
            return Value.of("string", symbol, null)
        # Every number a rule reads is a double (rules._values.to_cel); counts and sizes of
        # lists take whole values.
        symbol = z3.Real(name) if kind == "double" else z3.Int(name)
        if bounds == "score":
            low, high = self.scale
            self.constraints.append(z3.And(symbol >= z3.RealVal(low), symbol <= z3.RealVal(high)))
        else:  # counts and list sizes
            self.constraints.append(symbol >= 0)
        if kind == "int":
            return Value.of("double", z3.ToReal(symbol), null)
        # A list is known by its size alone (what size() reads of it).
        return Value(kind, symbol, z3.BoolVal(False), null)
