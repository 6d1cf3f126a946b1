"""Fuzzing: no policy or document, however malformed or hostile, crashes, hangs or allows.

Policies, documents of every check, JSON text through the command line, eviction passes and
pruning-pass windows.

Every generated case has a deadline, and the hostile documents a watchdog. Malformed input may only
end in the documented errors (``PolicyError``, ``InputError``, exit codes 2 and 3), and a document
the exact validator refuses is never decided. ``make fuzz`` runs the same properties with fifty
times the examples (``PRUNEWARDEN_FUZZ_SCALE=50``).
"""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.backends import BACKENDS, compiled_backend
from _support.generators import (
    edge_values,
    json_values,
    mutated,
    non_finite,
    paths,
    python_values,
    replace,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from prunewarden import Decision, Engine, InputError, Policy, PolicyError, parse_policy
from prunewarden._resources import schema
from prunewarden.cli._main import run
from prunewarden.inputs._parse import parse_request_exact
from prunewarden.limits import MAX_INPUT_DEPTH, MAX_PROBLEMS, MAX_YAML_NODES

ROOT = Path(__file__).resolve().parent.parent
POLICIES = sorted(
    [ROOT / "policies" / "default.yaml", *(ROOT / "examples" / "policies").glob("*.yaml")]
)
EXAMPLES = sorted((ROOT / "examples" / "inputs").glob("*.json"))
DOCUMENTS = [json.loads(p.read_text(encoding="utf-8")) for p in EXAMPLES]
DECISION = Draft202012Validator(schema("decision"))

SCALE = int(os.environ.get("PRUNEWARDEN_FUZZ_SCALE", "1"))


def fuzz(examples: int) -> settings:
    """``examples`` cases (times the scale), each within a deadline far above its cost."""
    return settings(
        max_examples=examples * SCALE,
        deadline=timedelta(seconds=2),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Fail instead of hanging: a TimeoutError once ``seconds`` have passed."""

    def expire(signum: int, frame: object) -> None:
        msg = f"still running after {seconds} s"
        raise TimeoutError(msg)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Discard:
    def info(self, event: str, **fields: Any) -> None:
        pass


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.default(logger=_Discard())


def load(text: str) -> Policy | None:
    """A policy, or None after a PolicyError whose every problem is located and worded."""
    try:
        return parse_policy(text, "fuzz.yaml")
    except PolicyError as exc:
        refused = exc
    assert refused.problems
    for problem in refused.problems:
        assert problem.file == "fuzz.yaml"
        assert problem.path.startswith("$")
        assert problem.message
    return None


def decide(engine: Engine, document: Any) -> Decision | None:
    """A decision valid under decision.v1, or None after an InputError with problems. A document
    the exact validator refuses is never decided."""
    try:
        decision = engine.evaluate(document)
    except InputError as exc:
        problems = exc.problems
        assert problems
        return None
    try:
        parse_request_exact(document, engine.policy.spec.scores)
    except InputError:
        pytest.fail(f"a malformed document was decided: {decision.outcome}")
    DECISION.validate(decision.to_dict())
    return decision


# --- Policies -------------------------------------------------------------------------------

yaml_text = st.text(alphabet=st.sampled_from(list("ab1:-[]{}&*!|>'\"#,?%@ \n\t.")), max_size=120)
policy_values = (
    json_values
    | edge_values
    | st.sampled_from(
        [
            "enforce",
            "audit",
            "off",
            "halt",
            "allow",
            "1.0.0",
            "x" * 64,
            0.08,
            -0.1,
            1e9,
            "score < 0.1",
            "score <",
            "segment.text.matches('(')",
            "1 / 0",
            "size(segment.text) > params.low",
            "[1, 2].all(x, x > 0)",
            "[[1]].all(x, x.all(y, y > 0))",
            "unknown_variable",
            "'a' + 1",
        ]
    )
)


@st.composite
def mutated_policies(draw: st.DrawFn) -> str:
    """A bundled or example policy with one value replaced, removed or added, as YAML."""
    document = yaml.safe_load(draw(st.sampled_from(POLICIES)).read_text(encoding="utf-8"))
    where = draw(st.sampled_from(paths(document)))
    match draw(st.sampled_from(["replace", "delete", "add"])):
        case "replace":
            document = replace(document, where, draw(policy_values))
        case "delete" if where:
            *parent, last = where
            container = _get(document, tuple(parent))
            pruned = (
                {k: v for k, v in container.items() if k != last}
                if isinstance(container, dict)
                else [v for i, v in enumerate(container) if i != last]
            )
            document = replace(document, tuple(parent), pruned)
        case "add" if isinstance(_get(document, where), dict):
            target = _get(document, where)
            key = draw(
                st.sampled_from(["mode", "rules", "params", "extra", "when"]) | st.text(max_size=4)
            )
            document = replace(document, where, {**target, key: draw(policy_values)})
        case _:
            pass
    return yaml.safe_dump(document, sort_keys=False)


@st.composite
def edited_policies(draw: st.DrawFn) -> str:
    """A bundled or example policy's text with a slice cut, text inserted or a line repeated."""
    text = draw(st.sampled_from(POLICIES)).read_text(encoding="utf-8")
    start = draw(st.integers(0, len(text)))
    match draw(st.sampled_from(["cut", "insert", "repeat"])):
        case "cut":
            return text[:start] + text[start + draw(st.integers(1, 40)) :]
        case "insert":
            return text[:start] + draw(yaml_text) + text[start:]
        case _:
            lines = text.splitlines(keepends=True)
            i = draw(st.integers(0, len(lines) - 1))
            return "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])


def _get(document: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        document = document[part]
    return document


class TestLoader:
    @fuzz(150)
    @given(text=yaml_text)
    def test_random_yaml(self, text: str) -> None:
        """Any text loads or is a located PolicyError."""
        load(text)

    @fuzz(150)
    @given(text=mutated_policies(), document=st.sampled_from(DOCUMENTS))
    def test_mutated_policies_load_and_decide(self, text: str, document: dict[str, Any]) -> None:
        """A mutated policy loads or is a PolicyError; one that loads builds an engine that
        decides or refuses the input, nothing else."""
        policy = load(text)
        if policy is not None:
            decide(Engine(policy, logger=_Discard()), document)

    @fuzz(150)
    @given(text=edited_policies())
    def test_edited_policy_text(self, text: str) -> None:
        """A policy text cut, extended or with a repeated line loads or is a PolicyError."""
        load(text)


# --- Input documents -----------------------------------------------------------------------


class TestDocuments:
    @fuzz(300)
    @given(document=mutated(json_values | edge_values | non_finite | python_values))
    def test_every_document_type(self, engine: Engine, document: Any) -> None:
        """Any document of any check, valid or with one thing wrong, is a valid decision or an
        InputError, and never a decision when the exact validator refuses it."""
        decide(engine, document)

    @fuzz(150)
    @given(document=mutated(json_values | edge_values | non_finite | python_values))
    def test_fallback_validator_gives_the_same_verdicts_and_errors(
        self, engine: Engine, document: Any
    ) -> None:
        """Without jsonschema-rs, the pure-Python validator gives every document the same
        outcome and reasons, or the same located problems."""
        verdicts: list[tuple[str, tuple[Any, ...]]] = []
        for backend in BACKENDS:
            with compiled_backend(backend):
                try:
                    decision = engine.evaluate(document)
                except InputError as exc:
                    verdicts.append(("refused", tuple(exc.problems)))
                else:
                    verdicts.append((decision.outcome, decision.codes))
        assert verdicts[0] == verdicts[1]

    @fuzz(150)
    @given(
        document=st.sampled_from(DOCUMENTS),
        cut=st.integers(0, 2000),
        insert=st.text(
            alphabet=st.sampled_from(list('{}[]",:0123456789.eE-+ aNnIfty')), max_size=8
        ),
    )
    def test_json_text_through_the_command_line(
        self, tmp_path_factory: pytest.TempPathFactory, document: Any, cut: int, insert: str
    ) -> None:
        """Damaged JSON text exits 0, 1 or 2, never another code; 2 prints nothing on stdout and
        one located line per problem on stderr."""
        text = json.dumps(document, indent=1)
        at = cut % (len(text) + 1)
        folder = tmp_path_factory.mktemp("fuzz")
        path = folder / "input.json"
        path.write_text(text[:at] + insert + text[at + len(insert) :], encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        code = run(["evaluate", "--audit-log", str(folder / "audit.jsonl"), str(path)], out, err)
        assert code in (0, 1, 2), err.getvalue()
        if code == 2:
            assert out.getvalue() == ""
            assert all(line.startswith(f"{path}") for line in err.getvalue().splitlines())

    @fuzz(150)
    @given(items=st.lists(mutated(json_values | edge_values), max_size=4))
    def test_eviction_passes(self, engine: Engine, items: list[Any]) -> None:
        """A pass of damaged items is decided whole or refused whole with an InputError."""
        passes = [
            {k: v for k, v in item.items() if k in ("segment", "score", "perturbed_score")}
            if isinstance(item, dict)
            else item
            for item in items
        ]
        try:
            decisions = engine.authorize_evictions(passes)
        except InputError as exc:
            problems = exc.problems
            assert problems
            return
        assert len(decisions) == len(passes)
        for decision in decisions:
            DECISION.validate(decision.to_dict())


WINDOWS = [
    json.loads(p.read_text(encoding="utf-8"))
    for p in sorted((ROOT / "examples" / "windows").glob("*.json"))
]


@st.composite
def mutated_windows(draw: st.DrawFn) -> Any:
    """A shipped pruning-pass window with one value replaced or removed."""
    document = draw(st.sampled_from(WINDOWS))
    where = draw(st.sampled_from(paths(document)))
    if where and draw(st.booleans()):
        *parent, last = where
        container = _get(document, tuple(parent))
        if isinstance(container, dict):
            return replace(
                document, tuple(parent), {k: v for k, v in container.items() if k != last}
            )
    return replace(document, where, draw(json_values | edge_values | non_finite))


class TestPlans:
    @fuzz(100)
    @given(document=mutated_windows())
    def test_damaged_windows(self, engine: Engine, document: Any) -> None:
        """A damaged window is planned or refused with an InputError, and every decision of a
        plan is a valid decision."""
        try:
            plan = engine.plan(document)
        except InputError as exc:
            problems = exc.problems
            assert problems
            return
        for decision in plan.decisions:
            DECISION.validate(decision.to_dict())


# --- Hostile documents ----------------------------------------------------------------------

BILLION_LAUGHS = "\n".join(
    [
        "apiVersion: prunewarden/v1",
        "kind: Policy",
        "metadata: {name: laughs, version: 1.0.0}",
        'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(
            f"{b}: &{b} [*{a}, *{a}, *{a}, *{a}, *{a}, *{a}, *{a}, *{a}, *{a}]"
            for a, b in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "",
    ]
)


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": [value]}
    return value


class TestHostile:
    def test_billion_laughs(self) -> None:
        """Nine levels of nine aliases (a billion values) are refused at the node limit."""
        with watchdog(10), pytest.raises(PolicyError) as info:
            parse_policy(BILLION_LAUGHS, "laughs.yaml")
        assert [p.message for p in info.value.problems] == [
            f"document refused: more than {MAX_YAML_NODES} values (after alias expansion)"
        ]

    @pytest.mark.parametrize("opener", ["[", "{a: ", "- "], ids=["flow-list", "flow-map", "block"])
    def test_deep_yaml(self, opener: str) -> None:
        """A policy nested a hundred thousand deep is refused, without exhausting the stack."""
        text = opener * 100_000
        with watchdog(10), pytest.raises(PolicyError) as info:
            parse_policy(text, "deep.yaml")
        assert info.value.problems[0].message.startswith(("document refused", "invalid YAML"))

    def test_deep_json_text(self, tmp_path: Path) -> None:
        """JSON text nested a hundred thousand deep exits 2 with one line."""
        path = tmp_path / "deep.json"
        path.write_text('{"a": [' * 100_000, encoding="utf-8")
        err = io.StringIO()
        with watchdog(10):
            assert run(["evaluate", str(path)], io.StringIO(), err) == 2
        assert len(err.getvalue().splitlines()) == 1

    def test_deep_python_document(self, engine: Engine) -> None:
        """A document built in Python nested a hundred thousand deep is an InputError."""
        document = {
            "check": "eviction",
            "segment": {"id": "s", "kind": "t", "metadata": _nested(100_000)},
            "score": 0.5,
        }
        with watchdog(10), pytest.raises(InputError) as info:
            engine.evaluate(document)
        assert info.value.problems[0].message == (
            f"document refused: nested deeper than {MAX_INPUT_DEPTH} levels"
        )

    def test_a_million_problems(self, engine: Engine) -> None:
        """A document with 200,000 unknown fields reports the first problems and stops."""
        document = {"check": "eviction", **{f"k{i}": 1 for i in range(200_000)}}
        with watchdog(10), pytest.raises(InputError) as info:
            engine.evaluate(document)
        assert len(info.value.problems) == MAX_PROBLEMS + 1
