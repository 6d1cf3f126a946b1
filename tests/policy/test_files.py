"""Policy files a hostile or careless author can name: confined bases, regular files only,
located errors for what Python cannot carry, and locks that cover what a rule reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.blocking import call_guarded, make_fifo
from prunewarden import PolicyError, ReloadingEngine, load_policy, parse_policy
from prunewarden._source import _Loader, parse_yaml
from prunewarden.limits import MAX_INTEGER_DIGITS, MAX_YAML_NODES
from prunewarden.policy._lock import read as read_lock

SECRET = "API_KEY=sk-live-0123456789"  # noqa: S105 - a planted fake, never to be quoted


def policy(name: str, body: str = "", *, extends: str | None = None) -> str:
    head = "apiVersion: prunewarden/v1\nkind: Policy\n"
    if extends is not None:
        head += f"extends: '{extends}'\n"
    return head + f"metadata: {{name: {name}, version: 1.0.0}}\n" + body


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def messages(error: pytest.ExceptionInfo[PolicyError]) -> list[str]:
    return [problem.message for problem in error.value.problems]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A policy folder, with a secret beside it (outside it)."""
    write(tmp_path / ".env", SECRET + "\n")
    write(tmp_path / "repo" / "base.yaml", policy("base"))
    return tmp_path / "repo"


class TestExtendsConfined:
    @pytest.mark.parametrize("extends", ["../.env", "/etc/passwd", "../repo/../.env"])
    def test_a_file_outside_the_folder_is_refused_unread(self, repo: Path, extends: str) -> None:
        """extends into a folder above the policy's is refused, and the file is not quoted."""
        top = write(repo / "top.yaml", policy("top", extends=extends))
        with pytest.raises(PolicyError) as info:
            load_policy(top)
        (problem,) = info.value.problems
        assert (problem.file, problem.line, problem.path) == (str(top), 3, "$.extends")
        assert "outside the folder of this policy" in problem.message
        assert "sk-live" not in str(info.value)
        assert "root:" not in str(info.value)

    def test_a_symbolic_link_out_of_the_folder_is_refused(self, repo: Path) -> None:
        """A link inside the folder that leads out of it is followed before the check."""
        (repo / "link.yaml").symlink_to(repo.parent / ".env")
        top = write(repo / "top.yaml", policy("top", extends="link.yaml"))
        with pytest.raises(PolicyError) as info:
            load_policy(top)
        assert "outside the folder of this policy" in messages(info)[0]

    def test_a_subfolder_and_builtin_are_allowed(self, repo: Path) -> None:
        """extends into the policy's own folder tree, or builtin:, loads."""
        write(repo / "bases" / "team.yaml", policy("team", extends="builtin:default"))
        top = write(repo / "top.yaml", policy("top", extends="bases/team.yaml"))
        assert [s.path for s in load_policy(top).sources][-1] == "builtin:default"

    def test_each_file_is_confined_to_its_own_folder(self, repo: Path) -> None:
        """A base in a subfolder may not climb back out of it."""
        write(repo / "teams" / "mid.yaml", policy("mid", extends="../base.yaml"))
        top = write(repo / "teams" / "top.yaml", policy("top", extends="mid.yaml"))
        with pytest.raises(PolicyError) as info:
            load_policy(top)
        assert info.value.problems[0].file.endswith("mid.yaml")

    def test_an_allowed_base_folder_is_read(self, tmp_path: Path) -> None:
        """base_dirs names the folders of shared bases extends may lead into."""
        shared = tmp_path / "shared"
        write(shared / "org.yaml", policy("org"))
        top = write(tmp_path / "team" / "top.yaml", policy("top", extends="../shared/org.yaml"))
        with pytest.raises(PolicyError):
            load_policy(top)
        assert load_policy(top, base_dirs=(shared,)).sources[-1].path.endswith("org.yaml")
        text = policy("top", extends="../shared/org.yaml")
        assert parse_policy(text, str(top), base_dirs=(shared,)).name == "top"

    def test_a_base_that_is_not_a_mapping_is_not_quoted(self, repo: Path) -> None:
        """A file in the folder that is not a policy is refused without its content."""
        write(repo / "notes.txt", SECRET + "\n")
        top = write(repo / "top.yaml", policy("top", extends="notes.txt"))
        with pytest.raises(PolicyError) as info:
            load_policy(top)
        (problem,) = info.value.problems
        assert problem.path == "$.extends"
        assert problem.message.endswith(
            "not a policy: the document is a single value, not a mapping"
        )
        assert "sk-live" not in str(info.value)


class TestRegularFilesOnly:
    def test_a_fifo_policy_is_refused_without_blocking(self, tmp_path: Path) -> None:
        """A FIFO named as the policy is refused at once, not waited on."""
        fifo = make_fifo(tmp_path / "policy.yaml")
        with pytest.raises(PolicyError) as info:
            call_guarded(lambda: load_policy(fifo), fifo)
        assert messages(info) == [
            "cannot read: a FIFO, not a regular file: only regular files are read"
        ]

    def test_a_fifo_base_is_refused_without_blocking(self, tmp_path: Path) -> None:
        """A FIFO named by extends is refused at the extends line."""
        fifo = make_fifo(tmp_path / "base.yaml")
        top = write(tmp_path / "top.yaml", policy("top", extends="base.yaml"))
        with pytest.raises(PolicyError) as info:
            call_guarded(lambda: load_policy(top), fifo)
        (problem,) = info.value.problems
        assert (problem.path, problem.line) == ("$.extends", 3)
        assert "a FIFO, not a regular file" in problem.message

    def test_a_fifo_lock_file_is_refused_without_blocking(self, tmp_path: Path) -> None:
        """A FIFO named as the lock file is refused, for a load and for reading the lock."""
        fifo = make_fifo(tmp_path / "policy.lock")
        top = write(tmp_path / "top.yaml", policy("top"))
        with pytest.raises(PolicyError) as info:
            call_guarded(lambda: load_policy(top, lock=fifo), fifo)
        assert "a FIFO, not a regular file" in messages(info)[0]
        with pytest.raises(PolicyError):
            call_guarded(lambda: read_lock(fifo), fifo)

    def test_a_fifo_base_does_not_wedge_a_reloading_engine(self, tmp_path: Path) -> None:
        """A base replaced by a FIFO: reload() reports it, and close() returns."""
        base = write(tmp_path / "base.yaml", policy("base"))
        top = write(tmp_path / "top.yaml", policy("top", extends="base.yaml"))
        engine = ReloadingEngine(top, interval=0.05)
        try:
            base.unlink()
            make_fifo(base)
            result = call_guarded(engine.reload, base)
            assert not result.changed
            assert "a FIFO, not a regular file" in result.problems[0]
        finally:
            call_guarded(engine.close, base)
        assert engine.policy.name == "top"


class TestLocatedErrors:
    def test_an_integer_too_long_to_read_is_located(self) -> None:
        """An integer of more digits than Python reads is one located problem."""
        text = policy("p", "spec:\n  params:\n    n: " + "9" * (MAX_INTEGER_DIGITS + 1) + "\n")
        with pytest.raises(PolicyError) as info:
            parse_policy(text, "p.yaml")
        (problem,) = info.value.problems
        assert (problem.line, problem.column, problem.path) == (6, 8, "$.spec.params.n")
        assert problem.message == f"an integer of more than {MAX_INTEGER_DIGITS} digits"

    @pytest.mark.parametrize(
        "spelled",
        [
            "0x" + "f" * 5000,
            "0b" + "1" * 15000,
            "07" + "7" * 6000,
            "-0x" + "f" * 4000,
        ],
        ids=["hex", "binary", "octal", "negative-hex"],
    )
    def test_an_integer_too_large_in_another_base_is_located(self, spelled: str) -> None:
        """A 5,000-digit hex integer (or binary, octal) is a located problem with the value
        shortened; it loaded, then every message printing it exited 70."""
        for line, where, body in [
            (6, "$.spec.params.n", f"spec:\n  params:\n    n: {spelled}\n"),
            (
                5,
                "$.spec.eviction.stability_delta",
                f"spec:\n  eviction: {{stability_delta: {spelled}}}\n",
            ),
        ]:
            with pytest.raises(PolicyError) as info:
                parse_policy(policy("p", body), "p.yaml")
            (problem,) = info.value.problems
            assert (problem.file, problem.line, problem.path) == ("p.yaml", line, where)
            shortened = f"'{spelled[:76]}..."
            assert problem.message == f"an integer of more than 4300 digits: {shortened}"

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ("!!int abc", "'abc' is not a valid !!int"),
            ("!!float abc", "'abc' is not a valid !!float"),
            ("1" + ":59" * 400 + ".5", "'1" + ":59" * 25 + "... is not a valid !!float"),
            ("!!bool maybe", "'maybe' is not a valid !!bool"),
            ("!!timestamp 2020-13-45", "'2020-13-45' is not a valid !!timestamp"),
            ("!!map abc", "'abc' is not a valid !!map"),
            ("!!seq abc", "'abc' is not a valid !!seq"),
        ],
        ids=["int", "float", "base-60-float", "bool", "timestamp", "map", "seq"],
    )
    def test_a_value_its_tag_cannot_read_is_located(self, value: str, message: str) -> None:
        """A scalar its YAML tag cannot read is one located problem quoting it (it exited 70
        from PyYAML's constructor, or loaded as an empty mapping)."""
        with pytest.raises(PolicyError) as info:
            parse_policy(policy("p", f"spec:\n  params:\n    n: {value}\n"), "p.yaml")
        (problem,) = info.value.problems
        assert (problem.line, problem.column, problem.path) == (6, 8, "$.spec.params.n")
        assert problem.message == message

    def test_a_key_its_tag_cannot_read_is_located_once(self) -> None:
        """A mapping key its tag cannot read is one problem at the key."""
        with pytest.raises(PolicyError) as info:
            parse_policy(policy("p", "spec:\n  params:\n    !!float abc: 1\n"), "p.yaml")
        (problem,) = info.value.problems
        assert (problem.line, problem.column, problem.path) == (6, 5, "$.spec.params")
        assert problem.message == "'abc' is not a valid !!float"

    def test_a_short_hex_integer_still_loads(self) -> None:
        """Integers in other bases that Python can print load as their value."""
        parsed, problems = parse_yaml("n: 0x" + "0" * 5000 + "ff\nm: 0b101\n", "p.yaml")
        assert (parsed.data, problems) == ({"n": 255, "m": 5}, [])

    @pytest.mark.parametrize(
        ("body", "path"),
        [
            ('spec:\n  params:\n    word: "a\\ud800"\n', "$.spec.params.word"),
            ('spec:\n  params:\n    "k\\udfff": 1\n', "$.spec.params"),
        ],
    )
    def test_a_lone_surrogate_is_located(self, body: str, path: str) -> None:
        """A lone surrogate in a value or a key is a located problem, not a crash."""
        with pytest.raises(PolicyError) as info:
            parse_policy(policy("p", body), "p.yaml")
        (problem,) = info.value.problems
        assert (problem.line, problem.path) == (6, path)
        assert "lone surrogate" in problem.message

    def test_a_surrogate_pair_is_text(self) -> None:
        """A surrogate pair spelled out is one character, and loads."""
        body = 'spec:\n  params:\n    word: "\\ud83d\\ude00"\n'
        assert parse_policy(policy("p", body)).document["spec"]["params"]["word"] == "\U0001f600"


class TestNodesCountedBeforeComposing:
    def test_too_many_values_are_refused_before_the_document_is_composed(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A document of more values than the limit is refused without composing it."""

        def never(self: _Loader) -> None:
            msg = "composed"
            raise AssertionError(msg)

        monkeypatch.setattr(_Loader, "get_single_node", never)
        text = "x: [" + ",".join(["1"] * (MAX_YAML_NODES + 1)) + "]\n"
        parsed, problems = parse_yaml(text, "p.yaml")
        assert not parsed.built
        assert [p.message for p in problems] == [
            f"document refused: more than {MAX_YAML_NODES} values (after alias expansion)"
        ]

    def test_the_composer_counts_too(self) -> None:
        """Without the libyaml pre-count, the loader stops composing at the limit."""
        text = "[" + ",".join(["1"] * (MAX_YAML_NODES + 1)) + "]"
        loader = _Loader(text)
        try:
            with pytest.raises(Exception, match="more than"):
                loader.get_single_node()
            assert loader.composed == MAX_YAML_NODES + 1
        finally:
            loader.dispose()


LOCKED_BASE = """\
spec:
  params:
    negations: [never, not]
    floor: 0.2
  rules:
    - name: pin-negations
      check: eviction
      when: score < params.floor && contains_any(segment.text, params.negations)
      effect: pin
      message: the segment states a negation
    - name: quiet
      check: eviction
      when: params["floor"] > 1.0
      effect: deny
      message: never
  locked: [/spec/rules/pin-negations]
"""


class TestLocksCoverWhatARuleReads:
    @pytest.fixture
    def base(self, tmp_path: Path) -> Path:
        return write(tmp_path / "base.yaml", policy("base", LOCKED_BASE))

    @pytest.mark.parametrize(
        ("body", "path", "locked"),
        [
            ('spec:\n  params: {negations: ["zzzz"]}\n', "$.spec.params.negations", "negations"),
            ("spec:\n  params: {floor: 0.0}\n", "$.spec.params.floor", "floor"),
            (
                "spec:\n  scores:\n    calibration: {fixed: {low: -100, high: 0.001}}\n",
                "$.spec.scores",
                "scores",
            ),
            ("spec:\n  scores: {min: 0.0, max: 100.0}\n", "$.spec.scores", "scores"),
        ],
    )
    def test_an_overlay_cannot_loosen_a_locked_rule(
        self, tmp_path: Path, base: Path, body: str, path: str, locked: str
    ) -> None:
        """Emptying a param a locked rule reads, or rescaling the scores, is refused."""
        top = write(tmp_path / "top.yaml", policy("top", body, extends="base.yaml"))
        with pytest.raises(PolicyError) as info:
            load_policy(top)
        (problem,) = info.value.problems
        assert (problem.file, problem.path) == (str(top), path)
        pointer = "/spec/scores" if locked == "scores" else f"/spec/params/{locked}"
        assert problem.message.startswith(f"changes {pointer}, which is locked by {base}:")
        assert "with /spec/rules/pin-negations (the locked rule 'pin-negations'" in problem.message

    @pytest.mark.usefixtures("base")
    def test_what_no_locked_rule_reads_stays_open(self, tmp_path: Path) -> None:
        """A new param, or a rule not locked, may still be set by an overlay."""
        body = "spec:\n  params: {other: 1}\n  rules:\n    - name: extra\n      check: eviction\n"
        body += "      when: params.other > 2.0\n      effect: deny\n      message: m\n"
        top = write(tmp_path / "top.yaml", policy("top", body, extends="base.yaml"))
        assert load_policy(top).document["spec"]["params"]["other"] == 1.0

    def test_a_rule_read_as_a_whole_locks_every_param(self, tmp_path: Path) -> None:
        """A locked rule reading params other than by name locks all of spec.params."""
        text = policy("base", LOCKED_BASE.replace("/spec/rules/pin-negations", "/spec/rules/quiet"))
        write(tmp_path / "base.yaml", text)
        body = "spec:\n  params: {other: 1}\n"
        top = write(tmp_path / "top.yaml", policy("top", body, extends="base.yaml"))
        with pytest.raises(PolicyError) as info:
            load_policy(top)
        assert messages(info)[0].startswith("changes /spec/params, which is locked by")

    def test_a_lock_on_a_rule_effect_only_does_not_lock_params(self, tmp_path: Path) -> None:
        """Only a lock on the rule or its expressions covers what they read."""
        locked = "/spec/rules/pin-negations/effect"
        text = policy("base", LOCKED_BASE.replace("/spec/rules/pin-negations", locked))
        write(tmp_path / "base.yaml", text)
        body = "spec:\n  params: {floor: 0.1}\n"
        top = write(tmp_path / "top.yaml", policy("top", body, extends="base.yaml"))
        assert load_policy(top).document["spec"]["params"]["floor"] == 0.1
