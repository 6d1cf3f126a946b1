"""Loading policy test suites: ``*_test.yaml`` files of cases run against one policy.

A suite names a policy and lists cases, each an input document and what the decision must say about
it. Loading is as strict as loading a policy (the same YAML loader, a JSON Schema, every problem
located and reported together) and resolves everything a run needs: the policy, fixtures, input
files and table rows, each input validated against the policy, so that a run never stops halfway
on a malformed suite.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prunewarden._files import open_regular
from prunewarden._json import paths
from prunewarden._schemas import schema_problems
from prunewarden._source import Parsed, json_path, parse_json, parse_yaml
from prunewarden.errors import InputError, PolicyError, Problem, SuiteError
from prunewarden.inputs import parse_request
from prunewarden.policy import Policy, load_builtin_policy, load_policy
from prunewarden.suites._expectations import Locator, expectation_problems
from prunewarden.suites._locators import (
    Expanded,
    LazyFile,
    Mapped,
    Noted,
    Part,
    Patched,
    Within,
)
from prunewarden.suites._tables import Row, parameters_used, row_label, substitute

SUITE_SUFFIX = "_test.yaml"
BUILTIN_PREFIX = "builtin:"

# Directories never searched for suites: version control, virtual environments, caches.
_SKIPPED_DIRS = {"node_modules", "__pycache__"}

_IN_CASE = re.compile(r"\$\.cases\[(\d+)\]")
_BUILTIN_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True, slots=True)
class Case:
    """One case, after table expansion: a resolved input document and its expectations."""

    name: str
    document: dict[str, Any]
    expect: dict[str, Any]
    file: str
    line: int
    skip: str | None = None
    parameters: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Suite:
    """A validated suite: its policy, loaded, and its cases, expanded and resolved."""

    name: str
    file: str
    policy: Policy
    policy_source: str  # builtin:NAME, or the policy file's path
    cases: tuple[Case, ...]


@dataclass(frozen=True, slots=True)
class InvalidSuite:
    """A suite file that could not be loaded, with every problem found in it or its policy."""

    file: str
    problems: tuple[Problem, ...]


def discover_suites(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Suite files under ``paths``: files as given, directories searched recursively for
    ``*_test.yaml`` (hidden directories, ``node_modules`` and ``__pycache__`` skipped).

    Raises :class:`FileNotFoundError` for a path that does not exist.
    """
    found: list[str] = []
    seen: set[Path] = set()
    for given in paths:
        path = os.path.normpath(given)
        if Path(path).is_file():
            candidates = [path]
        elif Path(path).is_dir():
            candidates = list(_walk(path))
        else:
            raise FileNotFoundError(path)
        for candidate in candidates:
            resolved = Path(candidate).resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.append(candidate)
    return found


def _walk(top: str) -> Iterator[str]:
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(SUITE_SUFFIX):
                yield os.path.normpath(Path(directory) / name)


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Read and validate one suite file; raise :class:`SuiteError` listing every problem
    (an invalid policy's problems included)."""
    return SuiteLoader().load(path)


class SuiteLoader:
    """Loads suites, reading each policy once however many suites name it; ``base_dirs``: the
    folders of shared bases their ``extends`` may lead into (see :func:`load_policy`)."""

    def __init__(self, base_dirs: Iterable[str | os.PathLike[str]] = ()) -> None:
        self._policies: dict[str, Policy | PolicyError] = {}
        self._base_dirs = tuple(base_dirs)

    def load(self, path: str | os.PathLike[str]) -> Suite:
        filename = os.fspath(path)
        text, problems = _read_text(filename)
        if text is None:
            raise SuiteError(problems)
        parsed, problems = parse_yaml(text, filename)
        if not parsed.built:
            raise SuiteError(problems)
        found = schema_problems("test-suite", parsed)
        if problems or any(not _IN_CASE.match(p.path) for p in found):
            raise SuiteError(problems + found)
        # Problems confined to some cases: the other cases are still checked, so that every
        # problem of the file is reported at once.
        broken = {int(m[1]) for p in found if (m := _IN_CASE.match(p.path))}
        return _Build(parsed, self, found, broken).suite()

    def policy(self, reference: str, base: Path) -> Policy:
        """The policy a suite names; raises :class:`PolicyError` (or FileNotFoundError for an
        unknown bundled name)."""
        if reference.startswith(BUILTIN_PREFIX):
            key = reference
            name = reference.removeprefix(BUILTIN_PREFIX)
            if not _BUILTIN_NAME.fullmatch(name):
                raise FileNotFoundError(reference)
            loader: Callable[[], Policy] = lambda: load_builtin_policy(name)  # noqa: E731
        else:
            key = os.path.normpath(base / reference)
            loader = lambda: load_policy(key, base_dirs=self._base_dirs)  # noqa: E731
        if key not in self._policies:
            try:
                self._policies[key] = loader()
            except PolicyError as exc:
                self._policies[key] = exc
        found = self._policies[key]
        if isinstance(found, PolicyError):
            raise found
        return found


def _read_text(filename: str) -> tuple[str | None, list[Problem]]:
    try:
        with open_regular(filename) as stream:  # a FIFO or a device is refused unread
            raw = stream.read()
    except OSError as exc:
        return None, [Problem(filename, 0, 0, "$", f"cannot read: {exc.strerror}")]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return None, [Problem(filename, 0, 0, "$", f"not UTF-8 text (byte {exc.start})")]


def _cannot_read(filename: str, problem: Problem) -> str:
    return f"cannot read {filename!r}: {problem.message.removeprefix('cannot read: ')}"


# --------------------------------------------------------------------------------------------
# Building a suite: policy, fixtures, table expansion, inputs, expectations


@dataclass(frozen=True, slots=True)
class _Source:
    """A resolved input document (or fragment) and where its values were written."""

    data: Any
    locator: Locator


@dataclass(slots=True)
class _Draft:
    """A case after table expansion, before its input is resolved."""

    body: dict[str, Any]
    locator: Locator
    line: int
    parameters: dict[str, Any] | None = None
    row: Locator | None = None  # where a table case's row is written


class _Build:
    def __init__(
        self, parsed: Parsed, loader: SuiteLoader, problems: list[Problem], broken: set[int]
    ) -> None:
        self.parsed = parsed
        self.data: dict[str, Any] = parsed.data
        self.loader = loader
        self.filename = parsed.filename
        self.base = Path(parsed.filename).parent
        self.problems = problems
        self.broken = broken
        self.files: dict[str, _Source | None] = {}
        self.fixtures: dict[str, _Source | None] = {}

    def suite(self) -> Suite:
        policy = self._policy()
        for name, value in self.data.get("fixtures", {}).items():
            self.fixtures[name] = self._fixture(name, value)
        drafts = [
            draft
            for i, case in enumerate(self.data["cases"])
            if i not in self.broken
            for draft in self._expand(i, case)
        ]
        cases = [case for draft in drafts if (case := self._case(draft, policy)) is not None]
        self._unique_names(drafts)
        if self.problems or policy is None:  # no policy: its problems are listed
            raise SuiteError(self.problems)
        return Suite(self.data["name"], self.filename, policy, self._policy_source(), tuple(cases))

    def _policy(self) -> Policy | None:
        reference = self.data["policy"]
        at = Within(self.parsed, ("policy",))
        try:
            return self.loader.policy(reference, self.base)
        except PolicyError as exc:
            self.problems += exc.problems
            count = len(exc.problems)
            message = f"{reference!r} is not a valid policy ({count} problem{'s' * (count > 1)})"
            self.problems.append(at.problem((), message))
        except FileNotFoundError:
            self.problems.append(at.problem((), f"no bundled policy {reference!r}"))
        return None

    def _policy_source(self) -> str:
        reference: str = self.data["policy"]
        if reference.startswith(BUILTIN_PREFIX):
            return reference
        return os.path.normpath(self.base / reference)

    def _fixture(self, name: str, value: dict[str, Any]) -> _Source | None:
        at = Within(self.parsed, ("fixtures", name))
        if "file" in value:
            return self._file(value["file"], at)
        return _Source(value, at)

    def _file(self, reference: str, at: Locator) -> _Source | None:
        """An input document read from a file relative to the suite (once per suite)."""
        filename = os.path.normpath(self.base / reference)
        if filename in self.files:
            return self.files[filename]
        text, problems = _read_text(filename)
        source: _Source | None = None
        if text is None:
            self.problems.append(at.problem(("file",), _cannot_read(filename, problems[0])))
        else:
            yaml_file = filename.endswith((".yaml", ".yml"))
            parsed, problems = (parse_yaml if yaml_file else parse_json)(text, filename)
            self.problems += problems
            if problems:
                count = len(problems)
                message = (
                    f"{filename!r} is not a valid document ({count} problem{'s' * (count > 1)})"
                )
                self.problems.append(at.problem(("file",), message))
            else:
                source = _Source(parsed.data, parsed if yaml_file else LazyFile(text, filename))
        self.files[filename] = source
        return source

    # Table expansion ------------------------------------------------------------------------

    def _expand(self, index: int, case: dict[str, Any]) -> list[_Draft]:
        at = Within(self.parsed, ("cases", index))
        line = self.parsed.values.get(("cases", index), (0, 0))[0]
        body = {key: value for key, value in case.items() if key != "table"}
        used = parameters_used(body)
        if "table" not in case:
            for name, path in used.items():
                message = f"parameter ${{{name}}} is used but the case has no table"
                self.problems.append(at.problem(path, message))
            return [] if used else [_Draft(body, at, line)]
        drafts = []
        for r, row in enumerate(case["table"]):
            row_at = Within(self.parsed, ("cases", index, "table", r))
            problems = [
                row_at.problem((), f"row lacks parameter {name!r}, which the case uses")
                for name in used
                if name not in row
            ]
            problems += [
                row_at.problem((name,), f"parameter {name!r} is not used by the case", at_key=True)
                for name in row
                if name not in used
            ]
            self.problems += problems
            if problems:
                continue
            expanded = substitute(body, row)
            if not parameters_used(case["name"]):
                expanded["name"] = f"{expanded['name']} [{row_label(row)}]"
            row_line = self.parsed.values.get(("cases", index, "table", r), (line, 0))[0]
            drafts.append(_Draft(expanded, Row(at, body, row_at), row_line, dict(row), row_at))
        return self._valid_rows(drafts)

    def _valid_rows(self, drafts: list[_Draft]) -> list[_Draft]:
        """The expanded cases that pass the schema: a row's value must fit where it lands."""
        valid = []
        for draft in drafts:
            document = {**self.data, "cases": [draft.body]}
            where = Expanded(Within(self.parsed, ()), draft.locator)
            problems = schema_problems("test-suite", Mapped(document, self.filename, where))
            self.problems += problems
            if not problems:
                valid.append(draft)
        return valid

    # Cases ----------------------------------------------------------------------------------

    def _case(self, draft: _Draft, policy: Policy | None) -> Case | None:
        body, at = draft.body, draft.locator
        note = f"input of case {body['name']!r}"
        source = self._input(body["input"], Part(at, ("input",)), note)
        if source is None or policy is None:
            return None
        document = source.data
        problems = _input_problems(document, policy, source.locator)
        if isinstance(document, dict):  # otherwise the input's own problem says so
            expect_at = Part(at, ("expect",))
            problems += expectation_problems(body["expect"], document, policy, expect_at)
        self.problems += problems
        if problems:
            return None
        return Case(
            name=body["name"],
            document=document,
            expect=body["expect"],
            file=self.filename,
            line=draft.line,
            skip=body.get("skip"),
            parameters=draft.parameters,
        )

    def _input(self, spec: dict[str, Any], at: Locator, note: str) -> _Source | None:
        """The case's input document; problems found in a fixture or an input file, which
        several cases may share, say which case they come from."""
        if "fixture" in spec:
            return self._from_fixture(spec, at, note)
        if "file" not in spec:
            return _Source(spec, at)
        found = self._file(spec["file"], at)
        if found is None:
            return None
        return _Source(copy.deepcopy(found.data), Noted(found.locator, note))

    def _from_fixture(self, spec: dict[str, Any], at: Locator, note: str) -> _Source | None:
        name = spec["fixture"]
        if name not in self.fixtures:
            known = ", ".join(sorted(self.fixtures)) or "none"
            message = f"no fixture named {name!r} (fixtures: {known})"
            self.problems.append(at.problem(("fixture",), message))
            return None
        fixture = self.fixtures[name]
        if fixture is None:
            return None
        in_fixture = Noted(fixture.locator, note)
        if "patch" not in spec:
            return _Source(copy.deepcopy(fixture.data), in_fixture)
        patch = spec["patch"]
        merged = _merge(fixture.data, patch)
        return _Source(merged, Patched(patch, Part(at, ("patch",)), in_fixture))

    def _unique_names(self, drafts: list[_Draft]) -> None:
        first: dict[str, int] = {}
        for draft in drafts:
            name = draft.body["name"]
            if name in first:
                message = f"duplicate case name {name!r} (first at line {first[name]})"
                where = draft.row.problem((), message) if draft.row else None
                self.problems.append(where or draft.locator.problem(("name",), message))
            first.setdefault(name, draft.line)


def _merge(base: Any, patch: Any) -> Any:
    """Mappings merge key by key; lists and scalars (null included) replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for key, value in patch.items():
            merged[key] = _merge(base.get(key), value)
        return merged
    return copy.deepcopy(patch)


def _input_problems(document: Any, policy: Policy, at: Locator) -> list[Problem]:
    """The input's problems under the policy, located where the suite or its file wrote them."""
    try:
        parse_request(document, policy.spec.scores)
    except InputError as exc:
        found = schema_problems("input", Mapped(document, "", at))
        if found:
            return found
        # Beyond the schema (score range, unique ids, increasing cycles): the problems carry
        # rendered paths, mapped back to the document's own.
        located = {json_path(path): path for path in paths(document)}
        return [at.problem(located.get(p.path, ()), p.message) for p in exc.problems]
    return []
