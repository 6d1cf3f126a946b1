"""Policies that extend policies: merge semantics, chains, provenance, and the guardrails."""

from __future__ import annotations

import copy
import hashlib
import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prunewarden import PolicyError, load_builtin_policy, load_policy, parse_policy
from prunewarden.policy._overlay import MAX_CHAIN, resolve_file
from prunewarden.policy._provenance import render_json, render_yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ROOT / "examples" / "deployments"


def policy(name: str, body: str = "", *, extends: str | None = None, version: str = "1.0.0") -> str:
    head = "apiVersion: prunewarden/v1\nkind: Policy\n"
    if extends is not None:
        head += f"extends: {extends}\n"
    head += f"metadata:\n  name: {name}\n  version: {version}\n"
    return head + textwrap.dedent(body).lstrip("\n")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    return [str(p) for p in info.value.problems]


def line_of(path: Path, needle: str) -> int:
    """The 1-based number of the line of ``path`` that contains ``needle`` (exactly one)."""
    return at(path, needle)[0]


def at(path: Path, needle: str) -> tuple[int, int]:
    """The 1-based line and column where ``needle`` starts in ``path`` (on exactly one line)."""
    lines = path.read_text().splitlines()
    found = [(i, text.index(needle) + 1) for i, text in enumerate(lines, 1) if needle in text]
    assert len(found) == 1, (needle, found)
    return found[0]


def where(path: Path, needle: str) -> str:
    """``FILE:LINE:COLUMN`` of ``needle`` in ``path``, as problems print it."""
    line, column = at(path, needle)
    return f"{path}:{line}:{column}"


BASE = """\
spec:
  collapse:
    spread_floor: 0.09
    canary_margin: 0.2
  eviction:
    pinned_kinds: [constraint, definition, negation, plan]
  params:
    negations: [never, do not]
    floor: 0.3
  rules:
    - name: pin-negations
      check: eviction
      when: score < 0.2 && contains_any(segment.text, params.negations)
      effect: pin
      message: states a negation
    - name: canary-floor
      check: collapse
      when: canary.score != null && canary.score < params.floor
      effect: halt
      message: canary below the floor
"""


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write(tmp_path, "base.yaml", policy("base", BASE))


class TestMerge:
    @pytest.mark.usefixtures("base")
    def test_maps_deep_merge_and_scalars_replace(self, tmp_path: Path) -> None:
        """An overlay's value replaces the base's; the base's siblings stay."""
        prod = write(
            tmp_path,
            "prod.yaml",
            policy("prod", "spec:\n  collapse:\n    spread_floor: 0.1\n", extends="base.yaml"),
        )
        spec = load_policy(prod).document["spec"]
        assert spec["collapse"]["spread_floor"] == 0.1
        assert spec["collapse"]["canary_margin"] == 0.2
        assert spec["collapse"]["consecutive_cycles"] == 2  # the schema's default

    @pytest.mark.usefixtures("base")
    def test_lists_replace(self, tmp_path: Path) -> None:
        """A list is one value: the overlay's replaces the base's entirely."""
        prod = write(
            tmp_path,
            "prod.yaml",
            policy(
                "prod",
                "spec:\n  eviction:\n    pinned_kinds: [constraint, negation]\n",
                extends="base.yaml",
            ),
        )
        assert load_policy(prod).spec.eviction.pinned_kinds == {"constraint", "negation"}

    @pytest.mark.usefixtures("base")
    def test_rules_merge_by_name(self, tmp_path: Path) -> None:
        """A rule named like an inherited one replaces it where it stood; others are appended."""
        prod = write(
            tmp_path,
            "prod.yaml",
            policy(
                "prod",
                """
                spec:
                  rules:
                    - name: long-segment
                      check: eviction
                      when: segment.tokens != null && segment.tokens > 500
                      effect: warn
                      message: long
                    - name: pin-negations
                      check: eviction
                      when: score < 0.3 && contains_any(segment.text, params.negations)
                      effect: pin
                      message: states a negation (prod)
                """,
                extends="base.yaml",
            ),
        )
        loaded = load_policy(prod)
        assert [r.name for r in loaded.rules] == ["pin-negations", "canary-floor", "long-segment"]
        replaced = loaded.document["spec"]["rules"][0]
        assert replaced["when"] == "score < 0.3 && contains_any(segment.text, params.negations)"
        assert replaced["message"] == "states a negation (prod)"

    @pytest.mark.usefixtures("base")
    def test_params_merge_per_name(self, tmp_path: Path) -> None:
        """params is a map: an overlay changes one param and keeps the others."""
        prod = write(
            tmp_path,
            "prod.yaml",
            policy("prod", "spec:\n  params:\n    floor: 0.25\n", extends="base.yaml"),
        )
        params = load_policy(prod).document["spec"]["params"]
        assert params == {"negations": ["never", "do not"], "floor": 0.25}

    def test_metadata_is_the_policys_own(self, tmp_path: Path) -> None:
        """Name, version and description are never inherited."""
        write(tmp_path, "base.yaml", policy("base", "") + "  description: the base\n")
        prod = write(tmp_path, "prod.yaml", policy("prod", "", extends="base.yaml"))
        document = load_policy(prod).document
        assert document["metadata"] == {"name": "prod", "version": "1.0.0"}
        assert "extends" not in document

    @pytest.mark.usefixtures("base")
    def test_resolved_digest_equals_the_flat_policys(self, tmp_path: Path) -> None:
        """The digest is over the merged document: the same content written flat digests alike,
        whatever files it came from."""
        prod = write(
            tmp_path,
            "prod.yaml",
            policy("prod", "spec:\n  collapse: {spread_floor: 0.1}\n", extends="base.yaml"),
        )
        flat = BASE.replace("spread_floor: 0.09", "spread_floor: 0.1")
        assert load_policy(prod).digest == parse_policy(policy("prod", flat)).digest

    def test_an_overlay_stating_nothing_changes_only_the_identity(
        self, tmp_path: Path, base: Path
    ) -> None:
        """An empty overlay resolves to the base's spec and rules."""
        prod = write(tmp_path, "prod.yaml", policy("prod", "", extends="base.yaml"))
        resolved, original = load_policy(prod), load_policy(base)
        assert resolved.document["spec"] == original.document["spec"]
        assert resolved.digest != original.digest  # the name is part of the content

    def test_extends_a_bundled_policy(self, tmp_path: Path) -> None:
        """builtin:default is the bundled policy; its source is named builtin:default."""
        prod = write(tmp_path, "prod.yaml", policy("prod", "", extends="builtin:default"))
        loaded = load_policy(prod)
        assert loaded.document["spec"] == load_builtin_policy().document["spec"]
        assert [s.path for s in loaded.sources] == [str(prod), "builtin:default"]

    def test_sources_name_the_chain_with_the_hash_of_each_file(
        self, tmp_path: Path, base: Path
    ) -> None:
        """Sources go from the policy to its root, each with the SHA-256 of its bytes."""
        mid = write(tmp_path, "teams/mid.yaml", policy("mid", "", extends="../base.yaml"))
        top = write(tmp_path, "teams/top.yaml", policy("top", "", extends="mid.yaml"))
        sources = load_policy(top, base_dirs=(tmp_path,)).sources
        assert [s.path for s in sources] == [str(top), str(mid), str(base)]
        for source, path in zip(sources, (top, mid, base), strict=True):
            assert source.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()

    def test_relative_extends_in_text_reads_from_the_named_folder(
        self, tmp_path: Path, base: Path
    ) -> None:
        """parse_policy resolves a relative extends against its filename's folder."""
        text = policy("prod", "", extends="base.yaml")
        assert parse_policy(text, str(tmp_path / "prod.yaml")).document["spec"]["collapse"][
            "spread_floor"
        ] == pytest.approx(0.09)
        assert base.exists()

    def test_decisions_carry_the_sources(self, tmp_path: Path, base: Path) -> None:
        """A decision names the policy's files beside its identity."""
        from prunewarden import Engine  # noqa: PLC0415 - only this test needs it

        prod = write(tmp_path, "prod.yaml", policy("prod", "", extends="base.yaml"))
        decision = Engine.from_file(prod, logger=_Quiet()).evaluate(
            json.loads((ROOT / "examples/inputs/eviction-healthy.json").read_text())
        )
        assert [s["path"] for s in decision.to_dict()["policy"]["sources"]] == [
            str(prod),
            str(base),
        ]


class _Quiet:
    def info(self, *args: Any, **kwargs: Any) -> None:
        pass


# Values an overlay may set, each in its schema's bounds.
_SETTINGS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "collapse": {
        "spread_floor": st.sampled_from([0.05, 0.08, 0.1, 0.125]),
        "consecutive_cycles": st.integers(1, 5),
        "mode": st.sampled_from(["enforce", "audit", "off"]),
    },
    "eviction": {
        "stability_delta": st.sampled_from([0.1, 0.2, 0.25]),
        "pinned_kinds": st.lists(
            st.sampled_from(["constraint", "definition", "negation", "plan"]),
            unique=True,
            max_size=4,
        ),
        "require_tombstone": st.booleans(),
    },
    "staleness": {"recompute_hops": st.integers(0, 3), "drift_tolerance": st.just(0.1)},
}
_SPECS = st.fixed_dictionaries(
    {},
    optional={
        section: st.fixed_dictionaries({}, optional=dict(fields))
        for section, fields in _SETTINGS.items()
    },
)


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class TestMergeProperties:
    @settings(
        max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(base_spec=_SPECS, over_spec=_SPECS)
    def test_a_chain_resolves_to_its_deep_merge(
        self, tmp_path: Path, base_spec: dict[str, Any], over_spec: dict[str, Any]
    ) -> None:
        """Any base and overlay resolve to the policy that states their deep merge, digest
        included."""
        dump = {"base": base_spec, "over": over_spec}
        write(tmp_path, "base.yaml", policy("base", yaml.safe_dump({"spec": dump["base"]})))
        top = write(
            tmp_path,
            "top.yaml",
            policy("top", yaml.safe_dump({"spec": dump["over"]}), extends="base.yaml"),
        )
        flat = parse_policy(
            policy("top", yaml.safe_dump({"spec": _deep_merge(base_spec, over_spec)}))
        )
        resolved = load_policy(top)
        assert resolved.document == flat.document
        assert resolved.digest == flat.digest


class TestChainProblems:
    def test_a_cycle_is_refused_at_the_extends_that_closes_it(self, tmp_path: Path) -> None:
        """a -> b -> a: reported at b's extends, naming the whole cycle."""
        a = write(tmp_path, "a.yaml", policy("a", "", extends="b.yaml"))
        b = write(tmp_path, "b.yaml", policy("b", "", extends="a.yaml"))
        assert problems_of(a) == [f"{b}:3:10: $.extends: extends cycle: {a} -> {b} -> {a}"]

    def test_a_policy_extending_itself_is_a_cycle(self, tmp_path: Path) -> None:
        """Extending oneself, by any spelling of the path, is refused."""
        a = write(tmp_path, "a.yaml", policy("a", "", extends="./sub/../a.yaml"))
        (tmp_path / "sub").mkdir()
        (found,) = problems_of(a)
        assert "extends cycle" in found

    def test_depth_is_bounded(self, tmp_path: Path) -> None:
        """A chain longer than MAX_CHAIN is refused where it grows too long."""
        write(tmp_path, "p0.yaml", policy("p0"))
        for i in range(1, MAX_CHAIN + 1):
            write(tmp_path, f"p{i}.yaml", policy(f"p{i}", "", extends=f"p{i - 1}.yaml"))
        assert load_policy(tmp_path / f"p{MAX_CHAIN - 1}.yaml").name == f"p{MAX_CHAIN - 1}"
        (found,) = problems_of(tmp_path / f"p{MAX_CHAIN}.yaml")
        assert found.endswith(f"$.extends: the extends chain is longer than {MAX_CHAIN} policies")

    def test_a_missing_base_is_reported_at_the_extends(self, tmp_path: Path) -> None:
        """The extends line names the file that cannot be read."""
        a = write(tmp_path, "a.yaml", policy("a", "", extends="nope.yaml"))
        assert problems_of(a) == [
            f"{a}:3:10: $.extends: {tmp_path / 'nope.yaml'}: cannot read: No such file or directory"
        ]

    @pytest.mark.parametrize("name", ["nope", "../default", "Default"])
    def test_an_unknown_builtin_is_refused(self, tmp_path: Path, name: str) -> None:
        """builtin: names a bundled policy, never a path."""
        a = write(tmp_path, "a.yaml", policy("a", "", extends=f"'builtin:{name}'"))
        (found,) = problems_of(a)
        assert f"no bundled policy named {name!r} (bundled: builtin:default)" in found

    def test_every_file_is_checked_on_its_own(self, tmp_path: Path) -> None:
        """Problems in the base and in the overlay are reported together, each in its file."""
        base = write(tmp_path, "base.yaml", policy("base", "spec:\n  collapse: {mode: maybe}\n"))
        top = write(
            tmp_path,
            "top.yaml",
            policy("top", "spec:\n  eviction: {stability_delta: 2}\n", extends="base.yaml"),
        )
        found = problems_of(top)
        assert [f.split(": ")[0] for f in found] == [where(base, "maybe"), where(top, "2}")]

    @pytest.mark.usefixtures("base")
    def test_a_rule_problem_in_the_merge_points_at_the_rule(self, tmp_path: Path) -> None:
        """An overlay's rule that does not compile is located in the overlay."""
        top = write(
            tmp_path,
            "top.yaml",
            policy(
                "top",
                """
                spec:
                  rules:
                    - {name: bad, check: eviction, when: 'scroe < 0.2', effect: deny, message: m}
                """,
                extends="base.yaml",
            ),
        )
        (found,) = problems_of(top)
        culprit = where(top, "'scroe")
        assert found.startswith(f"{culprit}: $.spec.rules[2].when: unknown variable 'scroe'")

    @pytest.mark.usefixtures("base")
    def test_an_overlay_may_not_repeat_a_rule_name(self, tmp_path: Path) -> None:
        """Two rules with one name in one overlay would silently merge: refused."""
        rule = "    - {name: x, check: eviction, when: 'score < 0.1', effect: warn, message: m}\n"
        top = write(
            tmp_path,
            "top.yaml",
            policy("top", "spec:\n  rules:\n" + rule + rule, extends="base.yaml"),
        )
        (found,) = problems_of(top)
        second = f"{top}:{top.read_text().splitlines().index(rule.rstrip()) + 2}:14"
        assert (
            found == f"{second}: $.spec.rules[1].name: duplicate rule name 'x' (first at rules[0])"
        )

    def test_semantic_checks_see_the_merge(self, tmp_path: Path) -> None:
        """A score range an overlay makes empty is refused at the value that now fails: the
        base's max, below the overlay's min."""
        base = write(
            tmp_path, "base.yaml", policy("base", "spec:\n  scores: {min: 0.0, max: 1.0}\n")
        )
        top = write(
            tmp_path,
            "top.yaml",
            policy("top", "spec:\n  scores: {min: 2.0}\n", extends="base.yaml"),
        )
        (found,) = problems_of(top)
        assert found == (
            f"{where(base, '1.0}')}: $.spec.scores.max: 1.0 must be greater than min (2.0)"
        )


class TestProvenance:
    @pytest.fixture
    def resolution(self, tmp_path: Path, base: Path) -> Any:
        write(
            tmp_path,
            "prod.yaml",
            policy(
                "prod",
                """
                spec:
                  collapse:
                    spread_floor: 0.1
                  rules:
                    - name: canary-floor
                      check: collapse
                      when: canary.score != null && canary.score < 0.25
                      effect: halt
                      message: prod floor
                """,
                extends=base.name,
            ),
        )
        return resolve_file(tmp_path / "prod.yaml")

    def test_each_value_knows_the_file_and_line_that_set_it(
        self, resolution: Any, tmp_path: Path, base: Path
    ) -> None:
        """Overlay, base and default values each have their origin (a default has none)."""
        prod = tmp_path / "prod.yaml"
        floor = resolution.origin(("spec", "collapse", "spread_floor"))
        assert (floor.file, floor.line) == (str(prod), line_of(prod, "spread_floor"))
        margin = resolution.origin(("spec", "collapse", "canary_margin"))
        assert (margin.file, margin.line) == (str(base), line_of(base, "canary_margin"))
        assert resolution.origin(("spec", "collapse", "consecutive_cycles")) is None

    def test_a_replaced_rule_is_the_overlays(self, resolution: Any, tmp_path: Path) -> None:
        """Every field of a rule replaced by name comes from the overlay; its defaults from
        nowhere."""
        prod = tmp_path / "prod.yaml"
        when = resolution.origin(("spec", "rules", 1, "when"))
        assert (when.file, when.line) == (str(prod), line_of(prod, "canary.score < 0.25"))
        assert resolution.origin(("spec", "rules", 1, "mode")) is None

    def test_the_sorted_kinds_keep_their_lines(self, tmp_path: Path) -> None:
        """Items of a list the canonical form sorts still point at their own lines."""
        path = write(
            tmp_path,
            "p.yaml",
            policy(
                "p", "spec:\n  eviction:\n    pinned_kinds:\n      - plan\n      - constraint\n"
            ),
        )
        resolution = resolve_file(path)
        kinds = resolution.policy.document["spec"]["eviction"]["pinned_kinds"]
        assert kinds == ["constraint", "plan"]
        origins = [resolution.origin(("spec", "eviction", "pinned_kinds", i)) for i in (0, 1)]
        assert [origin.line for origin in origins if origin is not None] == [
            line_of(path, "- constraint"),
            line_of(path, "- plan"),
        ]

    def test_yaml_rendering_annotates_every_value_and_loads_back(
        self, resolution: Any, tmp_path: Path
    ) -> None:
        """Each value line ends with its FILE:LINE or 'default'; the text is the policy."""
        text = render_yaml(resolution)
        prod = tmp_path / "prod.yaml"
        assert "spread_floor: 0.1" in text
        floor_line = next(line for line in text.splitlines() if "spread_floor:" in line)
        assert floor_line.endswith(f"# {prod}:{line_of(prod, 'spread_floor')}")
        cycles = next(line for line in text.splitlines() if "consecutive_cycles:" in line)
        assert cycles.endswith("# default")
        assert yaml.safe_load(text) == resolution.policy.document

    def test_without_defaults_only_what_files_set_is_shown(self, resolution: Any) -> None:
        """defaults=False leaves out every value no file set."""
        text = render_yaml(resolution, defaults=False)
        assert "consecutive_cycles" not in text
        assert "# default" not in text
        assert "spread_floor: 0.1" in text

    def test_json_rendering_has_provenance_by_pointer(
        self, resolution: Any, tmp_path: Path
    ) -> None:
        """JSON gives identity, sources, the document and an origin (or null) per pointer."""
        out = render_json(resolution)
        prod = tmp_path / "prod.yaml"
        assert out["policy"]["digest"] == resolution.policy.digest
        assert [s["path"] for s in out["policy"]["sources"]] == [
            str(prod),
            str(tmp_path / "base.yaml"),
        ]
        line, column = at(prod, "spread_floor")  # where the key that sets it is
        assert out["provenance"]["/spec/collapse/spread_floor"] == {
            "file": str(prod),
            "line": line,
            "column": column,
        }
        assert out["provenance"]["/spec/collapse/consecutive_cycles"] is None
        assert out["document"] == resolution.policy.document
        json.dumps(out)  # plain JSON


class TestValidators:
    GUARDED = """\
    spec:
      validators:
        - name: floor-band
          expression: spec.collapse.spread_floor >= 0.05 && spec.collapse.spread_floor <= 0.15
          message: the spread floor stays within [0.05, 0.15]
        - name: prod-enforces
          expression: '!metadata.name.startsWith("prod-") || spec.collapse.mode == "enforce"'
          message: production enforces
    """

    @pytest.fixture
    def guarded(self, tmp_path: Path) -> Path:
        return write(tmp_path, "base.yaml", policy("base", self.GUARDED))

    def overlay(self, tmp_path: Path, name: str, body: str) -> Path:
        return write(tmp_path, f"{name}.yaml", policy(name, body, extends="base.yaml"))

    @pytest.mark.usefixtures("guarded")
    def test_an_overlay_within_the_guardrails_loads(self, tmp_path: Path) -> None:
        """Validators that hold let the overlay load, and stay in its document."""
        prod = self.overlay(tmp_path, "prod-eu", "spec:\n  collapse: {spread_floor: 0.1}\n")
        names = [v["name"] for v in load_policy(prod).document["spec"]["validators"]]
        assert names == ["floor-band", "prod-enforces"]

    def test_a_violating_overlay_is_refused_at_its_line_naming_the_base_rule(
        self, tmp_path: Path, guarded: Path
    ) -> None:
        """The overlay's value is the culprit; the message names the validator and where the
        base declared it."""
        prod = self.overlay(tmp_path, "prod-eu", "spec:\n  collapse: {spread_floor: 0.2}\n")
        declared = line_of(guarded, "expression: spec.collapse")
        (found,) = problems_of(prod)
        assert found == (
            f"{where(prod, '0.2')}: $.spec.collapse.spread_floor: 0.2 is refused by validator "
            f"'floor-band' of {guarded}:{declared}: the spread floor stays within [0.05, 0.15]"
        )

    @pytest.mark.usefixtures("guarded")
    def test_validators_read_the_metadata(self, tmp_path: Path) -> None:
        """A prod-* overlay cannot audit collapse; a staging one can."""
        body = "spec:\n  collapse: {mode: audit}\n"
        prod = self.overlay(tmp_path, "prod-eu", body)
        (found,) = problems_of(prod)
        # The setting it reads is blamed before the name it reads.
        assert found.startswith(f"{where(prod, 'audit')}: $.spec.collapse.mode: 'audit' is refused")
        assert "by validator 'prod-enforces'" in found
        assert load_policy(self.overlay(tmp_path, "staging", body)).spec.collapse.mode == "audit"

    def test_a_policy_failing_its_own_validator_is_refused_at_the_validator(
        self, tmp_path: Path
    ) -> None:
        """With no descendant to blame, the validator itself is pointed at."""
        body = textwrap.dedent(self.GUARDED) + "  collapse: {spread_floor: 0.01}\n"
        path = write(tmp_path, "solo.yaml", policy("solo", body))
        (found,) = problems_of(path)
        assert found.startswith(f"{path}:{line_of(path, 'expression: spec.collapse')}:")
        assert "validator 'floor-band' of" in found
        assert found.endswith("failed: the spread floor stays within [0.05, 0.15]")

    def test_validators_accumulate_and_cannot_be_redefined(
        self, tmp_path: Path, guarded: Path
    ) -> None:
        """An overlay adds validators of its own; reusing an inherited name is refused."""
        extra = """\
        spec:
          validators:
            - name: floor-band
              expression: "true"
              message: anything goes
        """
        prod = self.overlay(tmp_path, "prod-eu", extra)
        (found,) = problems_of(prod)
        assert found.startswith(f"{where(prod, 'floor-band')}: $.spec.validators[2].name: ")
        assert f"is already defined at {guarded}:{line_of(guarded, 'floor-band')}" in found

    def test_a_validator_over_rules_blames_the_overlays_rule(self, tmp_path: Path) -> None:
        """A validator reading spec.rules points at the rule the overlay set."""
        write(
            tmp_path,
            "base.yaml",
            policy(
                "base",
                """
                spec:
                  validators:
                    - name: no-warn-only
                      expression: spec.rules.all(r, r.effect != "warn")
                      message: rules refuse or are not written
                """,
            ),
        )
        rule = "    - {name: x, check: eviction, when: 'score < 0.1', effect: warn, message: m}\n"
        top = self.overlay(tmp_path, "top", "spec:\n  rules:\n" + rule)
        (found,) = problems_of(top)
        declared = f"{tmp_path / 'base.yaml'}:{line_of(tmp_path / 'base.yaml', 'expression')}"
        assert found == (
            f"{where(top, '{name: x')}: $.spec.rules[0]: refused by validator 'no-warn-only' of "
            f"{declared}: rules refuse or are not written"
        )

    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            ("spec.collapse.spread_flor < 1.0", "unknown field 'spread_flor' of the value"),
            ("spec.collapse.spread_floor <", "syntax error: unexpected end of expression"),
            ("spec.collapse.spread_floor", "must give a bool, but gives double on a sample input"),
        ],
    )
    def test_a_validator_is_checked_when_the_base_loads(
        self, tmp_path: Path, expression: str, message: str
    ) -> None:
        """Expressions are compiled at load, with the CEL checks rules get, located."""
        body = f"spec:\n  validators:\n    - {{name: v, message: m, expression: '{expression}'}}\n"
        path = write(tmp_path, "p.yaml", policy("p", body))
        (found,) = problems_of(path)
        assert found.startswith(f"{path}:8:")
        assert "$.spec.validators[0].expression: " + message in found

    def test_a_validator_that_cannot_be_evaluated_refuses(self, tmp_path: Path) -> None:
        """Fail closed: an evaluation error refuses the policy."""
        body = (
            "spec:\n  validators:\n"
            "    - {name: v, message: m, expression: 'spec.eviction.pinned_kinds[7] == \"x\"'}\n"
        )
        path = write(tmp_path, "p.yaml", policy("p", body))
        (found,) = problems_of(path)
        assert "validator 'v' of" in found
        assert "could not be evaluated" in found

    def test_empty_guardrails_keep_the_digest(self) -> None:
        """A policy without guardrails digests as it did before they existed."""
        plain = parse_policy(policy("p"))
        empty = parse_policy(policy("p", "spec:\n  validators: []\n  locked: []\n"))
        assert plain.digest == empty.digest
        assert "validators" not in empty.document["spec"]


class TestLocked:
    LOCKING = """\
    spec:
      collapse: {spread_floor: 0.08}
      rules:
        - {name: pin-plan, check: eviction, when: 'segment.kind == "plan"', effect: pin, message: m}
      locked:
        - /spec/eviction/require_tombstone
        - /spec/collapse
        - /spec/rules/pin-plan
    """

    @pytest.fixture
    def locking(self, tmp_path: Path) -> Path:
        return write(tmp_path, "base.yaml", policy("base", self.LOCKING))

    def overlay(
        self, tmp_path: Path, body: str, name: str = "top", extends: str = "base.yaml"
    ) -> Path:
        return write(tmp_path, f"{name}.yaml", policy(name, body, extends=extends))

    def test_changing_a_locked_value_is_refused_at_the_overlays_line(
        self, tmp_path: Path, locking: Path
    ) -> None:
        """The message names the pointer, the base file and line, and both values."""
        top = self.overlay(tmp_path, "spec:\n  eviction:\n    require_tombstone: false\n")
        declared = line_of(locking, "- /spec/eviction/require_tombstone")
        (found,) = problems_of(top)
        assert found == (
            f"{where(top, 'false')}: $.spec.eviction.require_tombstone: changes "
            f"/spec/eviction/require_tombstone, which is locked by {locking}:{declared} "
            "(True -> False)"
        )

    @pytest.mark.usefixtures("locking")
    def test_restating_a_locked_value_is_allowed(self, tmp_path: Path) -> None:
        """Locked means unchanged, not unmentioned: the default written out is fine."""
        top = self.overlay(tmp_path, "spec:\n  eviction: {require_tombstone: true}\n")
        assert load_policy(top).spec.eviction.require_tombstone is True

    @pytest.mark.usefixtures("locking")
    def test_a_locked_section_refuses_any_change_inside(self, tmp_path: Path) -> None:
        """Locking /spec/collapse locks every field in it, defaults included."""
        top = self.overlay(tmp_path, "spec:\n  collapse:\n    consecutive_cycles: 4\n")
        (found,) = problems_of(top)
        assert found.startswith(
            f"{top}:9:25: $.spec.collapse.consecutive_cycles: changes /spec/collapse,"
        )

    @pytest.mark.usefixtures("locking")
    def test_a_locked_rule_cannot_be_replaced_but_rules_can_be_added(self, tmp_path: Path) -> None:
        """A rule locked by name stays as the base wrote it."""
        replaced = "- {name: pin-plan, check: eviction, when: 'false', effect: pin, message: m}"
        added = "- {name: more, check: eviction, when: 'score < 0.01', effect: deny, message: m}"
        top = self.overlay(tmp_path, f"spec:\n  rules:\n    {replaced}\n")
        (found,) = problems_of(top)
        assert found.startswith(f"{top}:9:7: $.spec.rules[0]: changes /spec/rules/pin-plan,")
        assert "(" not in found.split("locked by")[1]  # a rule's values are not quoted
        fine = self.overlay(tmp_path, f"spec:\n  rules:\n    {added}\n", name="fine")
        assert [r.name for r in load_policy(fine).rules] == ["pin-plan", "more"]

    def test_locks_bind_every_descendant_and_cannot_be_dropped(
        self, tmp_path: Path, locking: Path
    ) -> None:
        """A grandchild is bound too, even through a middle overlay stating locked: []."""
        self.overlay(tmp_path, "spec:\n  locked: []\n", name="mid")
        leaf = self.overlay(
            tmp_path,
            "spec:\n  eviction: {require_tombstone: false}\n",
            name="leaf",
            extends="mid.yaml",
        )
        (found,) = problems_of(leaf)
        assert f"which is locked by {locking}:" in found
        assert load_policy(tmp_path / "mid.yaml").document["spec"]["locked"] == [
            "/spec/collapse",
            "/spec/eviction/require_tombstone",
            "/spec/rules/pin-plan",
        ]

    def test_an_overlays_own_locks_bind_its_descendants_not_itself(self, tmp_path: Path) -> None:
        """Locks apply below the file that declares them."""
        write(tmp_path, "base.yaml", policy("base"))
        mid = self.overlay(
            tmp_path,
            "spec:\n  staleness: {recompute_hops: 2}\n  locked: [/spec/staleness/recompute_hops]\n",
            name="mid",
        )
        assert load_policy(mid).spec.staleness.recompute_hops == 2
        leaf = self.overlay(
            tmp_path, "spec:\n  staleness: {recompute_hops: 3}\n", name="leaf", extends="mid.yaml"
        )
        (found,) = problems_of(leaf)
        assert found == (
            f"{where(leaf, '3}')}: $.spec.staleness.recompute_hops: changes "
            f"/spec/staleness/recompute_hops, which is locked by "
            f"{mid}:{line_of(mid, 'locked:')} (2 -> 3)"
        )

    @pytest.mark.parametrize("pointer", ["/spec/colapse", "/spec/rules/nope", "/spec/params/x"])
    def test_a_lock_naming_nothing_is_refused(self, tmp_path: Path, pointer: str) -> None:
        """A typo would protect nothing: refused where it is declared."""
        path = write(tmp_path, "p.yaml", policy("p", f"spec:\n  locked: ['{pointer}']\n"))
        (found,) = problems_of(path)
        assert found == (
            f"{where(path, repr(pointer))}: $.spec.locked: locked path {pointer} names nothing "
            "in this policy (defaults filled in)"
        )


class TestExamples:
    @pytest.mark.parametrize("name", ["base", "prod-eu", "staging", "prod-eu-candidate"])
    def test_the_deployment_examples_load(self, name: str) -> None:
        """Every shipped deployment policy but the failing one loads with its lock file."""
        loaded = load_policy(DEPLOYMENTS / f"{name}.yaml")
        assert loaded.sources[-1].path == str(DEPLOYMENTS / "base.yaml")

    def test_the_replay_example_is_refused_as_its_header_says(self) -> None:
        """replay.yaml is kept as the documented refusal: a validator and a lock."""
        found = problems_of(DEPLOYMENTS / "replay.yaml")
        header = (DEPLOYMENTS / "replay.yaml").read_text()
        assert len(found) == 2
        for problem in found:
            location = problem.split(": ")[0].removeprefix(str(DEPLOYMENTS) + "/")
            assert f"#   {location}: " in header
        assert "refused by validator 'spread-floor-band'" in found[0]
        assert "locked by" in found[1]
