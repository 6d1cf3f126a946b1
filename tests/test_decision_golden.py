"""Every decision of the golden cases, as ``decision.v1`` and as its audit record carries its
reasons, byte for byte: the text a reader sees never depends on how a value type is built or
when a reason's message is formatted.

``tests/cases/decisions.golden.jsonl`` holds one canonical JSON line per decision of the corpus
(``tests/cases/**``: every case decided plainly and with ``explain=True``, every plan case's
decisions), without the fields that change on every run or release (``decision_id``,
``evaluated_at``, ``pass_id``, ``engine_version``). After a deliberate change of what a
decision says, rewrite it with ``python tests/test_decision_golden.py`` and review the diff.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import yaml
from prunewarden import Decision, Engine, parse_policy

CASES = Path(__file__).parent / "cases"
GOLDEN = CASES / "decisions.golden.jsonl"
# Different on every run, or on every release; everything else of a decision is a function of
# its input and policy.
VOLATILE = ("decision_id", "evaluated_at", "pass_id", "engine_version")


def _engine(case: Mapping[str, Any], records: list[Mapping[str, Any]]) -> Engine:
    def keep(_: Decision, record: Mapping[str, Any]) -> None:
        records.append(record)

    if "policy" not in case:
        return Engine.default(on_decision=keep)
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "test", "version": "1.0.0"},
        "spec": dict(case["policy"]),
    }
    policy = parse_policy(yaml.safe_dump(document, sort_keys=False), "<test-policy>")
    return Engine(policy, on_decision=keep)


def _line(name: str, view: str, value: Any) -> bytes:
    return orjson.dumps({"case": name, "view": view, "value": value}, option=orjson.OPT_SORT_KEYS)


def _stable(decision: Decision) -> dict[str, Any]:
    document = decision.to_dict()
    for key in VOLATILE:
        document.pop(key, None)
    return document


def corpus_lines() -> Iterator[bytes]:
    """The corpus's decisions and logged reasons, one canonical line each, in a fixed order."""
    for path in sorted(CASES.glob("**/*.yaml")):
        if "policy_check" in path.parts:
            continue
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        name = f"{path.parent.name}/{path.stem}"
        records: list[Mapping[str, Any]] = []
        engine = _engine(case, records)
        if path.parent.name == "plan":
            for explain in (False, True):
                plan = engine.plan(case["input"], explain=explain)
                view = "plan explained" if explain else "plan"
                yield from (_line(name, view, _stable(d)) for d in plan.decisions)
            continue
        for explain in (False, True):
            decision = engine.evaluate(case["input"], explain=explain)
            yield _line(name, "explained" if explain else "decision", _stable(decision))
        yield from (_line(name, "record reasons", r["reasons"]) for r in records if "reasons" in r)


class TestGoldenDecisions:
    def test_every_decision_of_the_corpus_is_byte_identical(self) -> None:
        """Each decision of the corpus, and the reasons its record logs, match the golden
        lines byte for byte."""
        expected = GOLDEN.read_bytes().splitlines()
        actual = list(corpus_lines())
        assert len(actual) == len(expected)
        for want, got in zip(expected, actual, strict=True):
            assert got == want

    def test_the_golden_lines_cover_every_check_and_view(self) -> None:
        """The golden file holds decisions of every check, explained and not, and logged
        reasons, so that no kind of message goes unchecked."""
        lines = [orjson.loads(line) for line in GOLDEN.read_bytes().splitlines()]
        checks = {line["value"]["check"] for line in lines if isinstance(line["value"], dict)}
        views = {line["view"] for line in lines}
        assert checks == {"collapse", "eviction", "staleness", "transition"}
        assert views == {"decision", "explained", "record reasons", "plan", "plan explained"}


if __name__ == "__main__":
    GOLDEN.write_bytes(b"".join(line + b"\n" for line in corpus_lines()))
    sys.stdout.write(f"wrote {GOLDEN}\n")
