"""Any document is a decision or an input error: properties over arbitrary and mutated input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import Decision, Engine, InputError
from prunewarden._resources import schema

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "inputs").glob("*.json"))

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
check_names = st.sampled_from(["collapse", "eviction", "staleness", "other"])


def _mutate(document: Any, path: list[Any], value: Any) -> Any:
    """Replace the value at a (possibly invalid) path, creating nothing."""
    if not path:
        return value
    head, *rest = path
    if isinstance(document, dict) and document:
        key = list(document)[head % len(document)]
        return {**document, key: _mutate(document[key], rest, value)}
    if isinstance(document, list) and document:
        i = head % len(document)
        return [*document[:i], _mutate(document[i], rest, value), *document[i + 1 :]]
    return value


def _decide(engine: Engine, document: Any) -> Decision | None:
    try:
        return engine.evaluate(document)
    except InputError as exc:
        problems = exc.problems
    assert problems
    return None


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.default(logger=_NullLogger())


class _NullLogger:
    def info(self, event: str, **fields: Any) -> None:
        pass


DECISION = Draft202012Validator(schema("decision"))


class TestProperties:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(check=check_names, body=st.dictionaries(st.text(max_size=20), json_values, max_size=6))
    def test_arbitrary_documents(self, engine: Engine, check: str, body: dict[str, Any]) -> None:
        """A random document gives a schema-valid decision or an InputError, nothing else."""
        decision = _decide(engine, {**body, "check": check})
        if decision is not None:
            DECISION.validate(decision.to_dict())

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        example=st.sampled_from(EXAMPLES),
        path=st.lists(st.integers(0, 50), max_size=5),
        value=json_values,
    )
    def test_mutated_examples(
        self, engine: Engine, example: Path, path: list[int], value: Any
    ) -> None:
        """Any one-value mutation of a valid example decides or is an input error; a mutation
        that makes the document malformed (a non-finite number, a bool score) never allows."""
        document = _mutate(json.loads(example.read_text()), path, value)
        decision = _decide(engine, document)
        if decision is None:
            return
        DECISION.validate(decision.to_dict())
        assert not _has_non_finite(document), "a non-finite number reached a decision"

    @settings(max_examples=100, deadline=None)
    @given(example=st.sampled_from(EXAMPLES))
    def test_valid_examples_are_schema_valid_and_decide(
        self, engine: Engine, example: Path
    ) -> None:
        """Every shipped example validates against input.v1 and yields a decision."""
        document = json.loads(example.read_text())
        Draft202012Validator(schema("input")).validate(document)
        assert _decide(engine, document) is not None


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


class TestMalformedNeverAllows:
    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), True, "0.1", None, 2.0, -0.5])
    def test_bad_eviction_score(self, engine: Engine, bad: Any) -> None:
        """A score that is not a finite number in range is an input error, never an allow."""
        document = json.loads((EXAMPLES[0].parent / "eviction-healthy.json").read_text())
        document["score"] = bad
        with pytest.raises(InputError) as info:
            engine.evaluate(document)
        assert info.value.problems[0].path == "$.score"
