"""``prunewarden policy show|diff|lock`` and ``--lock``, run in-process."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from prunewarden import load_policy
from prunewarden.cli._main import run
from prunewarden.policy._lock import LOCK_FILENAME, read

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ROOT / "examples" / "deployments"
EXAMPLES = ROOT / "examples" / "inputs"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def deployments(tmp_path: Path) -> Path:
    """A copy of examples/deployments to edit."""
    target = tmp_path / "deployments"
    shutil.copytree(DEPLOYMENTS, target)
    return target


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


class TestShow:
    def test_show_prints_what_the_files_set(self) -> None:
        """Without --resolved: the values some file of the chain set, each with FILE:LINE."""
        code, out, err = cli("policy", "show", str(DEPLOYMENTS / "prod-eu.yaml"))
        assert (code, err) == (0, "")
        prod = DEPLOYMENTS / "prod-eu.yaml"
        line = next(
            i for i, t in enumerate(prod.read_text().splitlines(), 1) if "spread_floor" in t
        )
        assert any(
            text.strip().startswith("spread_floor: 0.1") and text.endswith(f"# {prod}:{line}")
            for text in out.splitlines()
        )
        assert "# default" not in out
        assert out.startswith("# prod-eu@1.4.0 sha256:")

    def test_resolved_shows_every_value_and_loads_back(self) -> None:
        """--resolved is the policy the guards run, defaults included and marked."""
        code, out, _ = cli("policy", "show", "--resolved", str(DEPLOYMENTS / "staging.yaml"))
        assert code == 0
        assert "timeout_ms: 100" in out
        assert "# default" in out
        assert yaml.safe_load(out) == load_policy(DEPLOYMENTS / "staging.yaml").document

    def test_json_has_document_sources_and_provenance(self) -> None:
        """--format json is for tools: every value's origin by JSON pointer."""
        code, out, _ = cli("policy", "show", "--format", "json", str(DEPLOYMENTS / "prod-eu.yaml"))
        shown = json.loads(out)
        assert code == 0
        assert [s["path"] for s in shown["policy"]["sources"]] == [
            str(DEPLOYMENTS / "prod-eu.yaml"),
            str(DEPLOYMENTS / "base.yaml"),
        ]
        assert shown["provenance"]["/spec/collapse/consecutive_cycles"]["file"] == str(
            DEPLOYMENTS / "prod-eu.yaml"
        )
        assert shown["provenance"]["/spec/rules/0/mode"] is None

    def test_a_path_locked_again_is_listed_once_at_its_first_lock(self, tmp_path: Path) -> None:
        """An overlay restating a lock its base declared: show lists the path once, cited at
        the base that locked it first."""
        head = "apiVersion: prunewarden/v1\nkind: Policy\n"
        (tmp_path / "base.yaml").write_text(
            head + "metadata: {name: base, version: 1.0.0}\nspec:\n"
            "  collapse: {spread_floor: 0.09}\n  locked: [/spec/collapse/spread_floor]\n"
        )
        overlay = tmp_path / "overlay.yaml"
        overlay.write_text(
            head + "extends: base.yaml\nmetadata: {name: overlay, version: 1.0.0}\n"
            "spec:\n  locked: [/spec/collapse/spread_floor]\n"
        )
        for argv in (["policy", "show"], ["policy", "show", "--resolved"]):
            code, out, err = cli(*argv, str(overlay))
            assert (code, err) == (0, "")
            (line,) = [text for text in out.splitlines() if "locked:" in text]
            assert line.split("#")[0].strip() == "locked: [/spec/collapse/spread_floor]"
            assert line.endswith("base.yaml:6")
        code, out, _ = cli("policy", "show", "--format", "json", str(overlay))
        assert json.loads(out)["document"]["spec"]["locked"] == ["/spec/collapse/spread_floor"]

    def test_show_a_bundled_policy(self) -> None:
        """builtin:NAME works wherever a policy file does."""
        code, out, _ = cli("policy", "show", "builtin:default")
        assert code == 0
        assert "# builtin:default:" in out

    def test_an_invalid_policy_exits_three(self) -> None:
        """show refuses what loading refuses, with the same located problems."""
        code, out, err = cli("policy", "show", str(DEPLOYMENTS / "replay.yaml"))
        assert (code, out) == (3, "")
        assert "refused by validator 'spread-floor-band'" in err


class TestDiff:
    def test_the_same_policy_exits_zero(self, deployments: Path) -> None:
        """Comments and layout are no difference: exit 0, 'no differences'."""
        prod = deployments / "prod-eu.yaml"
        copy = deployments / "copy.yaml"
        copy.write_text(
            "# a copy\n" + prod.read_text().replace("spread_floor: 0.1", "spread_floor: 0.10")
        )
        code, out, _ = cli("policy", "diff", str(prod), str(copy))
        assert code == 0
        assert out.splitlines()[-1] == "no differences"

    def test_differences_exit_one_each_on_a_line(self) -> None:
        """Thresholds differ field by field, each side with the file and line that set it."""
        prod, candidate = DEPLOYMENTS / "prod-eu.yaml", DEPLOYMENTS / "prod-eu-candidate.yaml"
        code, out, _ = cli("policy", "diff", str(prod), str(candidate))
        assert code == 1
        lines = out.splitlines()
        assert lines[0].startswith(f"a: {prod} (prod-eu@1.4.0 sha256:")
        assert "~ metadata.version: 1.4.0 -> 1.5.0" in out
        stability = next(line for line in lines if "stability_delta" in line)
        assert stability.startswith("~ spec.eviction.stability_delta: 0.25 -> 0.015  (a: ")
        assert f"b: {candidate}:" in stability
        assert lines[-1] == "2 differences"

    def test_kinds_rules_modes_params_validators_and_locks(self, deployments: Path) -> None:
        """Each kind of difference is reported by meaning, rules and validators by name."""
        base = deployments / "base.yaml"
        other = deployments / "other.yaml"
        other.write_text(
            base.read_text()
            .replace("negation, plan]", "negation, tool-output]")
            .replace("effect: pin", "effect: deny")
            .replace("  eviction:\n", "  staleness: {mode: audit}\n  eviction:\n", 1)
            .replace("[never, do not, must not]", "[never]")
            .replace("    - /spec/rules/pin-negations\n", "")
            .replace("    - name: seed-kinds-pinned", "    - name: seed-kinds-kept")
        )
        code, out, _ = cli("policy", "diff", "--format", "json", str(base), str(other))
        assert code == 1
        changes = {(c["path"], c["change"], c["category"]) for c in json.loads(out)["changes"]}
        assert changes == {
            ("spec.staleness.mode", "changed", "mode"),
            ("spec.eviction.pinned_kinds", "added", "kind"),
            ("spec.eviction.pinned_kinds", "removed", "kind"),
            # transition.pinned_kinds follows eviction's: its effective value moved too.
            ("spec.transition.pinned_kinds", "added", "kind"),
            ("spec.transition.pinned_kinds", "removed", "kind"),
            ("spec.params.negations", "changed", "param"),
            ("spec.rules[pin-negations].effect", "changed", "rule"),
            ("spec.validators[seed-kinds-kept]", "added", "validator"),
            ("spec.validators[seed-kinds-pinned]", "removed", "validator"),
            ("spec.locked", "removed", "locked"),
        }

    def test_rules_added_removed_and_reordered(self, tmp_path: Path) -> None:
        """A rule only one side has is added or removed; a new order of the same rules is a
        difference (it decides the primary reason)."""
        rule = (
            "  - {{name: {0}, check: eviction, when: 'score < 0.{1}', effect: warn, message: m}}\n"
        )
        head = "apiVersion: prunewarden/v1\nkind: Policy\nmetadata: {name: p, version: 1.0.0}\n"
        a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
        a.write_text(head + "spec:\n rules:\n" + rule.format("x", 1) + rule.format("y", 2))
        b.write_text(
            head
            + "spec:\n rules:\n"
            + rule.format("y", 2)
            + rule.format("x", 1)
            + rule.format("z", 3)
        )
        code, out, _ = cli("policy", "diff", str(a), str(b))
        assert code == 1
        assert "+ spec.rules[z]: {name: z, check: eviction" in out
        assert "~ spec.rules order: [x, y] -> [y, x]" in out
        code, out, _ = cli("policy", "diff", str(b), str(a))
        assert "- spec.rules[z]: " in out

    def test_a_missing_file_exits_three(self, tmp_path: Path) -> None:
        """Either side failing to load is an invalid policy."""
        code, _, err = cli("policy", "diff", "builtin:default", str(tmp_path / "nope.yaml"))
        assert code == 3
        assert "cannot read" in err


class TestLock:
    def test_lock_records_a_new_version(self, deployments: Path) -> None:
        """A bumped version is added to policy.lock next to the policy; the rest unchanged."""
        prod = deployments / "prod-eu.yaml"
        edit(prod, "version: 1.4.0", "version: 1.4.1")
        edit(prod, "consecutive_cycles: 3", "consecutive_cycles: 4")
        code, out, err = cli("policy", "lock", str(prod))
        assert (code, err) == (0, "")
        lock = deployments / LOCK_FILENAME
        assert f"{lock}: prod-eu@1.4.1 sha256:" in out
        assert out.splitlines()[0].endswith("(unchanged)")  # the base, locked before
        assert read(lock).entries["prod-eu@1.4.1"] == load_policy(prod).digest

    def test_reusing_a_version_is_refused_with_the_message(self, deployments: Path) -> None:
        """Locking changed content under a locked version exits 3 and writes nothing."""
        prod = deployments / "prod-eu.yaml"
        lock = deployments / LOCK_FILENAME
        before = lock.read_bytes()
        edit(prod, "consecutive_cycles: 3", "consecutive_cycles: 4")
        code, out, err = cli("policy", "lock", str(prod))
        assert (code, out) == (3, "")
        assert "version 1.4.0 reused for different content: bump the version" in err
        assert lock.read_bytes() == before

    def test_a_bad_policy_does_not_lose_the_good_ones(
        self, deployments: Path, tmp_path: Path
    ) -> None:
        """Every policy that resolves is locked; the bad one is reported (exit 3)."""
        lock = tmp_path / "team.lock"
        code, out, err = cli(
            "policy",
            "lock",
            "--lock",
            str(lock),
            str(deployments / "replay.yaml"),
            str(deployments / "staging.yaml"),
        )
        assert code == 3
        assert "replay.yaml" in err
        assert set(read(lock).entries) == {"platform-base@2.0.0", "staging@0.9.0"}
        assert out.count("(added)") == 2

    def test_a_lock_file_that_cannot_be_written_exits_three(self, tmp_path: Path) -> None:
        """A lock file in a missing folder is reported, not a traceback."""
        lock = tmp_path / "missing" / "policy.lock"
        code, out, err = cli(
            "policy", "lock", "--lock", str(lock), str(DEPLOYMENTS / "staging.yaml")
        )
        assert (code, out) == (3, "")
        assert err == f"{lock}: $: cannot write: No such file or directory\n"


class TestLockOption:
    def test_validate_checks_the_lock_next_to_the_policy(self, deployments: Path) -> None:
        """validate refuses a reused version (exit 3) with the located message."""
        prod = deployments / "prod-eu.yaml"
        edit(prod, "spread_floor: 0.1", "spread_floor: 0.11")
        code, _, err = cli("validate", str(prod))
        assert code == 3
        assert err.startswith(f"{prod}:")
        assert "version 1.4.0 reused for different content: bump the version" in err

    def test_validate_and_evaluate_take_an_explicit_lock(
        self, deployments: Path, tmp_path: Path
    ) -> None:
        """--lock names the lock file; evaluate refuses to run under a reused version."""
        prod = deployments / "prod-eu.yaml"
        edit(prod, "spread_floor: 0.1", "spread_floor: 0.11")
        (deployments / LOCK_FILENAME).unlink()
        assert cli("validate", str(prod))[0] == 0
        other = tmp_path / "other.lock"
        shutil.copy(DEPLOYMENTS / LOCK_FILENAME, other)
        assert cli("validate", "--lock", str(other), str(prod))[0] == 3
        code, out, err = cli(
            "evaluate",
            "--policy",
            str(prod),
            "--lock",
            str(other),
            str(EXAMPLES / "eviction-healthy.json"),
        )
        assert (code, out) == (3, "")
        assert "reused for different content" in err

    def test_evaluate_takes_a_bundled_policy_by_name(self) -> None:
        """--policy builtin:default is the bundled default."""
        code, out, _ = cli(
            "evaluate", "--policy", "builtin:default", str(EXAMPLES / "eviction-healthy.json")
        )
        assert code == 0
        assert json.loads(out)["policy"]["sources"][0]["path"] == "builtin:default"
