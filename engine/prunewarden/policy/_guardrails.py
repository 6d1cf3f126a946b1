"""Guardrails a base policy puts on the policies that extend it.

- ``spec.validators``: CEL conditions over the resolved policy (``metadata`` and ``spec``, every
  default filled in), checked when a policy loads. A policy failing one is refused.
- ``spec.locked``: JSON pointers to values that policies extending the one declaring them may not
  change (a rule is addressed by its name: ``/spec/rules/pin-negations``). A rule's text alone
  does not fix what it decides: locking a rule (or its ``when`` or ``message_expression``) also
  locks every ``spec.params`` entry its expressions read and the score scale (``spec.scores``,
  calibration included), so that an overlay cannot empty a param or rescale the scores under
  it (:func:`implied_locks`).

Both accumulate along an ``extends`` chain: an overlay may add its own, never drop or redefine an
inherited one. A refusal points at the file and line of the overlay that set the culprit value and
names the guardrail and where the base declared it, so the overlay's author sees both sides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from prunewarden import _resources as resources
from prunewarden import rules
from prunewarden._json import JsonPath
from prunewarden._schemas import inline_refs
from prunewarden._source import Origin, Parsed, json_path
from prunewarden.errors import Problem, describe_value
from prunewarden.limits import MAX_DECISION_RULE_MS

if TYPE_CHECKING:
    from prunewarden.rules import Expression, Shape

# The rules package is used through its names (it resolves them on use), so that the CEL runtime
# loads with the first policy that has validators, never for one without.

# One validator's CPU time at load time; a policy is small, so this only stops a pathological
# expression. All the validators of a policy share MAX_DECISION_RULE_MS, as the rules of one
# decision do, and the memory and RE2 bounds of prunewarden.rules hold for them too.
VALIDATOR_TIMEOUT = 0.5


@dataclass(frozen=True, slots=True)
class Validator:
    """A compiled ``spec.validators`` entry and where it was declared."""

    name: str
    message: str
    expression: Expression
    origin: Origin  # of its expression
    paths: frozenset[tuple[str, ...]]  # the fields it reads, to point at a culprit


@dataclass(frozen=True, slots=True)
class Lock:
    """A ``spec.locked`` pointer and where it was declared."""

    pointer: str
    tokens: tuple[str, ...]
    origin: Origin
    why: str = ""  # for a lock implied by another: what it protects


class Located(Protocol):
    """A merged document that knows where its values came from (``_overlay.Merged``)."""

    origins: dict[JsonPath, Origin]

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem: ...


class _Missing:
    def __repr__(self) -> str:
        return "nothing"


MISSING: Any = _Missing()


# --- validators --------------------------------------------------------------------------------


@cache
def variable_shapes() -> dict[str, Shape]:
    """``metadata`` and ``spec`` with their JSON Schema: what a validator may read."""
    root = resources.schema("policy")
    properties = inline_refs(root["properties"], root)
    return {"metadata": properties["metadata"], "spec": properties["spec"]}


def compile_validators(parsed: Parsed, origin_of: Any) -> tuple[list[Validator], list[Problem]]:
    """Compile the ``spec.validators`` of one schema-valid file; ``origin_of(path)`` gives the
    :class:`Origin` of a path in it. Every problem of every expression is reported."""
    spec = parsed.data.get("spec") if isinstance(parsed.data, dict) else None
    raw = spec.get("validators") if isinstance(spec, dict) else None
    if not isinstance(raw, list):
        return [], []
    validators: list[Validator] = []
    problems: list[Problem] = []
    for index, entry in enumerate(raw):
        path: JsonPath = ("spec", "validators", index, "expression")
        if not isinstance(entry, dict) or not isinstance(entry.get("expression"), str):
            continue  # the schema reports it
        try:
            expression = rules.compile_expression(entry["expression"].strip(), variable_shapes())
        except rules.ExpressionError as exc:
            problems.extend(parsed.problem(path, p.describe()) for p in exc.problems)
            continue
        validators.append(
            Validator(
                name=str(entry.get("name")),
                message=str(entry.get("message")),
                expression=expression,
                origin=origin_of(path),
                paths=rules.field_paths(expression),
            )
        )
    return validators, problems


def duplicate_validators(entries: list[dict[str, Any]], merged: Located) -> list[Problem]:
    """A validator name used twice along a chain: an overlay may not redefine a guardrail."""
    problems = []
    first: dict[str, int] = {}
    for index, entry in enumerate(entries):
        name = entry["name"]
        if name not in first:
            first[name] = index
            continue
        earlier = merged.origins.get(("spec", "validators", first[name], "name"))
        where = f" at {earlier}" if earlier else ""
        message = f"validator {name!r} is already defined{where}; a validator cannot be redefined"
        problems.append(merged.problem(("spec", "validators", index, "name"), message))
    return problems


def validator_problems(
    validators: Iterable[Validator], document: Mapping[str, Any], merged: Located
) -> list[Problem]:
    """Evaluate every validator on the normalized resolved ``document``. A failing validator is
    reported at the value a descendant of its declaring file set, when one did; otherwise at
    the validator itself. An expression that cannot be evaluated refuses too (fail closed)."""
    validators = list(validators)
    if not validators:
        return []  # nothing to evaluate, and no CEL runtime to load for it
    try:
        variables = {name: rules.to_cel(document[name]) for name in ("metadata", "spec")}
    except (TypeError, ValueError) as exc:
        message = f"the policy cannot be checked by its validators: {exc}"
        return [merged.problem(("spec",), message)]
    problems = []
    shared = rules.Budget(MAX_DECISION_RULE_MS / 1000)
    for validator in validators:
        declared = f"validator {validator.name!r} of {validator.origin}"
        try:
            passed = rules.evaluate_bool(
                validator.expression,
                {name: variables[name] for name in validator.expression.reads},
                deadline=rules.Deadline(VALIDATOR_TIMEOUT, shared),
            )
        except rules.EvaluationError as exc:
            message = f"{declared} could not be evaluated ({exc}); refusing"
            problems.append(_at(validator.origin, ("spec", "validators"), message))
            continue
        if passed:
            continue
        culprit = _culprit(validator, merged.origins)
        if culprit is None:
            message = f"{declared} failed: {validator.message}"
            problems.append(_at(validator.origin, ("spec", "validators"), message))
            continue
        path, origin = culprit
        value = lookup(document, path)
        message = f"refused by {declared}: {validator.message}"
        if not isinstance(value, dict | list):
            message = f"{describe_value(value)} is {message}"
        problems.append(Problem(origin.file, origin.line, origin.column, json_path(path), message))
    return problems


def _culprit(
    validator: Validator, origins: Mapping[JsonPath, Origin]
) -> tuple[JsonPath, Origin] | None:
    """The value read by the validator that the most derived file below its declaring one set:
    the value itself, or else what that file set inside it (a rule of ``spec.rules``)."""
    layer = validator.origin.layer
    found: list[tuple[JsonPath, Origin]] = []
    for path in validator.paths:
        size = len(path) + 1
        inside = [
            (item, origin)
            for item, origin in origins.items()
            if len(item) == size and item[:-1] == path and origin.layer > layer
        ]
        origin = origins.get(path)
        if inside:  # a list or map read whole: blame what the descendant put in it
            found += inside
        elif origin is not None and origin.layer > layer:
            found.append((path, origin))
    if not found:
        return None
    # The most derived file first; in it, a setting before the metadata (the name a validator
    # reads is rarely what its author should change), then the first line.
    return min(
        found,
        key=lambda item: (-item[1].layer, item[0][0] == "metadata", item[1].line, item[1].column),
    )


def _at(origin: Origin, path: JsonPath, message: str) -> Problem:
    return Problem(origin.file, origin.line, origin.column, json_path(path), message)


# --- locked paths ------------------------------------------------------------------------------


def pointer_tokens(pointer: str) -> tuple[str, ...]:
    """RFC 6901: ``/spec/collapse/spread_floor`` -> ``("spec", "collapse", "spread_floor")``."""
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:])


def declared_locks(document: Mapping[str, Any], origins: Mapping[JsonPath, Origin]) -> list[Lock]:
    """The ``spec.locked`` pointers of a merged document, each with where it was declared."""
    locked = document.get("spec", {}).get("locked", [])
    return [
        Lock(pointer, pointer_tokens(pointer), origins.get(("spec", "locked", i), Origin("", 0, 0)))
        for i, pointer in enumerate(locked)
    ]


# Where an expression reads params: ``params.name`` reads one; ``params`` read any other way (an
# index, a macro, a comprehension) may read any. Found in the expression's text rather than its
# compiled tree so that locks hold whatever compiles; a mention in a string literal only locks
# more than needed, never less.
_PARAM_READ = re.compile(r"\bparams\b(?:\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?")
_EXPRESSIONS = ("when", "message_expression")
_SCALE: tuple[str, ...] = ("spec", "scores")


def implied_locks(locks: Iterable[Lock], document: Mapping[str, Any]) -> list[Lock]:
    """What the rule locks among ``locks`` cover beyond the rule's own text, in ``document``
    (the policy declaring or inheriting them): ``/spec/params/<name>`` for each param the
    rule's expressions read (all of ``/spec/params`` when they read it other than by name), and
    ``/spec/scores``, the scale its score comparisons are made on."""
    rules = document.get("spec", {}).get("rules", [])
    locks = list(locks)
    explicit = {lock.tokens for lock in locks}  # reported as declared, not twice
    implied: dict[tuple[str, ...], Lock] = {}
    for lock in locks:
        for rule in _covered_rules(lock.tokens, rules):
            why = f" (the locked rule {rule['name']!r}"
            implied.setdefault(_SCALE, _implied(_SCALE, lock, f"{why} compares scores on it)"))
            for name in _params_read(rule):
                tokens = ("spec", "params") if name is None else ("spec", "params", name)
                implied.setdefault(tokens, _implied(tokens, lock, f"{why} reads it)"))
    return [lock for tokens, lock in implied.items() if tokens not in explicit]


def _covered_rules(tokens: tuple[str, ...], rules: list[Any]) -> list[dict[str, Any]]:
    named = [rule for rule in rules if isinstance(rule, dict) and isinstance(rule.get("name"), str)]
    if len(tokens) <= 2 and tokens == ("spec", "rules")[: len(tokens)]:
        return named  # the whole spec, or every rule
    if tokens[:2] != ("spec", "rules") or (len(tokens) > 3 and tokens[3] not in _EXPRESSIONS):
        return []
    return [rule for rule in named if rule["name"] == tokens[2]]


def _params_read(rule: Mapping[str, Any]) -> set[str | None]:
    """The param names a rule's expressions read; None stands for "any of them"."""
    found: set[str | None] = set()
    for key in _EXPRESSIONS:
        text = rule.get(key)
        if isinstance(text, str):
            found.update(match[1] for match in _PARAM_READ.finditer(text))
    return found


def _implied(tokens: tuple[str, ...], lock: Lock, why: str) -> Lock:
    pointer = "/" + "/".join(t.replace("~", "~0").replace("/", "~1") for t in tokens)
    return Lock(pointer, tokens, lock.origin, f" with {lock.pointer}{why}")


def unresolved_locks(locks: Iterable[Lock], document: Mapping[str, Any]) -> list[Problem]:
    """A lock that names nothing in the policy declaring it would protect nothing: refuse it."""
    return [
        _at(
            lock.origin,
            ("spec", "locked"),
            f"locked path {lock.pointer} names nothing in this policy (defaults filled in)",
        )
        for lock in locks
        if lookup(document, lock.tokens) is MISSING
    ]


def changed_locks(
    locks: Iterable[Lock],
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    merged: Located,
    layer: int,
) -> list[Problem]:
    """Locks inherited by ``layer`` whose value it changed (``before``/``after``: the normalized
    documents without and with it), each located at what the layer set."""
    problems = []
    for lock in locks:
        old, new = lookup(before, lock.tokens), lookup(after, lock.tokens)
        if old == new:
            continue
        target = _document_path(after, lock.tokens)
        culprit = _set_by(merged.origins, target, layer)
        message = f"changes {lock.pointer}, which is locked by {lock.origin}{lock.why}"
        if not isinstance(old, dict | list) and not isinstance(new, dict | list):
            message += f" ({describe_value(old)} -> {describe_value(new)})"
        if culprit is None:
            problems.append(merged.problem(target, message))
            continue
        path, origin = culprit
        problems.append(Problem(origin.file, origin.line, origin.column, json_path(path), message))
    return problems


def _set_by(
    origins: Mapping[JsonPath, Origin], target: JsonPath, layer: int
) -> tuple[JsonPath, Origin] | None:
    """What ``layer`` set at or below ``target`` (first in the file), else the deepest value it
    set above it."""
    size = len(target)
    below = [
        (path, origin)
        for path, origin in origins.items()
        if origin.layer == layer and path[:size] == target
    ]
    if below:
        return min(below, key=lambda item: (item[1].line, item[1].column))
    for end in range(size - 1, 0, -1):
        origin = origins.get(target[:end])
        if origin is not None and origin.layer == layer:
            return target[:end], origin
    return None


def lookup(document: Any, tokens: Iterable[str | int]) -> Any:
    """The value at a path of a document, or :data:`MISSING`; ``spec.rules`` are addressed by
    rule name, other lists by index."""
    value = document
    parents: list[str | int] = []
    for token in tokens:
        if isinstance(value, Mapping):
            value = value.get(str(token), MISSING)
        elif isinstance(value, list):
            value = _item(value, token, by_name=parents == ["spec", "rules"])
        else:
            return MISSING
        if value is MISSING:
            return MISSING
        parents.append(token)
    return value


def _item(items: list[Any], token: str | int, *, by_name: bool) -> Any:
    if by_name and isinstance(token, str):
        return next((r for r in items if isinstance(r, dict) and r.get("name") == token), MISSING)
    text = str(token)
    if text.isdigit() and int(text) < len(items):
        return items[int(text)]
    return MISSING


def _document_path(document: Any, tokens: tuple[str, ...]) -> JsonPath:
    """A pointer's tokens as a path of the document (a rule name becomes its index)."""
    if tokens[:2] == ("spec", "rules") and len(tokens) > 2:
        rules = document.get("spec", {}).get("rules", [])
        for index, rule in enumerate(rules):
            if rule.get("name") == tokens[2]:
                return ("spec", "rules", index, *tokens[3:])
    return tuple(int(t) if t.isdigit() else t for t in tokens)


def nearest(origins: Mapping[JsonPath, Origin], path: JsonPath) -> Origin | None:
    """The origin of ``path`` or of its nearest ancestor that has one."""
    for end in range(len(path), -1, -1):
        found = origins.get(path[:end])
        if found is not None:
            return found
    return None


# --- the canonical form ------------------------------------------------------------------------


def normalize(spec: dict[str, Any]) -> None:
    """The canonical form of ``spec.validators`` and ``spec.locked``: expressions without
    surrounding whitespace, locks sorted (a set), empty sections dropped so that a policy
    without guardrails keeps the digest it had before guardrails existed."""
    validators = spec.get("validators")
    if validators:
        spec["validators"] = [
            {**entry, "expression": entry["expression"].strip()} for entry in validators
        ]
    else:
        spec.pop("validators", None)
    locked = spec.get("locked")
    if locked:
        spec["locked"] = sorted(set(locked))
    else:
        spec.pop("locked", None)
