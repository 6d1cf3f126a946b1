"""``spec.transition``: implicit values that follow the eviction section, a digest that an
absent section does not change, and guardrails and ``policy diff`` on the effective values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _support.policy_sections import DEFAULT_DIGEST
from _support.policy_sections import policy_text as _policy
from _support.policy_sections import write_file as _write
from prunewarden import PolicyError, load_builtin_policy, load_policy, parse_policy
from prunewarden.policy import resolve_file
from prunewarden.policy._diff import diff

ROOT = Path(__file__).resolve().parents[2]


class TestSettings:
    def test_an_absent_section_follows_the_eviction_section(self) -> None:
        """mode enforce, no scores required; tombstones and pinned kinds as eviction has them."""
        policy = parse_policy(
            _policy("spec:\n  eviction: {require_tombstone: false, pinned_kinds: [plan]}\n")
        )
        settings = policy.spec.transition
        assert (settings.mode, settings.require_tombstones, settings.require_scores) == (
            "enforce",
            False,
            False,
        )
        assert settings.pinned_kinds == frozenset({"plan"})

    def test_explicit_fields_override(self) -> None:
        """Every field of the section may be set on its own."""
        policy = parse_policy(
            _policy(
                "spec:\n  transition: {mode: audit, require_tombstones: false,"
                " require_scores: true, pinned_kinds: [system]}\n"
            )
        )
        settings = policy.spec.transition
        assert (settings.mode, settings.require_tombstones, settings.require_scores) == (
            "audit",
            False,
            True,
        )
        assert settings.pinned_kinds == frozenset({"system"})

    def test_an_unknown_field_is_a_located_problem(self) -> None:
        """The section is strict like every other one."""
        with pytest.raises(PolicyError) as raised:
            parse_policy(_policy("spec:\n  transition: {require_tombstone: true}\n"), "p.yaml")
        assert [p.path for p in raised.value.problems] == ["$.spec.transition.require_tombstone"]


class TestDigest:
    def test_the_bundled_default_keeps_its_digest(self) -> None:
        """No shipped digest moved: the section is absent from the canonical document."""
        policy = load_builtin_policy("default")
        assert policy.digest == DEFAULT_DIGEST
        assert "transition" not in policy.document["spec"]

    def test_spelling_out_the_implicit_values_changes_nothing(self) -> None:
        """Implicit values, written out, digest as the absent section does."""
        plain = parse_policy(_policy())
        spelled = parse_policy(
            _policy(
                "spec:\n  transition:\n    mode: enforce\n    require_tombstones: true\n"
                "    require_scores: false\n    pinned_kinds: [negation, constraint, definition]\n"
            )
        )
        assert spelled.digest == plain.digest

    def test_a_value_that_differs_changes_the_digest(self) -> None:
        """Only what changes behaviour reaches the canonical document."""
        plain = parse_policy(_policy())
        audit = parse_policy(_policy("spec:\n  transition: {mode: audit}\n"))
        assert audit.digest != plain.digest
        assert audit.document["spec"]["transition"] == {"mode": "audit"}

    def test_a_value_kept_against_a_changed_eviction_section_stays(self) -> None:
        """require_tombstones: true is implicit under the default eviction, not under false."""
        policy = parse_policy(
            _policy(
                "spec:\n  eviction: {require_tombstone: false}\n"
                "  transition: {require_tombstones: true}\n"
            )
        )
        assert policy.document["spec"]["transition"] == {"require_tombstones": True}
        assert policy.spec.transition.require_tombstones is True

    @pytest.mark.parametrize(
        "path",
        [
            *sorted((ROOT / "policies").glob("*.yaml")),
            *sorted((ROOT / "examples" / "policies").glob("*.yaml")),
            *sorted(
                path
                for path in (ROOT / "examples" / "deployments").glob("*.yaml")
                if path.name != "replay.yaml"  # a documented refused example: it never loads
            ),
        ],
        ids=lambda path: path.name,
    )
    def test_every_shipped_policy_digests_alike_with_the_implicit_section(
        self, path: Path, tmp_path: Path
    ) -> None:
        """A shipped policy with spec.transition spelled out at its implicit values keeps the
        digest its lock file records; with one field changed it does not, and diff shows it."""
        shipped = resolve_file(path)
        spelled = _with_section(path, tmp_path, shipped.policy.document, mode="enforce")
        assert spelled.policy.digest == shipped.policy.digest
        audit = _with_section(path, tmp_path, shipped.policy.document, mode="audit")
        assert audit.policy.digest != shipped.policy.digest
        changes = [(c.path, c.before, c.after) for c in diff(shipped, audit)]
        assert changes == [("spec.transition.mode", "enforce", "audit")]


def _with_section(path: Path, folder: Path, document: dict[str, Any], *, mode: str) -> Any:
    """A copy of the policy at ``path`` (beside it, so that ``extends`` resolves) with
    spec.transition written out: ``mode``, and the eviction section's values."""
    eviction = document["spec"]["eviction"]
    section = {
        "mode": mode,
        "require_tombstones": eviction["require_tombstone"],
        "require_scores": False,
        "pinned_kinds": eviction["pinned_kinds"],
    }
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.setdefault("spec", {})["transition"] = section
    if "extends" in data and not str(data["extends"]).startswith("builtin:"):
        data["extends"] = str((path.parent / data["extends"]).resolve())
    copy = folder / path.name
    copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return resolve_file(copy, (str(path.parent),))


class TestGuardrails:
    def test_a_lock_on_an_implicit_field_holds_against_the_eviction_section(
        self, tmp_path: Path
    ) -> None:
        """Locking /spec/transition/pinned_kinds forbids changing it through eviction too."""
        _write(tmp_path, "base.yaml", _policy("spec:\n  locked: [/spec/transition/pinned_kinds]\n"))
        child = _write(
            tmp_path,
            "child.yaml",
            _policy("spec:\n  eviction: {pinned_kinds: [plan]}\n", name="c", extends="base.yaml"),
        )
        with pytest.raises(PolicyError) as raised:
            load_policy(child, lock=False)
        assert "changes /spec/transition/pinned_kinds, which is locked by" in str(raised.value)

    def test_a_validator_reads_the_effective_section(self) -> None:
        """spec.transition.mode is readable whether or not the policy sets it."""
        text = _policy(
            "spec:\n  validators:\n  - name: transitions-enforced\n"
            "    expression: spec.transition.mode == 'enforce'\n"
            "    message: edits must be judged\n"
        )
        assert parse_policy(text).spec.transition.mode == "enforce"


class TestDiff:
    def test_policy_diff_shows_an_implicit_field_that_moved(self, tmp_path: Path) -> None:
        """Changing eviction.require_tombstone moves transition.require_tombstones with it."""
        a = _write(tmp_path, "a.yaml", _policy())
        b = _write(tmp_path, "b.yaml", _policy("spec:\n  eviction: {require_tombstone: false}\n"))
        changes = [c.path for c in diff(resolve_file(a), resolve_file(b))]
        assert changes == ["spec.eviction.require_tombstone", "spec.transition.require_tombstones"]
