"""Every limit is stated once, agrees with the schemas, and is enforced with a clear error."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from prunewarden import Engine, InputError, PolicyError, limits, load_policy, parse_policy
from prunewarden._resources import schema
from prunewarden._source import parse_json
from prunewarden.cli._main import run
from prunewarden.limits import (
    MAX_ENTRIES,
    MAX_EXPRESSION_CHARS,
    MAX_ID_CHARS,
    MAX_IDS,
    MAX_INPUT_CHARS,
    MAX_INPUT_DEPTH,
    MAX_INTEGER_DIGITS,
    MAX_KIND_CHARS,
    MAX_METADATA_ENTRIES,
    MAX_POLICY_BYTES,
    MAX_PROBLEMS,
    MAX_RULES,
    MAX_SEGMENTS,
    MAX_SNAPSHOTS,
    MAX_SPANS,
    MAX_TURNS,
    MAX_YAML_DEPTH,
    SCHEMA_LIMITS,
)
from prunewarden.rules import _compiler

ROOT = Path(__file__).resolve().parent.parent
SIZE_KEYWORDS = ("maxItems", "maxLength", "maxProperties")
HEAD = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: limits, version: 1.0.0}\n"


def _keywords(node: Any, pointer: str = "") -> dict[str, int]:
    """Every size keyword in a schema, by JSON pointer."""
    found: dict[str, int] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{pointer}/{key}"
            if key in SIZE_KEYWORDS and isinstance(value, int):
                found[here] = value
            else:
                found.update(_keywords(value, here))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.update(_keywords(value, f"{pointer}/{i}"))
    return found


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.default(logger=_Discard())


class _Discard:
    def info(self, event: str, **fields: Any) -> None:
        pass


class TestOnePlace:
    @pytest.mark.parametrize(
        "name", ["input", "policy", "rule-variables", "server-config", "tenants", "trace"]
    )
    def test_schema_limits_are_the_module_limits(self, name: str) -> None:
        """Every size keyword of the schema is listed in SCHEMA_LIMITS, with the same value."""
        in_schema = _keywords(schema(name))
        listed = {
            pointer: value for (where, pointer), value in SCHEMA_LIMITS.items() if where == name
        }
        assert in_schema == listed

    def test_cel_states_the_expression_limit(self) -> None:
        """The rule compiler enforces the expression size limit this module names."""
        assert _compiler.MAX_EXPRESSION_CHARS == MAX_EXPRESSION_CHARS

    def test_every_limit_is_documented(self) -> None:
        """docs/limits.md names every limit of prunewarden.limits."""
        text = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
        names = [n for n in vars(limits) if n.startswith("MAX_")]
        assert names
        assert [n for n in names if n not in text] == []


class TestPolicyLimits:
    def test_file_size(self, tmp_path: Path) -> None:
        """A policy file over the size limit is refused, naming the limit."""
        path = tmp_path / "big.yaml"
        path.write_text(HEAD + "#" * MAX_POLICY_BYTES + "\n", encoding="utf-8")
        with pytest.raises(PolicyError) as info:
            load_policy(path)
        assert info.value.problems[0].message == (
            f"cannot read: file is larger than the limit of {MAX_POLICY_BYTES} bytes"
        )

    def test_endless_device_is_refused_unread(self) -> None:
        """A policy path that never ends (a device) is refused before a byte is read."""
        with pytest.raises(PolicyError, match="a character device, not a regular file"):
            load_policy(Path("/dev/zero"))

    def test_yaml_nesting(self) -> None:
        """Nesting deeper than MAX_YAML_DEPTH is refused."""
        deep = "[" * (MAX_YAML_DEPTH + 5) + "]" * (MAX_YAML_DEPTH + 5)
        with pytest.raises(PolicyError, match=f"nested deeper than {MAX_YAML_DEPTH} levels"):
            parse_policy(HEAD + f"spec: {{params: {{deep: {deep}}}}}\n")

    def test_number_of_rules(self) -> None:
        """More than MAX_RULES rules are refused at $.spec.rules."""
        rule = {"check": "eviction", "when": "score < 0.1", "effect": "warn", "message": "m"}
        rules = [{"name": f"r{i}", **rule} for i in range(MAX_RULES + 1)]
        text = HEAD + yaml.safe_dump({"spec": {"rules": rules}})
        with pytest.raises(PolicyError) as info:
            parse_policy(text)
        (problem,) = info.value.problems
        assert (problem.path, problem.message) == (
            "$.spec.rules",
            f"{MAX_RULES + 1} items, more than the limit of {MAX_RULES}",
        )

    def test_param_too_large_for_a_double(self) -> None:
        """Params reach rules as doubles: an integer beyond a double's range is refused."""
        rule = {"name": "r", "check": "eviction", "when": "score < params.low", "effect": "warn"}
        spec = {"params": {"low": 10**400}, "rules": [{**rule, "message": "m"}]}
        with pytest.raises(PolicyError) as info:
            parse_policy(HEAD + yaml.safe_dump({"spec": spec}))
        (problem,) = info.value.problems
        assert problem.path == "$.spec.params.low"
        assert problem.message.endswith("is too large for a number in rules")

    def test_expression_size(self) -> None:
        """A rule expression longer than MAX_EXPRESSION_CHARS is refused, naming the limit."""
        when = "score < 0.1" + " || score < 0.1" * (MAX_EXPRESSION_CHARS // 14)
        rule = {"name": "long", "check": "eviction", "when": when, "effect": "warn", "message": "m"}
        with pytest.raises(PolicyError) as info:
            parse_policy(HEAD + yaml.safe_dump({"spec": {"rules": [rule]}}))
        (problem,) = info.value.problems
        assert problem.path == "$.spec.rules[0].when"
        assert f"the limit is {MAX_EXPRESSION_CHARS}" in problem.message


def _eviction(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "check": "eviction",
        "segment": {"id": "s", "kind": "turn"},
        "score": 0.5,
    }
    document.update(changes)
    return document


def _collapse(snapshots: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    return {"check": "collapse", "history": snapshots, **changes}


def _staleness(**changes: Any) -> dict[str, Any]:
    return {"check": "staleness", "spans": [], "keep_top_k": 1, **changes}


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


SPAN = {"span_id": "a", "text": "", "score": None, "text_sha256": ""}
TURN = {"turn": 1, "mean_relevance": 0.5, "tokens": 1}
MANY_IDS = [f"i{n}" for n in range(MAX_IDS + 1)]
MANY_SCORES = {f"e{n}": 0.5 for n in range(MAX_ENTRIES + 1)}

# name: (document, JSON path of the problem, message)
OVER: dict[str, tuple[dict[str, Any], str, str]] = {
    "snapshots": (
        _collapse([{"cycle": 1, "scores": {"a": 0.5}}] * (MAX_SNAPSHOTS + 1)),
        "$.history",
        f"{MAX_SNAPSHOTS + 1} items, more than the limit of {MAX_SNAPSHOTS}",
    ),
    "entries": (
        _collapse([{"cycle": 1, "scores": MANY_SCORES}]),
        "$.history[0].scores",
        f"{MAX_ENTRIES + 1} entries, more than the limit of {MAX_ENTRIES}",
    ),
    "baseline": (
        _collapse([], baseline=MANY_SCORES),
        "$.baseline",
        f"{MAX_ENTRIES + 1} entries, more than the limit of {MAX_ENTRIES}",
    ),
    "pinned": (
        _collapse([{"cycle": 1, "scores": {"a": 0.5}, "pinned": MANY_IDS}]),
        "$.history[0].pinned",
        f"{MAX_IDS + 1} items, more than the limit of {MAX_IDS}",
    ),
    "candidates": (
        _eviction(eviction_candidates=MANY_IDS),
        "$.eviction_candidates",
        f"{MAX_IDS + 1} items, more than the limit of {MAX_IDS}",
    ),
    "dependencies": (
        _eviction(segment={"id": "s", "kind": "turn", "score_dependencies": MANY_IDS}),
        "$.segment.score_dependencies",
        f"{MAX_IDS + 1} items, more than the limit of {MAX_IDS}",
    ),
    "metadata": (
        _eviction(segment={"id": "s", "kind": "t", "metadata": dict.fromkeys(MANY_IDS[:257])}),
        "$.segment.metadata",
        f"{MAX_METADATA_ENTRIES + 1} entries, more than the limit of {MAX_METADATA_ENTRIES}",
    ),
    "spans": (
        _staleness(spans=[SPAN] * (MAX_SPANS + 1)),
        "$.spans",
        f"{MAX_SPANS + 1} items, more than the limit of {MAX_SPANS}",
    ),
    "derived-from": (
        _staleness(spans=[{**SPAN, "derived_from": MANY_IDS}]),
        "$.spans[0].derived_from",
        f"{MAX_IDS + 1} items, more than the limit of {MAX_IDS}",
    ),
    "turns": (
        _staleness(turns=[TURN] * (MAX_TURNS + 1)),
        "$.turns",
        f"{MAX_TURNS + 1} items, more than the limit of {MAX_TURNS}",
    ),
    "tombstones": (
        _staleness(tombstones=MANY_IDS),
        "$.tombstones",
        f"{MAX_IDS + 1} items, more than the limit of {MAX_IDS}",
    ),
    "id-length": (
        _eviction(segment={"id": "x" * (MAX_ID_CHARS + 1), "kind": "turn"}),
        "$.segment.id",
        f"is {MAX_ID_CHARS + 1} characters long, more than the limit of {MAX_ID_CHARS}",
    ),
    "kind-length": (
        _eviction(segment={"id": "s", "kind": "k" * (MAX_KIND_CHARS + 1)}),
        "$.segment.kind",
        f"is {MAX_KIND_CHARS + 1} characters long, more than the limit of {MAX_KIND_CHARS}",
    ),
    "depth": (
        _eviction(segment={"id": "s", "kind": "t", "text": _nested(MAX_INPUT_DEPTH)}),
        "$.segment.text" + "[0]" * (MAX_INPUT_DEPTH - 2),
        f"document refused: nested deeper than {MAX_INPUT_DEPTH} levels",
    ),
    "decimal": (
        _staleness(keep_top_k=Decimal("NaN")),
        "$.keep_top_k",
        "Decimal('NaN') is not a JSON number (int or float)",
    ),
    "integer-digits": (
        _eviction(segment={"id": "s", "kind": "t", "tokens": 10**MAX_INTEGER_DIGITS}),
        "$.segment.tokens",
        f"an integer of more than {MAX_INTEGER_DIGITS} digits",
    ),
}


class TestInputLimits:
    @pytest.mark.parametrize("name", list(OVER))
    def test_over_the_limit(self, engine: Engine, name: str) -> None:
        """A document over a limit is an input error at the culprit, naming the limit."""
        document, path, message = OVER[name]
        with pytest.raises(InputError) as info:
            engine.evaluate(document)
        (problem,) = info.value.problems
        assert problem.path == path
        assert problem.message.endswith(message)

    @pytest.mark.parametrize(
        "document",
        [
            _collapse([{"cycle": c, "scores": {"a": 0.5}} for c in range(MAX_SNAPSHOTS)]),
            _eviction(segment={"id": "x" * MAX_ID_CHARS, "kind": "k" * MAX_KIND_CHARS}),
            _staleness(turns=[{**TURN, "turn": t} for t in range(MAX_TURNS)]),
        ],
        ids=["snapshots", "id-and-kind-length", "turns"],
    )
    def test_at_the_limit(self, engine: Engine, document: dict[str, Any]) -> None:
        """A document exactly at a limit decides."""
        assert engine.evaluate(document).check == document["check"]

    def test_json_text_size(self) -> None:
        """JSON text over MAX_INPUT_CHARS is refused before it is parsed."""
        text = " " * MAX_INPUT_CHARS + "{}"
        _, problems = parse_json(text, "big.json")
        assert [p.message for p in problems] == [
            f"document is larger than the limit of {MAX_INPUT_CHARS} characters"
        ]

    def test_json_text_nesting(self, tmp_path: Path) -> None:
        """JSON text nested beyond what the parser can hold is an input error, exit 2."""
        path = tmp_path / "deep.json"
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        assert run(["evaluate", str(path)], out, err) == 2
        assert err.getvalue() == f"{path}: $: invalid JSON: nested too deeply\n"

    def test_segments_in_a_window(self, engine: Engine) -> None:
        """A pruning-pass window of more than MAX_SEGMENTS segments is refused at $.segments."""
        segment = {"id": "s", "kind": "turn", "score": 0.5}
        window = {"segments": [segment] * (MAX_SEGMENTS + 1), "free_tokens": 1}
        with pytest.raises(InputError) as info:
            engine.plan(window)
        (problem,) = info.value.problems
        assert (problem.path, problem.message) == (
            "$.segments",
            f"{MAX_SEGMENTS + 1} items, more than the limit of {MAX_SEGMENTS}",
        )

    def test_segments_in_a_pass(self, engine: Engine) -> None:
        """A pass of more than MAX_SEGMENTS segments is refused before any item is read."""
        item = {"segment": {"id": "s", "kind": "turn"}, "score": 0.5}
        with pytest.raises(InputError) as info:
            engine.authorize_evictions([item] * (MAX_SEGMENTS + 1))
        (problem,) = info.value.problems
        assert (problem.path, problem.message) == (
            "$.evictions",
            f"{MAX_SEGMENTS + 1} segments in one pass, more than the limit of {MAX_SEGMENTS}",
        )


class TestReports:
    def test_the_more_problems_note_is_printed_first(self, tmp_path: Path) -> None:
        """A document with more than MAX_PROBLEMS problems: the note leads the report (it is
        located at 0:0, before every line), then the first MAX_PROBLEMS problems."""
        document = {"check": "eviction", **{f"k{i}": 1 for i in range(MAX_PROBLEMS + 20)}}
        path = tmp_path / "many.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        err = io.StringIO()
        assert run(["evaluate", str(path)], io.StringIO(), err) == 2
        lines = err.getvalue().splitlines()
        assert (
            lines[0] == f"{path}: $: more problems not shown: at most {MAX_PROBLEMS} are reported"
        )
        assert len(lines) == MAX_PROBLEMS + 1
