"""A policy's ``spec.rules`` and ``spec.params``, as written: compiled into rules when the
policy loads (their canonical form for the digest is :mod:`._canonical`'s).

Every problem of every rule is reported at once, at its place in the policy file, so an author
fixes them in one pass; a rule with any problem is not compiled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from prunewarden._json import JsonPath
from prunewarden._schemas import apply_defaults
from prunewarden.errors import Problem
from prunewarden.rules._canonical import rule_schema
from prunewarden.rules._compiler import compile_expression
from prunewarden.rules._cost import estimate_cost, rule_cost
from prunewarden.rules._expression import (
    Cost,
    Expression,
    ExpressionError,
    ExpressionProblem,
    Result,
)
from prunewarden.rules._model import EFFECTS, PER_ITEM, Effect, Rule
from prunewarden.rules._typecheck import checker_available, type_problems
from prunewarden.rules._variables import variable_shapes

if TYPE_CHECKING:
    from prunewarden._source import Parsed


def compile_rules(parsed: Parsed) -> tuple[tuple[Rule, ...], list[Problem]]:
    """Compile ``spec.rules`` of a parsed policy, reporting every problem of every rule.

    Parts the schema already refuses (a rule that is not a mapping, a field of the wrong type)
    are skipped here: the schema's problems name them.
    """
    spec = parsed.data.get("spec") if isinstance(parsed.data, dict) else None
    if not isinstance(spec, dict):
        return (), []
    params = _valid_params(spec.get("params"))
    raw_rules = spec.get("rules")
    if not isinstance(raw_rules, list):
        return (), []
    rules: list[Rule] = []
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_rules):
        path: JsonPath = ("spec", "rules", index)
        if not isinstance(raw, dict):
            continue
        rule, found = _compile_rule(index, raw, params, parsed, path)
        name = raw.get("name")
        if isinstance(name, str):
            if name in seen:
                message = f"duplicate rule name {name!r} (first at rules[{seen[name]}])"
                found.append(parsed.problem((*path, "name"), message))
            seen.setdefault(name, index)
        problems.extend(found)
        if rule is not None:
            rules.append(rule)
    problems.extend(_budget_problems(spec.get("rule_cost_budget"), rules, parsed))
    return tuple(rules), problems


def _budget_problems(budget: Any, rules: list[Rule], parsed: Parsed) -> list[Problem]:
    """The policy's ``rule_cost_budget`` against the sum of its rules' estimates."""
    if not isinstance(budget, int) or isinstance(budget, bool):
        return []  # absent, or the schema reports it
    costs = sorted(
        ((rule.cost.units, rule.name) for rule in rules if rule.cost is not None), reverse=True
    )
    total = sum(units for units, _ in costs)
    if total <= budget:
        return []
    dearest = ", ".join(f"{name} ({units})" for units, name in costs[:3])
    message = (
        f"the rules' estimated worst-case costs add up to {total}, over rule_cost_budget "
        f"{budget}; the dearest: {dearest}"
    )
    return [parsed.problem(("spec", "rule_cost_budget"), message)]


def _valid_params(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {}
    return {
        name: value
        for name, value in raw.items()
        if isinstance(value, bool | int | float | str | list)
    }


def _compile_rule(
    index: int, raw: dict[str, Any], params: dict[str, Any], parsed: Parsed, path: JsonPath
) -> tuple[Rule | None, list[Problem]]:
    problems: list[Problem] = []
    check, effect = raw.get("check"), raw.get("effect")
    if check not in EFFECTS:
        return None, problems  # the schema reports it
    if effect in {"deny", "halt", "pin", "warn"} and effect not in EFFECTS[check]:
        allowed = ", ".join(EFFECTS[check])
        message = f"effect {effect!r} does not apply to {check} rules (use one of: {allowed})"
        problems.append(parsed.problem((*path, "effect"), message))
    has_message = "message" in raw
    has_expression = "message_expression" in raw
    if has_message == has_expression:
        message = "give exactly one of message and message_expression"
        problems.append(parsed.problem(path, message))
    variables = {**variable_shapes(check), "params": _params_shape(params)}
    compiled = _compile_expressions(raw, variables, params, parsed, path, problems)
    when, wording = compiled.get("when"), compiled.get("message_expression")
    if problems or when is None or (has_expression and wording is None):
        return None, problems
    defaults = apply_defaults(rule_schema(), raw)
    text = raw.get("message")
    max_cost = raw.get("max_cost")
    max_cost = max_cost if isinstance(max_cost, int) and not isinstance(max_cost, bool) else None
    costs = {key: estimate_cost(e, variables, {"params": params}) for key, e in compiled.items()}
    cost = _rule_cost(costs, variables, check, compiled)
    if max_cost is not None and cost.units > max_cost:
        key = max(costs, key=lambda k: costs[k].units)
        message = (
            f"estimated worst-case cost {cost.units} is over max_cost {max_cost}; "
            f"dearest: {cost.describe()}"
        )
        problem = ExpressionProblem(message, cost.line, cost.column, compiled[key].source)
        return None, [parsed.problem((*path, key), problem.describe())]
    rule = Rule(
        index=index,
        name=str(raw.get("name", f"rule-{index}")),
        check=check,
        effect=cast("Effect", effect),
        mode=defaults["mode"],
        when=when,
        message=text if isinstance(text, str) else None,
        message_expression=wording,
        timeout=defaults["timeout_ms"] / 1000,
        cost=cost,
        max_cost=max_cost,
    )
    return rule, problems


def _compile_expressions(  # noqa: PLR0913, PLR0917 - the rule's parts, and where problems go
    raw: dict[str, Any],
    variables: dict[str, Any],
    params: dict[str, Any],
    parsed: Parsed,
    path: JsonPath,
    problems: list[Problem],
) -> dict[str, Expression]:
    """A rule's ``when`` and ``message_expression`` compiled (and type-checked where the checker
    is installed); what fails is added to ``problems`` and left out."""
    compiled: dict[str, Expression] = {}
    expressions: tuple[tuple[str, Result], ...] = (
        ("when", "bool"),
        ("message_expression", "string"),
    )
    for key, result in expressions:
        source = raw.get(key)
        if not isinstance(source, str) or not source.strip():
            continue  # absent, or the schema reports it
        try:
            compiled[key] = compile_expression(
                source.strip(), variables, result=result, constants={"params": params}
            )
        except ExpressionError as exc:
            problems.extend(parsed.problem((*path, key), p.describe()) for p in exc.problems)
            continue
        if checker_available():
            found = type_problems(compiled[key], variables)
            problems.extend(parsed.problem((*path, key), p.describe()) for p in found)
    return compiled


def _rule_cost(
    costs: Mapping[str, Cost],
    variables: Mapping[str, Any],
    check: str,
    compiled: Mapping[str, Expression],
) -> Cost:
    variable = PER_ITEM.get(check)
    reads = {name for e in compiled.values() for name in e.reads}
    return rule_cost(list(costs.values()), variables, variable if variable in reads else None)


def _params_shape(params: Mapping[str, Any]) -> dict[str, Any]:
    def shape(value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"type": "boolean"}
        if isinstance(value, int | float):
            return {"type": "number"}
        if isinstance(value, str):
            return {"type": "string"}
        return {"type": "array", "items": shape(value[0]) if value else {}}

    return {
        "type": "object",
        "properties": {name: shape(value) for name, value in params.items()},
        "additionalProperties": False,
    }
