"""Policy test suites: ``*_test.yaml`` files of cases run against one policy.

A suite names a policy and lists cases, each an input document and what the decision must say about
it. Loading is as strict as loading a policy (the same YAML loader, a JSON Schema, every problem
located and reported together) and resolves everything a run needs: the policy, fixtures, input
files and table rows, each input validated against the policy. A run therefore never stops halfway
on a malformed suite; it evaluates every case, compares the decision with the expectations, and
records which reason codes and rules each policy's decisions exercised.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prunewarden._json import JsonPath, paths
from prunewarden._schemas import schema_problems
from prunewarden._source import Parsed, json_path, locate, parse_json, parse_yaml
from prunewarden.decision import Decision
from prunewarden.engine import Engine
from prunewarden.errors import InputError, PolicyError, Problem, SuiteError
from prunewarden.inputs import parse_request
from prunewarden.policy import Policy, load_builtin_policy, load_policy
from prunewarden.suites._expectations import (
    EXPECTATIONS,
    Locator,
    Mismatch,
    Observed,
    expectation_problems,
)

SUITE_SUFFIX = "_test.yaml"
BUILTIN_PREFIX = "builtin:"

# Directories never searched for suites: version control, virtual environments, caches.
_SKIPPED_DIRS = {"node_modules", "__pycache__"}

_PARAMETER = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
_WHOLE_PARAMETER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,63})\}")
_IN_CASE = re.compile(r"\$\.cases\[(\d+)\]")
_BUILTIN_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")

Status = Literal["passed", "failed", "error", "skipped"]


# --------------------------------------------------------------------------------------------
# The loaded suite


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
    """Loads suites, reading each policy once however many suites name it."""

    def __init__(self) -> None:
        self._policies: dict[str, Policy | PolicyError] = {}

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
            loader = lambda: load_policy(key)  # noqa: E731
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
        raw = Path(filename).read_bytes()
    except OSError as exc:
        return None, [Problem(filename, 0, 0, "$", f"cannot read: {exc.strerror}")]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return None, [Problem(filename, 0, 0, "$", f"not UTF-8 text (byte {exc.start})")]


def _cannot_read(filename: str, problem: Problem) -> str:
    return f"cannot read {filename!r}: {problem.message.removeprefix('cannot read: ')}"


# --------------------------------------------------------------------------------------------
# Locating problems in what a case was built from


@dataclass(frozen=True, slots=True)
class _Within:
    """A part of a parsed file, at ``prefix``."""

    parsed: Parsed
    prefix: JsonPath

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.parsed.problem((*self.prefix, *path), message, at_key=at_key)


@dataclass(slots=True)
class _LazyFile:
    """A file whose positions are only computed when a problem needs them."""

    text: str
    filename: str
    _parsed: Parsed | None = None

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        if self._parsed is None:
            self._parsed = locate(self.text, self.filename)
        return self._parsed.problem(path, message, at_key=at_key)


@dataclass(frozen=True, slots=True)
class _Row:
    """An expanded table case: a value that came from a ``${name}`` is located at the row."""

    template: _Within
    body: Any
    row: _Within

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        node = self.body
        for depth in range(len(path) + 1):
            if isinstance(node, str) and (whole := _WHOLE_PARAMETER.fullmatch(node)):
                return self.row.problem((whole[1], *path[depth:]), message, at_key=at_key)
            if depth == len(path) or not _has(node, path[depth]):
                break
            node = node[path[depth]]
        return self.template.problem(path, message, at_key=at_key)


@dataclass(frozen=True, slots=True)
class _Patched:
    """A fixture with a patch merged over it: a path the patch sets is located in the patch."""

    patch: Any
    in_patch: Locator
    in_fixture: Locator

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        node = self.patch
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return self.in_fixture.problem(path, message, at_key=at_key)
            node = node[part]
        return self.in_patch.problem(path, message, at_key=at_key)


def _has(node: Any, part: str | int) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


class _Mapped(Parsed):
    """A document built from pieces of a suite file (an expanded table case), given to the schema
    validator with its problems located where each piece was written."""

    def __init__(self, data: Any, filename: str, where: Locator) -> None:
        super().__init__(data, filename, built=True)
        self.where = where

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.where.problem(path, message, at_key=at_key)


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
        at = _Within(self.parsed, ("policy",))
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
        at = _Within(self.parsed, ("fixtures", name))
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
                source = _Source(parsed.data, parsed if yaml_file else _LazyFile(text, filename))
        self.files[filename] = source
        return source

    # Table expansion ------------------------------------------------------------------------

    def _expand(self, index: int, case: dict[str, Any]) -> list[_Draft]:
        at = _Within(self.parsed, ("cases", index))
        line = self.parsed.values.get(("cases", index), (0, 0))[0]
        body = {key: value for key, value in case.items() if key != "table"}
        used = _parameters(body)
        if "table" not in case:
            for name, path in used.items():
                message = f"parameter ${{{name}}} is used but the case has no table"
                self.problems.append(at.problem(path, message))
            return [] if used else [_Draft(body, at, line)]
        drafts = []
        for r, row in enumerate(case["table"]):
            row_at = _Within(self.parsed, ("cases", index, "table", r))
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
            expanded = _substitute(body, row)
            if not _parameters(case["name"]):
                expanded["name"] = f"{expanded['name']} [{_row_label(row)}]"
            row_line = self.parsed.values.get(("cases", index, "table", r), (line, 0))[0]
            drafts.append(_Draft(expanded, _Row(at, body, row_at), row_line, dict(row), row_at))
        return self._valid_rows(drafts)

    def _valid_rows(self, drafts: list[_Draft]) -> list[_Draft]:
        """The expanded cases that pass the schema: a row's value must fit where it lands."""
        valid = []
        for draft in drafts:
            document = {**self.data, "cases": [draft.body]}
            where = _Expanded(_Within(self.parsed, ()), draft.locator)
            problems = schema_problems("test-suite", _Mapped(document, self.filename, where))
            self.problems += problems
            if not problems:
                valid.append(draft)
        return valid

    # Cases ----------------------------------------------------------------------------------

    def _case(self, draft: _Draft, policy: Policy | None) -> Case | None:
        body, at = draft.body, draft.locator
        note = f"input of case {body['name']!r}"
        source = self._input(body["input"], _Sub(at, ("input",)), note)
        if source is None or policy is None:
            return None
        document = source.data
        problems = _input_problems(document, policy, source.locator)
        if isinstance(document, dict):  # otherwise the input's own problem says so
            expect_at = _Sub(at, ("expect",))
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
        return _Source(copy.deepcopy(found.data), _Noted(found.locator, note))

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
        in_fixture = _Noted(fixture.locator, note)
        if "patch" not in spec:
            return _Source(copy.deepcopy(fixture.data), in_fixture)
        patch = spec["patch"]
        merged = _merge(fixture.data, patch)
        return _Source(merged, _Patched(patch, _Sub(at, ("patch",)), in_fixture))

    def _unique_names(self, drafts: list[_Draft]) -> None:
        first: dict[str, int] = {}
        for draft in drafts:
            name = draft.body["name"]
            if name in first:
                message = f"duplicate case name {name!r} (first at line {first[name]})"
                where = draft.row.problem((), message) if draft.row else None
                self.problems.append(where or draft.locator.problem(("name",), message))
            first.setdefault(name, draft.line)


@dataclass(frozen=True, slots=True)
class _Sub:
    """A locator for a part of what another locator covers."""

    outer: Locator
    prefix: JsonPath

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.outer.problem((*self.prefix, *path), message, at_key=at_key)


@dataclass(frozen=True, slots=True)
class _Noted:
    """Adds a note to each problem's message (which case a shared input was used by)."""

    outer: Locator
    note: str

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        return self.outer.problem(path, f"{message} ({self.note})", at_key=at_key)


@dataclass(frozen=True, slots=True)
class _Expanded:
    """Locates a one-case suite document: the case through its own locator, the rest in the
    suite file."""

    suite: Locator
    case: Locator

    def problem(self, path: JsonPath, message: str, *, at_key: bool = False) -> Problem:
        if path[:2] == ("cases", 0):
            return self.case.problem(path[2:], message, at_key=at_key)
        return self.suite.problem(path, message, at_key=at_key)


def _parameters(value: Any, path: JsonPath = ()) -> dict[str, JsonPath]:
    """Every ``${name}`` used in string values, with the path of its first use."""
    found: dict[str, JsonPath] = {}
    if isinstance(value, str):
        for match in _PARAMETER.finditer(value):
            if not match[1]:
                found.setdefault(match[2], path)
    elif isinstance(value, dict):
        for key, item in value.items():
            for name, where in _parameters(item, (*path, key)).items():
                found.setdefault(name, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for name, where in _parameters(item, (*path, i)).items():
                found.setdefault(name, where)
    return found


def _substitute(value: Any, row: Mapping[str, Any]) -> Any:
    """``"${name}"`` becomes the row's value with its type; ``${name}`` inside a longer string
    becomes its text; ``$${`` is a literal ``${``."""
    if isinstance(value, str):
        if whole := _WHOLE_PARAMETER.fullmatch(value):
            return copy.deepcopy(row[whole[1]])
        return _PARAMETER.sub(
            lambda m: "${" + m[2] + "}" if m[1] else _text(row[m[2]]),
            value,
        )
    if isinstance(value, dict):
        return {key: _substitute(item, row) for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, row) for item in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _row_label(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={_text(value)}" for name, value in row.items())


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
        found = schema_problems("input", _Mapped(document, "", at))
        if found:
            return found
        # Beyond the schema (score range, unique ids, increasing cycles): the problems carry
        # rendered paths, mapped back to the document's own.
        located = {json_path(path): path for path in paths(document)}
        return [at.problem(located.get(p.path, ()), p.message) for p in exc.problems]
    return []


# --------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: Case
    status: Status
    seconds: float = 0.0
    mismatches: tuple[Mismatch, ...] = ()
    decision: Decision | None = None
    error: str = ""

    @property
    def message(self) -> str:
        """One line saying why the case did not pass (empty when it did)."""
        if self.status == "failed":
            return str(self.mismatches[0])
        if self.status == "skipped":
            return self.case.skip or ""
        return self.error


@dataclass(frozen=True, slots=True)
class SuiteResult:
    suite: Suite
    results: tuple[CaseResult, ...]

    @property
    def seconds(self) -> float:
        return sum(result.seconds for result in self.results)

    def count(self, status: Status) -> int:
        return sum(1 for result in self.results if result.status == status)


@dataclass(frozen=True, slots=True)
class InvalidSuite:
    """A suite file that could not be loaded, with every problem found in it or its policy."""

    file: str
    problems: tuple[Problem, ...]


class _Quiet:
    """Decisions made by test cases are not audit records: nothing is logged."""

    def info(self, event: str, **fields: Any) -> None:
        pass


def quiet_engine(policy: Policy) -> Engine:
    """An engine for running cases: it logs nothing."""
    return Engine(policy, logger=_Quiet())


def select(suites: Sequence[Suite], patterns: Sequence[str]) -> list[Suite]:
    """The suites with only the cases matching one of ``patterns`` (all cases when none).

    A pattern with ``*``, ``?`` or ``[`` is a glob matched against the suite name, the case
    name, or ``SUITE/CASE``; any other pattern is a substring of ``SUITE/CASE``. Matching
    ignores case. Suites left without cases are dropped.
    """
    if not patterns:
        return list(suites)
    chosen = []
    for suite in suites:
        cases = tuple(c for c in suite.cases if _matches(suite.name, c.name, patterns))
        if cases:
            chosen.append(Suite(suite.name, suite.file, suite.policy, suite.policy_source, cases))
    return chosen


def _matches(suite: str, case: str, patterns: Sequence[str]) -> bool:
    full = f"{suite}/{case}".casefold()
    for pattern in patterns:
        wanted = pattern.casefold()
        if any(ch in wanted for ch in "*?["):
            names = (suite.casefold(), case.casefold(), full)
            if any(fnmatch.fnmatchcase(name, wanted) for name in names):
                return True
        elif wanted in full:
            return True
    return False


def run_suite(suite: Suite, engine: Engine | None = None) -> SuiteResult:
    """Run every case of ``suite``; never raises for a case (a broken case is an ``error``)."""
    engine = engine if engine is not None else quiet_engine(suite.policy)
    return SuiteResult(suite, tuple(run_case(case, engine) for case in suite.cases))


def run_case(case: Case, engine: Engine) -> CaseResult:
    if case.skip:
        return CaseResult(case, "skipped")
    start = time.perf_counter()
    try:
        decision = engine.evaluate(case.document)
        seen = Observed(engine, case.document, decision)
        mismatches = tuple(
            found
            for name, check in EXPECTATIONS.items()
            if name in case.expect and (found := check(case.expect[name], seen)) is not None
        )
    except Exception as exc:  # noqa: BLE001 - one broken case must not stop the run
        seconds = time.perf_counter() - start
        return CaseResult(case, "error", seconds, error=f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    status: Status = "failed" if mismatches else "passed"
    return CaseResult(case, status, seconds, mismatches, decision)
