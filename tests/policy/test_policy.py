"""Loading policies: validation, located errors, defaults and identity."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prunewarden import PolicyError, load_builtin_policy, load_policy, parse_policy
from prunewarden.limits import MAX_YAML_NODES

HEADER = """\
apiVersion: prunewarden/v1
kind: Policy
metadata:
  name: test
  version: 1.0.0
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "p.yaml")
    return [str(p) for p in info.value.problems]


class TestDefaults:
    def test_minimal_policy_gets_the_seed_values(self) -> None:
        """A policy with only metadata carries every seed threshold."""
        spec = parse_policy(HEADER).spec
        assert spec.collapse.spread_floor == 0.08
        assert spec.collapse.consecutive_cycles == 2
        assert spec.collapse.canary_margin == 0.25
        assert spec.collapse.on_insufficient_history == "allow"
        assert spec.eviction.pinned_kinds == {"constraint", "definition", "negation"}
        assert spec.eviction.stability_delta == 0.25
        assert spec.eviction.require_tombstone is True
        assert spec.eviction.require_perturbation is True
        assert spec.staleness.max_rewrites_without_recompute == 2
        assert spec.staleness.drift_tolerance == 0.05
        assert spec.staleness.drift_consecutive_turns == 2
        assert spec.staleness.recompute_hops == 1
        assert (spec.scores.min, spec.scores.max) == (0.0, 1.0)

    def test_bundled_default_equals_the_implicit_defaults(self) -> None:
        """policies/default.yaml spells out exactly the schema defaults."""
        builtin = load_builtin_policy()
        implicit = parse_policy(HEADER.replace("name: test", "name: default"))
        assert builtin.spec == implicit.spec
        assert builtin.document["spec"] == implicit.document["spec"]

    def test_a_stated_value_overrides_only_itself(self) -> None:
        """Overriding one field leaves its siblings at their defaults."""
        spec = parse_policy(HEADER + "spec:\n  collapse:\n    spread_floor: 0.05\n").spec
        assert spec.collapse.spread_floor == 0.05
        assert spec.collapse.canary_margin == 0.25


class TestIdentity:
    def test_digest_ignores_order_comments_and_formatting(self) -> None:
        """Reordered keys, comments and flow style give the same digest."""
        a = parse_policy(HEADER + "spec:\n  collapse: {spread_floor: 0.1, canary_margin: 0.2}\n")
        b = parse_policy(
            "kind: Policy  # the kind\napiVersion: prunewarden/v1\n"
            "spec:\n  collapse:\n    canary_margin: 0.2\n    spread_floor: 0.10\n"
            "metadata: {version: 1.0.0, name: test}\n"
        )
        assert a.digest == b.digest
        assert a.digest.startswith("sha256:")

    def test_digest_treats_implicit_and_explicit_defaults_alike(self) -> None:
        """Writing a default out does not change what the policy is."""
        implicit = parse_policy(HEADER)
        explicit = parse_policy(HEADER + "spec:\n  collapse:\n    spread_floor: 0.08\n")
        integer = parse_policy(HEADER + "spec:\n  scores: {min: 0, max: 1}\n")
        assert implicit.digest == explicit.digest == integer.digest

    def test_any_threshold_change_changes_the_digest(self) -> None:
        """Different behaviour, different digest."""
        assert (
            parse_policy(HEADER).digest
            != parse_policy(HEADER + "spec:\n  eviction: {stability_delta: 0.2}\n").digest
        )

    def test_pinned_kinds_order_does_not_matter(self) -> None:
        """pinned_kinds is a set: its order does not change the digest."""
        a = parse_policy(HEADER + "spec:\n  eviction: {pinned_kinds: [a, b]}\n")
        b = parse_policy(HEADER + "spec:\n  eviction: {pinned_kinds: [b, a]}\n")
        assert a.digest == b.digest

    def test_identity_names_name_and_version(self) -> None:
        """The identity carries the metadata's name and version."""
        policy = parse_policy(HEADER)
        assert policy.identity.to_dict() == {
            "name": "test",
            "version": "1.0.0",
            "digest": policy.digest,
        }


class TestErrors:
    def test_schema_error_is_located_with_path_and_value(self) -> None:
        """A bad threshold names file, line, column, JSON path and the value."""
        found = problems_of(HEADER + "spec:\n  collapse:\n    spread_floor: -0.1\n")
        assert found == [
            "p.yaml:8:19: $.spec.collapse.spread_floor: -0.1 is less than the minimum of 0"
        ]

    def test_every_problem_is_reported_sorted(self) -> None:
        """All problems of a file come at once, in line order."""
        found = problems_of(
            HEADER + "spec:\n  staleness:\n    recompute_hops: -1\n"
            "  collapse:\n    consecutive_cycles: 0\n    mode: sometimes\n"
        )
        assert [f.split(": ")[1] for f in found] == [
            "$.spec.staleness.recompute_hops",
            "$.spec.collapse.consecutive_cycles",
            "$.spec.collapse.mode",
        ]

    def test_unknown_field_points_at_its_key(self) -> None:
        """An unknown field is reported at the key, with the allowed names."""
        (found,) = problems_of(HEADER + "spec:\n  collapse:\n    spread_flor: 0.1\n")
        assert found.startswith("p.yaml:8:5: $.spec.collapse.spread_flor: unknown field")
        assert "spread_floor" in found

    def test_duplicate_keys_are_rejected(self) -> None:
        """PyYAML would keep the last duplicate silently; we refuse it."""
        (found,) = problems_of(HEADER + "spec:\n  collapse: {}\n  collapse: {}\n")
        assert found == (
            "p.yaml:8:3: $.spec.collapse: duplicate key 'collapse' (first defined at line 7)"
        )

    def test_missing_metadata_is_reported(self) -> None:
        """name and version are required."""
        found = problems_of("apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: x}\n")
        assert any("'version' is a required property" in f for f in found)

    def test_version_must_be_semver(self) -> None:
        """A float-looking version is not a semantic version."""
        found = problems_of(HEADER.replace("1.0.0", "'1.0'"))
        assert any("$.metadata.version" in f for f in found)

    def test_syntax_error_is_located(self) -> None:
        """Invalid YAML gives line and column."""
        (found,) = problems_of("apiVersion: [unclosed\nkind: Policy\n")
        assert found.startswith("p.yaml:2:5: $: invalid YAML: expected ',' or ']'")

    @pytest.mark.parametrize("text", ["", "# only a comment\n"])
    def test_empty_document_is_rejected(self, text: str) -> None:
        """An empty file is not a policy."""
        assert problems_of(text) == ["p.yaml:1:1: $: the document is empty"]

    @pytest.mark.parametrize(
        ("text", "shape"), [("- a\n- b\n", "a list"), ("API_KEY=sk-live-1\n", "a single value")]
    )
    def test_non_mapping_document_is_rejected_unquoted(self, text: str, shape: str) -> None:
        """A list or a scalar is not a policy, and the refusal does not quote it."""
        message = f"p.yaml:1:1: $: not a policy: the document is {shape}, not a mapping"
        assert problems_of(text) == [message]

    def test_score_range_must_be_ordered(self) -> None:
        """scores.min must be below scores.max."""
        (found,) = problems_of(HEADER + "spec:\n  scores: {min: 1, max: 0.5}\n")
        assert "$.spec.scores.max: 0.5 must be greater than min" in found

    def test_non_finite_numbers_are_rejected(self) -> None:
        """.nan and .inf never reach a threshold."""
        found = problems_of(HEADER + "spec:\n  collapse: {spread_floor: .nan}\n")
        assert any("nan is not a finite number" in f for f in found)

    def test_merge_keys_are_rejected(self) -> None:
        """YAML merge keys hide where a value came from."""
        found = problems_of(HEADER + "x: &a {mode: off}\nspec:\n  collapse: {<<: *a}\n")
        assert any("merge keys" in f for f in found)

    def test_non_string_keys_are_rejected(self) -> None:
        """JSON has string keys only."""
        found = problems_of(HEADER + "spec:\n  1: x\n")
        assert any("mapping key 1 is not a string" in f for f in found)

    def test_alias_bomb_is_refused_quickly(self) -> None:
        """A billion-laughs document is refused by the node limit, not expanded."""
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
        (found,) = problems_of("\n".join(lines) + "\n")
        assert f"more than {MAX_YAML_NODES} values" in found

    def test_deep_nesting_is_refused(self) -> None:
        """A deeply nested document is refused without a RecursionError."""
        (found,) = problems_of("a: " + "[" * 5000 + "]" * 5000 + "\n")
        assert "refused" in found

    def test_exponent_without_dot_is_a_number(self) -> None:
        """1e-3 is a number, as in JSON and YAML 1.2."""
        policy = parse_policy(HEADER + "spec:\n  collapse: {spread_floor: 1e-3}\n")
        assert policy.spec.collapse.spread_floor == 0.001

    def test_off_is_a_mode_not_a_boolean(self) -> None:
        """Unquoted off, on, yes and no are strings, as in YAML 1.2; true and false are booleans."""
        policy = parse_policy(
            HEADER + "  description: yes\nspec:\n  collapse: {mode: off}\n"
            "  eviction: {require_tombstone: false}\n"
        )
        assert policy.spec.collapse.mode == "off"
        assert policy.document["metadata"]["description"] == "yes"
        assert policy.spec.eviction.require_tombstone is False

    def test_dates_stay_strings(self) -> None:
        """An unquoted date in a description is text, as in JSON."""
        policy = parse_policy(HEADER + "  description: 2026-11-29\n")
        assert policy.document["metadata"]["description"] == "2026-11-29"


class TestFiles:
    def test_missing_file_is_a_policy_error(self, tmp_path: Path) -> None:
        """An unreadable path is reported like any other policy problem."""
        with pytest.raises(PolicyError, match="cannot read"):
            load_policy(tmp_path / "absent.yaml")

    def test_non_utf8_file_is_a_policy_error(self, tmp_path: Path) -> None:
        """Bytes that are not UTF-8 are refused with a clear message."""
        path = tmp_path / "latin.yaml"
        path.write_bytes(b"description: caf\xe9\n")
        with pytest.raises(PolicyError, match="not UTF-8"):
            load_policy(path)

    def test_oversized_file_is_refused(self, tmp_path: Path) -> None:
        """The size limit applies before parsing."""
        path = tmp_path / "big.yaml"
        path.write_text(HEADER + "  description: " + "x" * (1024 * 1024) + "\n")
        with pytest.raises(PolicyError, match="larger than the limit"):
            load_policy(path)

    def test_source_is_recorded(self, tmp_path: Path) -> None:
        """A loaded policy remembers its file."""
        path = tmp_path / "p.yaml"
        path.write_text(HEADER)
        assert load_policy(path).source == str(path)


class TestProperties:
    @settings(max_examples=100, deadline=None)
    @given(st.text(max_size=300))
    def test_any_text_is_a_policy_or_a_policy_error(self, text: str) -> None:
        """Arbitrary text never raises anything but PolicyError."""
        try:
            parse_policy(text, "fuzz.yaml")
        except PolicyError as exc:
            problems = exc.problems
        else:
            return
        assert problems
        assert all(str(p).startswith("fuzz.yaml") for p in problems)

    @settings(max_examples=50, deadline=None)
    @given(
        floor=st.floats(0, 1),
        cycles=st.integers(1, 1000),
        margin=st.floats(0, 1),
        kinds=st.lists(st.sampled_from(["a", "b", "c", "constraint"]), unique=True),
    )
    def test_loading_is_deterministic(
        self, floor: float, cycles: int, margin: float, kinds: list[str]
    ) -> None:
        """The same valid text always loads to the same digest and settings."""
        text = (
            HEADER + f"spec:\n  collapse: {{spread_floor: {floor!r}, consecutive_cycles: "
            f"{cycles}, canary_margin: {margin!r}}}\n  eviction: {{pinned_kinds: {kinds}}}\n"
        )
        first, second = parse_policy(text), parse_policy(text)
        assert first.digest == second.digest
        assert first.spec == second.spec
        assert first.spec.collapse.spread_floor == floor
