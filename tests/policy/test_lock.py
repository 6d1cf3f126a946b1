"""Version discipline: the lock file holds each name@version to one digest."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml
from prunewarden import PolicyError, load_policy
from prunewarden.policy._lock import LOCK_FILENAME, find, read, render, update
from prunewarden.policy._overlay import resolve_file

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = ROOT / "examples" / "deployments"


def policy(name: str, version: str, body: str = "", extends: str | None = None) -> str:
    text = "apiVersion: prunewarden/v1\nkind: Policy\n"
    if extends:
        text += f"extends: {extends}\n"
    return text + f"metadata:\n  name: {name}\n  version: {version}\n" + body


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """base@1.0.0 <- prod@1.4.0 in one folder, locked as they are."""
    (tmp_path / "base.yaml").write_text(
        policy("base", "1.0.0", "spec:\n  collapse: {spread_floor: 0.09}\n")
    )
    prod = tmp_path / "prod.yaml"
    prod.write_text(
        policy("prod", "1.4.0", "spec:\n  collapse: {consecutive_cycles: 3}\n", "base.yaml")
    )
    update(tmp_path / LOCK_FILENAME, [resolve_file(prod)])
    return prod


def version_at(path: Path) -> str:
    """Where a policy file states its version, as problems locate it."""
    lines = path.read_text().splitlines()
    (line,) = [i for i, text in enumerate(lines, 1) if text.startswith("  version: ")]
    return f"{path}:{line}:12"


def problems_of(path: Path, **options: object) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(path, **options)  # type: ignore[arg-type]
    return [str(p) for p in info.value.problems]


class TestFind:
    def test_an_explicit_lock_wins(self, tmp_path: Path, chain: Path) -> None:
        """lock= names the file, whether or not one sits next to the policy."""
        assert find(chain, tmp_path / "other.lock") == tmp_path / "other.lock"

    def test_policy_lock_next_to_the_policy_is_found(self, chain: Path) -> None:
        """Without an option, policy.lock in the policy's folder applies."""
        assert find(chain, None) == chain.parent / LOCK_FILENAME

    def test_none_when_absent_or_turned_off(self, tmp_path: Path, chain: Path) -> None:
        """No lock file next to it, False, or a bundled policy: nothing is checked."""
        assert find(tmp_path / "sub" / "p.yaml", None) is None
        assert find(chain, False) is None
        assert find("builtin:default", None) is None


class TestEnforce:
    def test_locked_content_loads(self, chain: Path) -> None:
        """The content recorded for its version loads."""
        assert load_policy(chain).version == "1.4.0"

    def test_a_reused_version_is_refused_at_its_version(self, chain: Path) -> None:
        """Changed content under a locked version: refused, naming lock, key and digests."""
        locked = read(chain.parent / LOCK_FILENAME).entries["prod@1.4.0"]
        chain.write_text(
            chain.read_text().replace("consecutive_cycles: 3", "consecutive_cycles: 4")
        )
        (found,) = problems_of(chain)
        changed = load_policy(chain, lock=False).digest
        assert found == (
            f"{version_at(chain)}: $.metadata.version: version 1.4.0 reused for different content: "
            f"bump the version ({chain.parent / LOCK_FILENAME} holds prod@1.4.0 to {locked}; "
            f"this content is {changed})"
        )

    def test_a_changed_base_is_named_too(self, chain: Path) -> None:
        """Editing the base without a bump is refused at the base, and at every policy whose
        resolved content it changed."""
        base = chain.parent / "base.yaml"
        base.write_text(base.read_text().replace("0.09", "0.1"))
        found = problems_of(chain)
        assert [f.split(": ")[0] for f in found] == [version_at(base), version_at(chain)]
        assert all("reused for different content: bump the version" in f for f in found)

    def test_formatting_and_comments_are_not_content(self, chain: Path) -> None:
        """The digest ignores comments and layout, so the lock does too."""
        chain.write_text(
            "# reviewed\n"
            + chain.read_text().replace("{consecutive_cycles: 3}", "\n    consecutive_cycles: 3")
        )
        assert load_policy(chain).version == "1.4.0"

    def test_a_bumped_version_loads(self, chain: Path) -> None:
        """New content under a new version is simply not locked yet."""
        chain.write_text(
            chain.read_text().replace("1.4.0", "1.5.0").replace("cycles: 3", "cycles: 4")
        )
        assert load_policy(chain).version == "1.5.0"

    def test_an_explicit_lock_file_must_exist(self, tmp_path: Path, chain: Path) -> None:
        """A lock named on purpose and missing is a problem, not a silent pass."""
        (found,) = problems_of(chain, lock=tmp_path / "missing.lock")
        assert found == f"{tmp_path / 'missing.lock'}: $: cannot read: No such file or directory"

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            (
                f"lockVersion: 1\ndigestVersion: 2\npolicies:\n  prod: sha256:{'0' * 64}\n",
                "4:3: $.policies: 'prod' is not valid here: A policy's name@version",
            ),
            (
                "lockVersion: 1\ndigestVersion: 2\npolicies:\n  prod@1.4.0: md5:00\n",
                "$.policies.prod@1.4.0: 'md5:00' is not valid here",
            ),
            ("lockVersion: 2\ndigestVersion: 2\npolicies: {}\n", "$.lockVersion: 2 should be 1"),
            (
                "lockVersion: 1\ndigestVersion: 2\npolicies: {}\npolicies: {}\n",
                "duplicate key 'policies'",
            ),
        ],
    )
    def test_a_malformed_lock_file_is_located(self, chain: Path, text: str, message: str) -> None:
        """Lock files get the strict loading policies get: every problem located."""
        lock = chain.parent / LOCK_FILENAME
        lock.write_text(text)
        (found,) = problems_of(chain)
        assert found.startswith(f"{lock}:")
        assert message in found


class TestUpdate:
    def test_update_records_the_chain_and_reports(self, tmp_path: Path, chain: Path) -> None:
        """Every policy of the chain is recorded once; a second run changes nothing."""
        lock = tmp_path / LOCK_FILENAME
        before = lock.read_bytes()
        report = update(lock, [resolve_file(chain)])
        assert [(e.key, e.added) for e in report] == [("base@1.0.0", False), ("prod@1.4.0", False)]
        assert lock.read_bytes() == before
        loaded = yaml.safe_load(before)
        assert (loaded["lockVersion"], loaded["digestVersion"]) == (1, 2)
        assert loaded["policies"]["prod@1.4.0"] == load_policy(chain).digest

    @pytest.mark.parametrize("line", ["", "digestVersion: 1\n"])
    def test_a_version_1_lock_is_refused_naming_the_version(
        self, tmp_path: Path, chain: Path, line: str
    ) -> None:
        """A lock file without digestVersion, or of digest version 1 (written before the first
        release), is refused with one located problem naming the version and what to do."""
        lock = tmp_path / LOCK_FILENAME
        lock.write_text(f"lockVersion: 1\n{line}policies:\n  prod@1.4.0: sha256:{'0' * 64}\n")
        with pytest.raises(PolicyError) as info:
            load_policy(chain)
        (problem,) = info.value.problems
        assert (problem.file, problem.path) == (str(lock), "$.digestVersion")
        assert problem.message.startswith("digest version 1 (a lock file without a digestVersion")
        assert "delete the file and run prunewarden policy lock" in problem.message

    def test_update_refuses_a_reused_version_and_writes_nothing(
        self, tmp_path: Path, chain: Path
    ) -> None:
        """Locking new content under a locked version is refused; the lock is untouched."""
        lock = tmp_path / LOCK_FILENAME
        before = lock.read_bytes()
        chain.write_text(chain.read_text().replace("cycles: 3", "cycles: 5"))
        with pytest.raises(PolicyError) as info:
            update(lock, [resolve_file(chain)])
        assert "version 1.4.0 reused for different content" in str(info.value)
        assert lock.read_bytes() == before

    def test_two_contents_for_one_version_in_one_run_are_refused(self, tmp_path: Path) -> None:
        """Two files claiming the same name@version with different content cannot both lock."""
        a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
        a.write_text(policy("same", "1.0.0"))
        b.write_text(policy("same", "1.0.0", "spec:\n  collapse: {spread_floor: 0.1}\n"))
        with pytest.raises(PolicyError):
            update(tmp_path / "x.lock", [resolve_file(a), resolve_file(b)])
        assert not (tmp_path / "x.lock").exists()

    def test_bundled_policies_are_not_recorded(self, tmp_path: Path) -> None:
        """builtin:default is versioned with prunewarden itself."""
        path = tmp_path / "p.yaml"
        path.write_text(policy("p", "1.0.0", extends="builtin:default"))
        report = update(tmp_path / "x.lock", [resolve_file(path)])
        assert [e.key for e in report] == ["p@1.0.0"]

    def test_the_file_is_replaced_atomically_keeping_its_mode(
        self, tmp_path: Path, chain: Path
    ) -> None:
        """A new lock file replaces the old by rename; its permissions stay; no temporary is
        left behind."""
        lock = tmp_path / LOCK_FILENAME
        lock.chmod(0o640)
        inode = lock.stat().st_ino
        chain.write_text(chain.read_text().replace("1.4.0", "1.5.0"))
        update(lock, [resolve_file(chain)])
        assert stat.S_IMODE(lock.stat().st_mode) == 0o640
        assert lock.stat().st_ino != inode
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "base.yaml",
            LOCK_FILENAME,
            "prod.yaml",
        ]
        assert "prod@1.4.0" in read(lock).entries  # versions are never removed

    def test_entries_are_ordered_by_name_then_version(self) -> None:
        """1.10.0 comes after 1.9.0; the header explains the file."""
        text = render(
            {
                "b@1.10.0": "sha256:" + "1" * 64,
                "b@1.9.0": "sha256:" + "2" * 64,
                "a@2.0.0": "sha256:" + "3" * 64,
            }
        )
        keys = [
            line.split(":")[0].strip()
            for line in text.splitlines()
            if "@" in line and not line.startswith("#")
        ]
        assert keys == ["a@2.0.0", "b@1.9.0", "b@1.10.0"]
        assert text.startswith("# prunewarden policy lock")
        assert render({}).endswith("policies: {}\n")

    def test_the_example_lock_holds_every_example(self) -> None:
        """examples/deployments/policy.lock is current: every loadable example is in it."""
        lock = read(DEPLOYMENTS / LOCK_FILENAME)
        for name in ("base", "prod-eu", "staging", "prod-eu-candidate"):
            loaded = load_policy(DEPLOYMENTS / f"{name}.yaml")
            assert lock.entries[f"{loaded.name}@{loaded.version}"] == loaded.digest


#: Shipped files that are meant to be refused at load (documented), so never locked.
REFUSED = {DEPLOYMENTS / "replay.yaml"}


def is_policy(path: Path) -> bool:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return isinstance(document, dict) and document.get("kind") == "Policy"


def shipped_policies(folder: Path) -> list[Path]:
    return [
        path for path in sorted(folder.glob("*.yaml")) if is_policy(path) and path not in REFUSED
    ]


#: Every folder of policies/ and examples/ that ships a policy: each needs a policy.lock.
SHIPPED = sorted(
    {
        path.parent
        for top in (ROOT / "policies", ROOT / "examples")
        for path in top.rglob("*.yaml")
        if "tests" not in path.relative_to(ROOT).parts and is_policy(path)
    }
)


class TestShippedLocks:
    @pytest.mark.parametrize(
        "folder", SHIPPED, ids=lambda folder: folder.relative_to(ROOT).as_posix()
    )
    def test_every_shipped_policy_is_locked_as_it_is(self, folder: Path) -> None:
        """Each shipped folder has a policy.lock holding every policy in it at its current
        content: content changed without a version bump fails here."""
        lock = read(folder / LOCK_FILENAME)
        policies = shipped_policies(folder)
        assert policies
        for path in policies:
            loaded = load_policy(path, lock=False)
            assert lock.entries.get(f"{loaded.name}@{loaded.version}") == loaded.digest, path.name

    @pytest.mark.parametrize(
        "folder",
        SHIPPED,
        ids=lambda folder: folder.relative_to(ROOT).as_posix(),
    )
    def test_shipped_locks_hold_version_2_digests(self, folder: Path) -> None:
        """Every shipped lock says it holds RFC 8785 digests (digestVersion: 2)."""
        assert read(folder / LOCK_FILENAME).digest_version == 2

    def test_every_folder_of_shipped_policies_is_checked(self) -> None:
        """The folders found (and so locked) include every one known to ship policies: a
        folder the search missed would go unchecked."""
        expected = {"policies", "examples/policies", "examples/deployments", "examples/agents"}
        assert expected <= {folder.relative_to(ROOT).as_posix() for folder in SHIPPED}

    def test_refused_examples_stay_refused(self) -> None:
        """The files left out of the locks are the ones documented as refused at load."""
        for path in REFUSED:
            with pytest.raises(PolicyError):
                load_policy(path)
