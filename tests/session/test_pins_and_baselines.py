"""Rule pins bind a segment's whole text under one policy; baselines keep each canary's first
pinned score, forgetting the earliest unpinned canaries past the limit; the cusum sum counts
from the first full window."""

from __future__ import annotations

import json

from prunewarden import Engine, Policy, parse_policy
from prunewarden.inputs import Snapshot
from prunewarden.session._state import RulePins, remember_baseline


class TestRulePins:
    def test_a_pin_holds_for_the_same_text_only(self) -> None:
        """A pinned segment stays pinned while its text is unchanged, and not after."""
        pins = RulePins().with_pins("sha256:p1", {"s1": "keep me"})
        assert pins.holds("s1", "keep me")
        assert not pins.holds("s1", "keep me!")

    def test_an_unpinned_segment_is_not_held(self) -> None:
        """A segment no rule pinned is not held, whatever its text."""
        assert not RulePins().holds("s1", "")
        assert not RulePins("sha256:p1", {}).holds("s1", "keep me")

    def test_pins_of_the_same_policy_accumulate(self) -> None:
        """Pins made under the same policy are added to the earlier ones."""
        pins = RulePins().with_pins("sha256:p1", {"s1": "a"}).with_pins("sha256:p1", {"s2": "b"})
        assert (pins.policy, sorted(pins.segments)) == ("sha256:p1", ["s1", "s2"])

    def test_pins_of_another_policy_start_afresh(self) -> None:
        """A pin belongs to the policy whose rule made it: another policy's pins replace it."""
        pins = RulePins().with_pins("sha256:p1", {"s1": "a"}).with_pins("sha256:p2", {"s2": "b"})
        assert (pins.policy, list(pins.segments)) == ("sha256:p2", ["s2"])
        assert not pins.holds("s1", "a")

    def test_past_the_limit_the_earliest_pins_are_forgotten(self) -> None:
        """Past the limit the earliest pins go; a segment pinned again counts as the latest."""
        pins = RulePins().with_pins("p", {"a": "1", "b": "2", "c": "3"}, limit=3)
        pins = pins.with_pins("p", {"a": "1"}, limit=3)
        assert list(pins.segments) == ["b", "c", "a"]
        pins = pins.with_pins("p", {"d": "4"}, limit=3)
        assert list(pins.segments) == ["c", "a", "d"]

    def test_at_the_limit_nothing_is_forgotten(self) -> None:
        """Exactly `limit` pins are all kept."""
        pins = RulePins().with_pins("p", {"a": "1", "b": "2"}, limit=2)
        assert list(pins.segments) == ["a", "b"]


class TestBaselines:
    def test_the_first_pinned_score_is_kept(self) -> None:
        """A canary's baseline is its score when first seen pinned; later scores leave it."""
        first = remember_baseline({}, Snapshot(1, {"c": 0.9, "x": 0.1}, ("c",)))
        later = remember_baseline(first, Snapshot(2, {"c": 0.2}, ("c",)))
        assert (first, later) == ({"c": 0.9}, {"c": 0.9})

    def test_past_the_limit_unpinned_canaries_go_earliest_first(self) -> None:
        """Past the limit the canaries not pinned now are forgotten, the earliest first, and a
        pinned one is kept."""
        baseline = {"a": 0.1, "b": 0.2, "c": 0.3}
        updated = remember_baseline(baseline, Snapshot(4, {"a": 0.5, "d": 0.4}, ("a", "d")), 3)
        assert updated == {"a": 0.1, "c": 0.3, "d": 0.4}

    def test_two_over_the_limit_two_go(self) -> None:
        """Each canary over the limit is forgotten, no more."""
        baseline = {"a": 0.1, "b": 0.2}
        snapshot = Snapshot(3, {"c": 0.3, "d": 0.4}, ("c", "d"))
        assert remember_baseline(baseline, snapshot, 2) == {"c": 0.3, "d": 0.4}
        assert remember_baseline(baseline, snapshot, 4) == {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}


def cusum_policy() -> Policy:
    collapse = {
        "spread_floor_mode": "cusum",
        "consecutive_cycles": 2,
        "min_live_entries": 3,
        "cusum": {"slack": 0.0, "reference": {"first_cycles": 2, "prior_weight": 0}},
    }
    document = {
        "apiVersion": "prunewarden/v1",
        "kind": "Policy",
        "metadata": {"name": "cusum", "version": "1.0.0"},
        "spec": {"collapse": collapse},
    }
    return parse_policy(json.dumps(document), "<cusum-policy>")


class TestCusumCountsFromTheFirstFullWindow:
    def test_no_cycle_counts_before_consecutive_cycles_have_passed(self) -> None:
        """The cusum sum starts with cycle consecutive_cycles + 1: a narrower second cycle
        adds nothing, a narrower third one does (with exactly min_live_entries entries)."""
        session = Engine(cusum_policy()).session("s")
        for half_width in (0.3, 0.1):
            session.observe_cycle({"c": 0.55, "x": 0.5 - half_width, "y": 0.5 + half_width})
        assert session.state()["cusum"]["run"] == []
        assert session.state()["cusum"]["sum"] == 0.0
        session.observe_cycle({"c": 0.55, "x": 0.45, "y": 0.55})
        assert [step["cycle"] for step in session.state()["cusum"]["run"]] == [3]

    def test_a_cycle_with_too_few_entries_ends_the_run(self) -> None:
        """A cycle with fewer than min_live_entries entries cannot be judged: the run of
        cycles ends there, and the sum is kept."""
        session = Engine(cusum_policy()).session("s")
        for half_width in (0.3, 0.3, 0.1):
            session.observe_cycle({"c": 0.55, "x": 0.5 - half_width, "y": 0.5 + half_width})
        kept = session.state()["cusum"]["sum"]
        session.observe_cycle({"c": 0.55, "x": 0.5})
        assert session.state()["cusum"]["run"] == []
        assert session.state()["cusum"]["sum"] == kept
        assert kept > 0.0
