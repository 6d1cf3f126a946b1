"""Custom rules: compiled when the policy loads, evaluated after the built-in guard, cached.

A rule reads the variables documented for its check (``schemas/rule-variables.v1.schema.json``).
Only the variables an expression reads are built and converted to CEL, and only the fields it
reads of them when it reads fields. A rule that reads its check's per-item variable (collapse:
``canary``, staleness: ``span``) is evaluated once per item and matches when any item matches.

Rules only tighten. A matched rule in ``enforce`` mode with effect ``deny``, ``halt`` or ``pin``
refuses; ``warn`` and ``audit`` add a reason and leave the outcome; nothing turns a refusal into an
allow. A rule that errors, times out or gives something other than a bool counts as matched, with
reason ``rule_error:<name>`` (fail closed).

The result of a rule's condition is cached under the rule and a digest of exactly the values it
read, so a segment or span unchanged since the last cycle is not evaluated again.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from prunewarden import _resources as resources
from prunewarden._json import JsonPath
from prunewarden._schemas import apply_defaults, inline_refs
from prunewarden._stats import median, pstdev
from prunewarden.decision import HALT_ACTIONS, Action, Reason, Verdict
from prunewarden.errors import Problem
from prunewarden.rules import _cel as cel
from prunewarden.rules._model import DEFAULT_CACHE_SIZE, EFFECTS, PER_ITEM, Effect, Rule

if TYPE_CHECKING:
    from prunewarden._source import Parsed
    from prunewarden.inputs import CollapseRequest, EvictionRequest, Request, StalenessRequest
_PLURAL = {"canary": "canaries", "span": "spans"}


# --- variables and their schema ----------------------------------------------------------------


@cache
def variable_shapes(check: str) -> dict[str, cel.Shape]:
    """The variables of ``check`` with their JSON Schema, references resolved."""
    root = resources.schema("rule-variables")
    resolved = inline_refs(root["$defs"][check], root)
    return dict(resolved["properties"])


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


def _segment(r: EvictionRequest) -> dict[str, Any]:
    s = r.segment
    return {
        "id": s.id,
        "kind": s.kind,
        "text": s.text,
        "non_recoverable": s.non_recoverable,
        "score_dependencies": list(s.score_dependencies),
        "tombstone_written": s.tombstone_written,
        "tokens": s.tokens,
        "metadata": s.metadata,
    }


def _last_scores(r: CollapseRequest) -> dict[str, float]:
    return dict(r.history[-1].scores) if r.history else {}


def _baseline(r: CollapseRequest) -> dict[str, float]:
    if r.baseline is not None:
        return dict(r.baseline)
    return dict(r.history[0].scores) if r.history else {}


def _median(r: CollapseRequest) -> float | None:
    if not r.history:
        return None
    last = r.history[-1]
    pinned = set(last.pinned)
    live = [score for entry, score in last.scores.items() if entry not in pinned]
    return median(live or list(last.scores.values()))


def _span(span: Any, position: int) -> dict[str, Any]:
    return {
        "span_id": span.span_id,
        "text": span.text,
        "score": span.score,
        "text_sha256": span.text_sha256,
        "rewrite_count": span.rewrite_count,
        "derived_from": list(span.derived_from),
        "position": position,
    }


def _turn(r: StalenessRequest) -> dict[str, int] | None:
    if r.turn is None:
        return None
    return {
        "spans_modified": r.turn.spans_modified,
        "scores_invalidated": r.turn.scores_invalidated,
    }


_Builder = Callable[[Any], Any]

BUILDERS: dict[str, dict[str, _Builder]] = {
    "eviction": {
        "segment": _segment,
        "score": lambda r: r.score,
        "perturbed_score": lambda r: r.perturbed_score,
        "candidates": lambda r: sorted(r.eviction_candidates),
    },
    "collapse": {
        "cycle": lambda r: r.history[-1].cycle if r.history else None,
        "cycles": lambda r: len(r.history),
        "scores": _last_scores,
        "pinned": lambda r: list(r.history[-1].pinned) if r.history else [],
        "baseline": _baseline,
        "spread": lambda r: pstdev(r.history[-1].scores.values()) if r.history else None,
        "spreads": lambda r: [pstdev(s.scores.values()) for s in r.history],
        "median": _median,
    },
    "staleness": {
        "spans": lambda r: [_span(s, i) for i, s in enumerate(r.spans)],
        "turn": _turn,
        "turns": lambda r: [
            {"turn": t.turn, "mean_relevance": t.mean_relevance, "tokens": t.tokens}
            for t in r.turns
        ],
        "tombstones": lambda r: sorted(r.tombstones),
        "keep_top_k": lambda r: r.keep_top_k,
        "recompute_budget": lambda r: r.recompute_budget,
    },
}


def _canaries(r: CollapseRequest) -> list[tuple[str, dict[str, Any]]]:
    if not r.history:
        return []
    last, baseline = r.history[-1], _baseline(r)
    return [
        (c, {"id": c, "score": last.scores.get(c), "baseline": baseline.get(c)})
        for c in last.pinned
    ]


ITEMS: dict[str, Callable[[Any], list[tuple[str, dict[str, Any]]]]] = {
    "collapse": _canaries,
    "staleness": lambda r: [(s.span_id, _span(s, i)) for i, s in enumerate(r.spans)],
}


def build_variables(check: str, request: Request) -> dict[str, Any]:
    """Every variable of ``check`` as plain JSON-like values (the per-item variable holds the
    first item, when there is one); what ``rule-variables.v1`` describes."""
    values = {name: build(request) for name, build in BUILDERS[check].items()}
    if check in ITEMS:
        items = ITEMS[check](request)
        if items:
            values[PER_ITEM[check]] = items[0][1]
    return values


def _project(value: Any, fields: frozenset[str] | None) -> Any:
    if fields is None or not isinstance(value, Mapping):
        return value
    return {name: value[name] for name in sorted(fields) if name in value}


def _digest(value: Any) -> bytes:
    # repr is exact for the JSON-like values built here (floats repr round-trip) and cheaper
    # than canonical JSON; the digest bounds what the cache keeps per entry.
    return hashlib.blake2b(repr(value).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _Variables:
    """The variables of one request, built, converted and digested at most once each."""

    def __init__(self, check: str, request: Request, params: Any) -> None:
        self.check = check
        self.request = request
        self.params = params
        self._values: dict[str, Any] = {}
        self._cel: dict[tuple[str, frozenset[str] | None], Any] = {}
        self._digests: dict[tuple[str, frozenset[str] | None], bytes] = {}
        self._items: list[tuple[str, dict[str, Any]]] | None = None

    def items(self) -> list[tuple[str, dict[str, Any]]]:
        if self._items is None:
            self._items = ITEMS[self.check](self.request)
        return self._items

    def _value(self, name: str) -> Any:
        if name not in self._values:
            self._values[name] = BUILDERS[self.check][name](self.request)
        return self._values[name]

    def digest(
        self, reads: Mapping[str, frozenset[str] | None], item: int | None
    ) -> tuple[Any, ...]:
        """What the cache key needs: a digest per variable read (params are constants)."""
        parts: list[Any] = []
        per_item = PER_ITEM.get(self.check, "")
        for name in sorted(reads):
            fields = reads[name]
            if name == "params":
                continue
            if name == per_item and item is not None:
                parts.append(_digest(_project(self.items()[item][1], fields)))
                continue
            key = (name, fields)
            if key not in self._digests:
                self._digests[key] = _digest(_project(self._value(name), fields))
            parts.append(self._digests[key])
        return tuple(parts)

    def cel(self, reads: Mapping[str, frozenset[str] | None], item: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        per_item = PER_ITEM.get(self.check, "")
        for name, fields in reads.items():
            if name == "params":
                out[name] = self.params
            elif name == per_item and item is not None:
                out[name] = cel.to_cel(_project(self.items()[item][1], fields))
            else:
                key = (name, fields)
                if key not in self._cel:
                    self._cel[key] = cel.to_cel(_project(self._value(name), fields))
                out[name] = self._cel[key]
        return out


# --- the result cache --------------------------------------------------------------------------


class ResultCache:
    """A bounded, thread-safe LRU map from (rule, digest of what it read) to its result."""

    def __init__(self, size: int = DEFAULT_CACHE_SIZE) -> None:
        self.size = size
        self._data: OrderedDict[tuple[Any, ...], bool] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[Any, ...]) -> bool | None:
        if self.size <= 0:
            return None
        with self._lock:
            found = self._data.get(key)
            if found is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: tuple[Any, ...], matched: bool) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._data[key] = matched
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


# --- evaluation --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Outcome:
    matched: list[str]  # item ids (or [""] for a rule evaluated once)
    errors: list[tuple[str, str]]  # (item id, message)
    message: str = ""


class RuleSet:
    """The rules of one check, with their cache; shared by every thread using the engine."""

    def __init__(
        self,
        check: str,
        rules: Sequence[Rule],
        params: Mapping[str, Any],
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.check = check
        self.rules = tuple(rule for rule in rules if rule.check == check)
        self.cache = ResultCache(cache_size)
        self._params = cel.to_cel(dict(params))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def apply(self, verdict: Verdict, request: Request) -> Verdict:
        """The guard's verdict, tightened by the rules. Never raises."""
        if not self.rules:
            return verdict
        variables = _Variables(self.check, request, self._params)
        binding: list[Reason] = []
        advisory: list[Reason] = []
        actions: list[Action] = []
        for rule in self.rules:
            outcome = self._evaluate(rule, variables)
            for reason in _reasons(rule, outcome):
                refuses = rule.mode == "enforce" and rule.effect != "warn"
                (binding if refuses else advisory).append(reason)
                if refuses:
                    actions.extend(_actions(rule, request))
        if not binding and not advisory:
            return verdict
        merged_actions = list(verdict.actions)
        for action in actions:
            if action not in merged_actions:
                merged_actions.append(action)
        if binding and not verdict.refused:
            # A rule refused what the guard allowed: its reasons lead, the guard's follow.
            kept = _everything(request) if verdict.kept is not None else None
            return Verdict(
                True,
                [*binding, *verdict.reasons, *advisory],
                merged_actions,
                kept=kept,
                evicted=() if kept is not None else None,
            )
        return Verdict(
            verdict.refused,
            [*verdict.reasons, *binding, *advisory],
            merged_actions,
            kept=verdict.kept,
            evicted=verdict.evicted,
        )

    def _evaluate(self, rule: Rule, variables: _Variables) -> _Outcome:
        outcome = _Outcome([], [])
        deadline = cel.Deadline(rule.timeout)
        try:
            items: list[tuple[str, int | None]] = (
                [(item_id, i) for i, (item_id, _) in enumerate(variables.items())]
                if rule.per_item
                else [("", None)]
            )
        except Exception as exc:  # noqa: BLE001 - fail closed: a rule that cannot run matched
            outcome.errors.append(("", f"its variables could not be built ({type(exc).__name__})"))
            return outcome
        first_match: int | None = None
        for item_id, item in items:
            try:
                matched = self._condition(rule, variables, item, deadline)
            except cel.EvaluationError as exc:
                outcome.errors.append((item_id, str(exc)))
                if deadline.expired():
                    break
                continue
            except Exception as exc:  # noqa: BLE001 - fail closed, as above
                reason = f"its variables could not be built ({type(exc).__name__}: {exc})"
                outcome.errors.append((item_id, reason[:200]))
                continue
            if matched:
                outcome.matched.append(item_id)
                if first_match is None:
                    first_match = item if item is not None else -1
        if outcome.matched:
            outcome.message = self._message(rule, variables, first_match)
        return outcome

    def _condition(
        self, rule: Rule, variables: _Variables, item: int | None, deadline: cel.Deadline
    ) -> bool:
        reads = rule.when.reads
        key = (rule.index, rule.name, *variables.digest(reads, item))
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        try:
            matched = cel.evaluate_bool(rule.when, variables.cel(reads, item), deadline=deadline)
        except cel.EvaluationError as exc:
            if str(exc) == "timed out":
                msg = f"timed out (timeout_ms: {rule.timeout * 1000:g})"
                raise cel.EvaluationError(msg) from None
            raise
        self.cache.put(key, matched)
        return matched

    def _message(self, rule: Rule, variables: _Variables, item: int | None) -> str:
        if rule.message_expression is None:
            return rule.message or f"rule {rule.name!r} matched"
        position = None if item is None or item < 0 else item
        try:
            reads = rule.message_expression.reads
            return cel.evaluate_text(
                rule.message_expression,
                variables.cel(reads, position),
                deadline=cel.Deadline(rule.timeout),
            )
        except Exception as exc:  # noqa: BLE001 - the rule matched; only its wording failed
            return f"rule {rule.name!r} matched (its message_expression failed: {exc})"


def _reasons(rule: Rule, outcome: _Outcome) -> list[Reason]:
    reasons = []
    noun = rule.per_item or ""
    base: dict[str, Any] = {"rule": rule.name, "effect": rule.effect, "mode": rule.mode}
    suffix = " (audit: not enforced)" if rule.mode == "audit" else ""
    if outcome.matched:
        detail = dict(base)
        message = outcome.message
        if noun:
            detail["items"] = outcome.matched
            message = f"{message} ({_PLURAL[noun]}: {_names(outcome.matched)})"
        reasons.append(Reason(f"rule:{rule.name}", message + suffix, detail))
    if outcome.errors:
        item_id, error = outcome.errors[0]
        detail = {**base, "error": error}
        where = f" on {noun} {item_id!r}" if noun and item_id else ""
        if noun:
            detail["items"] = [i for i, _ in outcome.errors]
        message = f"rule {rule.name!r} failed{where}: {error}; counted as matched"
        reasons.append(Reason(f"rule_error:{rule.name}", message + suffix, detail))
    return reasons


def _actions(rule: Rule, request: Request) -> tuple[Action, ...]:
    if rule.effect == "halt":
        return HALT_ACTIONS
    if rule.effect == "pin":
        return (Action("pin", (request.segment.id,)),)  # type: ignore[union-attr]
    return ()


def _everything(request: Request) -> tuple[str, ...]:
    spans = getattr(request, "spans", ())
    return tuple(span.span_id for span in spans)


def _names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# --- loading -----------------------------------------------------------------------------------


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
    return tuple(rules), problems


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
    compiled: dict[str, cel.Expression] = {}
    expressions: tuple[tuple[str, cel.Result], ...] = (
        ("when", "bool"),
        ("message_expression", "string"),
    )
    for key, result in expressions:
        source = raw.get(key)
        if not isinstance(source, str) or not source.strip():
            continue  # absent, or the schema reports it
        try:
            compiled[key] = cel.compile_expression(
                source.strip(), variables, result=result, constants={"params": params}
            )
        except cel.ExpressionError as exc:
            problems.extend(parsed.problem((*path, key), p.describe()) for p in exc.problems)
    when, wording = compiled.get("when"), compiled.get("message_expression")
    if problems or when is None or (has_expression and wording is None):
        return None, problems
    defaults = apply_defaults(_rule_schema(), raw)
    text = raw.get("message")
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
    )
    return rule, problems


@cache
def _rule_schema() -> dict[str, Any]:
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
        schema = _rule_schema()
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
