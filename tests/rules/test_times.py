"""duration(), timestamp() and the time-zone accessors: priced by their text, fail closed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from celpy.evaluation import base_functions
from prunewarden import Decision, Engine, parse_policy
from prunewarden.limits import MAX_TIME_TEXT_CHARS

HEADER = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: times, version: 1.0.0}\n"


class NullLogger:
    def info(self, event: str, **fields: Any) -> None:
        pass


def decide(when: str, text: str, **metadata: str) -> Decision:
    """The decision of one eviction rule ``when`` over a segment holding ``text``."""
    rule = {
        "name": "times",
        "check": "eviction",
        "when": when,
        "effect": "deny",
        "message": "m",
        "timeout_ms": 100,
    }
    spec = {"params": {"unused": 1}, "rules": [rule]}
    engine = Engine(parse_policy(HEADER + "spec: " + json.dumps(spec) + "\n"), logger=NullLogger())
    segment = {"id": "s1", "kind": "turn", "text": text, "tombstone_written": True}
    return engine.evaluate(
        {
            "check": "eviction",
            "segment": {**segment, "metadata": metadata} if metadata else segment,
            "score": 0.5,
            "perturbed_score": 0.5,
            "eviction_candidates": ["s1"],
        }
    )


@pytest.fixture
def parsers_never_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """cel-python's parsers wrapped to fail the test if a text over the limit reaches them
    (the policy's trial at load time parses a short sample)."""

    def guarded(name: str) -> Any:
        original = base_functions[name]

        def parser(*args: Any) -> Any:
            if any(isinstance(a, str) and len(a) > MAX_TIME_TEXT_CHARS for a in args):
                pytest.fail(f"a text over MAX_TIME_TEXT_CHARS reached cel-python's {name}")
            return original(*args)

        return parser

    for name in ("duration", "timestamp", "getHours"):
        monkeypatch.setitem(base_functions, name, guarded(name))


class TestPricedByLength:
    @pytest.mark.usefixtures("parsers_never_run")
    @pytest.mark.parametrize("size", [MAX_TIME_TEXT_CHARS + 1, 4_000_000])
    def test_a_long_duration_text_is_refused_before_it_is_parsed(self, size: int) -> None:
        """duration() over megabytes of input (7.7 s of CPU for 10 MB under timeout_ms: 100,
        then allow) fails closed before cel-python parses a character of it."""
        text = ("1s" * size)[:size]
        decision = decide('duration(segment.text) < duration("1s")', text)
        assert decision.outcome == "deny"
        assert decision.codes == ("rule_error:times",)
        assert decision.reasons[0].detail["error"] == (
            f"duration() on a text of {size} characters, more than MAX_TIME_TEXT_CHARS "
            f"({MAX_TIME_TEXT_CHARS}); refused before it ran"
        )

    @pytest.mark.usefixtures("parsers_never_run")
    def test_a_long_timestamp_text_is_refused_before_it_is_parsed(self) -> None:
        """timestamp() is priced the same way, and an || cannot absorb the refusal."""
        text = "2024-01-01T00:00:00" + "0" * 1_000_000 + "Z"
        decision = decide('timestamp(segment.text) < timestamp("2000-01-01T00:00:00Z")', text)
        assert decision.codes == ("rule_error:times",)
        assert "timestamp() on a text of 1000020 characters" in decision.reasons[0].detail["error"]
        absorbed = decide("timestamp(segment.text) == timestamp(segment.kind) || true", text)
        assert absorbed.codes == ("rule_error:times",)

    @pytest.mark.usefixtures("parsers_never_run")
    def test_a_long_time_zone_is_refused_before_it_is_looked_up(self) -> None:
        """A time zone taken from the input is a text parsed too."""
        when = 'timestamp("2024-01-01T00:00:00Z").getHours(segment.metadata.zone) == 1'
        decision = decide(when, "x", zone="Europe/" * 100_000)
        assert decision.codes == ("rule_error:times",)
        error = decision.reasons[0].detail["error"]
        assert error.startswith("getHours() on a time zone of 700000 characters")


class TestOrdinaryUse:
    @pytest.mark.parametrize(
        ("when", "outcome"),
        [
            ('duration(segment.text) > duration("1h")', "deny"),
            ('duration(segment.text) > duration("3h")', "allow"),
            ('timestamp("2024-06-01T12:30:00+02:00").getHours("Europe/Paris") == 12', "deny"),
            ('timestamp("2024-06-01T12:30:00Z") > timestamp("2024-01-01T00:00:00Z")', "deny"),
        ],
    )
    def test_short_texts_parse_as_before(self, when: str, outcome: str) -> None:
        """Durations, timestamps and zones of ordinary length keep cel-python's meaning."""
        assert decide(when, "2h45m").outcome == outcome

    def test_a_text_that_does_not_parse_is_not_quoted(self) -> None:
        """A segment's text that is no duration fails the rule without appearing in the
        decision (cel-python's message quoted it)."""
        private = "private patient note"
        decision = decide('duration(segment.text) < duration("1s")', private)
        assert decision.codes == ("rule_error:times",)
        error = decision.reasons[0].detail["error"]
        assert error == "duration() could not use its text (ValueError)"
        assert private not in json.dumps(decision.to_dict())
