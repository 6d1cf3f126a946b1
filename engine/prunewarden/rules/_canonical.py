"""The canonical form of a policy's ``spec.params`` and ``spec.rules``, for its digest.

Apart from the compiler (:mod:`._spec`) because every policy is put in canonical form when it
loads, and this needs no CEL: a policy without rules loads without the CEL runtime.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from prunewarden import _resources as resources
from prunewarden._schemas import apply_defaults, inline_refs


@cache
def rule_schema() -> dict[str, Any]:
    """``$defs.rule`` of the policy schema, references inlined: where rule defaults come from."""
    root = resources.schema("policy")
    rule: dict[str, Any] = inline_refs(root["$defs"]["rule"], root)
    return rule


def normalize(spec: dict[str, Any]) -> None:
    """The canonical form of ``spec.params`` and ``spec.rules``, for the policy's digest.

    Numbers become floats (1 and 1.0 are the same double in CEL), rule defaults are spelled out,
    expressions lose surrounding whitespace, and empty sections are dropped so a policy without
    rules keeps the digest it had before rules existed.
    """
    params = spec.get("params")
    if params:
        spec["params"] = {name: _floats(value) for name, value in params.items()}
    else:
        spec.pop("params", None)
    rules = spec.get("rules")
    if rules:
        schema = rule_schema()
        normalized = []
        for rule in rules:
            filled = apply_defaults(schema, rule)
            for key in ("when", "message_expression"):
                if key in filled:
                    filled[key] = filled[key].strip()
            normalized.append(filled)
        spec["rules"] = normalized
    else:
        spec.pop("rules", None)


def _floats(value: Any) -> Any:
    if isinstance(value, list):
        return [_floats(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value
