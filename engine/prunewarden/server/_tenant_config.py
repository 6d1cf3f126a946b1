"""What ``serve --tenants FILE`` reads: the tenants, their label selectors and their policies,
and how a request's labels choose one of them.

The file is YAML validated by ``tenants.v1.schema.json``; every problem is located
(``tenants.yaml:7:9: $.tenants[1].name: ...``), all of a file's problems reported together, as
for a policy. Selectors are Kubernetes ``matchLabels``: equality on every label listed; the
first tenant in file order whose selector matches decides, and a request no selector matches
goes to the ``default`` tenant. File order, not "most specific", because the one who writes the
file can then read which tenant wins without computing anything.

A tenant that lists ``tokens`` is a trust boundary: it decides only requests presenting one of
its bearer tokens, and a request presenting one is that tenant's (:mod:`._credentials`). A token
is never shown: not in a problem about it (``$.tenants[0].tokens[1]: not a token ...``), nor in a
``repr`` of the tenant.

A request carries its labels in its document (``labels``) or in a ``Prunewarden-Labels: k=v,k2=v2``
header. Both may be given; a label given in both with two values is refused rather than one
silently preferred.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden._schemas import read_yaml_file
from prunewarden._source import Parsed, locate
from prunewarden.errors import ExitCode, InputError, Problem, ProblemsError
from prunewarden.limits import (
    MAX_LABEL_NAME_CHARS,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
)

LABELS_HEADER = "Prunewarden-Labels"
HEADER_FILE = f"<header {LABELS_HEADER}>"


class TenantsError(ProblemsError):
    """A tenants file that cannot be used: unreadable, not valid against its schema, two
    tenants of one name, a default that names no tenant, a lock file beside a bundle."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class TenantSpec:
    """One tenant as the file gives it. ``policy``, ``shadow`` and ``lock`` are paths resolved
    against the file's folder, or with a bundle the names of policies in it (``lock`` None)."""

    name: str
    policy: str
    match_labels: Mapping[str, str] = field(default_factory=dict)
    shadow: str | None = None
    lock: str | None = None
    tokens: tuple[str, ...] = field(default=(), repr=False)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Every label of the selector is among ``labels`` with its value (an empty selector
        matches every request)."""
        return all(labels.get(key) == value for key, value in self.match_labels.items())


@dataclass(frozen=True, slots=True)
class TenantsConfig:
    """The tenants in file order, the default one's name, and the file they came from."""

    tenants: tuple[TenantSpec, ...]
    default: str
    source: str = "<tenants>"


def read_tenants(path: str | os.PathLike[str], *, bundle: bool = False) -> TenantsConfig:
    """The tenants file at ``path``; :class:`TenantsError` with every located problem. With
    ``bundle``, policies are named, not paths, and a tenant may not name a lock file."""
    shown = str(path)
    parsed, problems = read_yaml_file(path, "tenants")
    problems = _unquoted(problems)
    if parsed is None or problems:
        raise TenantsError(problems)
    data: dict[str, Any] = parsed.data
    folder = Path(shown).parent
    seen: set[str] = set()
    owners: dict[str, str] = {}  # each token, and the tenant it is given to
    tokens: dict[int, tuple[str, ...]] = {}
    for index, entry in enumerate(data["tenants"]):
        tokens[index], found = _tenant_tokens(entry, index, folder, owners, parsed)
        problems += found
        if entry["name"] in seen:
            message = f"{entry['name']!r}: two tenants of one name"
            problems.append(parsed.problem(("tenants", index, "name"), message))
        seen.add(entry["name"])
        if bundle and "lock" in entry:
            message = "a tenant of a bundle is held to the bundle's own lock file: leave it out"
            problems.append(parsed.problem(("tenants", index, "lock"), message, at_key=True))
    if data["default"] not in seen:
        message = f"{data['default']!r} is not one of the tenants ({', '.join(sorted(seen))})"
        problems.append(parsed.problem(("default",), message))
    if problems:
        raise TenantsError(problems)
    specs = (
        _spec(entry, folder, tokens[index], bundle=bundle)
        for index, entry in enumerate(data["tenants"])
    )
    return TenantsConfig(tuple(specs), data["default"], shown)


# Where a schema problem would quote a token (a tenant's tokens, or one of them).
_TOKEN_PATH = re.compile(r"\$\.tenants\[\d+\]\.tokens(\[\d+\])?")
_MALFORMED = (
    "not a token: give 16 to 512 printable ASCII characters, or {token_file: FILE} "
    "(the value is not shown)"
)
_NOT_TOKENS = "expected a list of 1 to 8 tokens (the value is not shown)"


def _unquoted(problems: list[Problem]) -> list[Problem]:
    """The schema's problems, those about a token without the value (a token is a secret,
    even a malformed one), one per place."""
    kept: list[Problem] = []
    for given in problems:
        found = _TOKEN_PATH.fullmatch(given.path)
        problem = given
        if found is not None:
            message = _MALFORMED if found.group(1) else _NOT_TOKENS
            problem = Problem(given.file, given.line, given.column, given.path, message)
            if problem in kept:
                continue
        kept.append(problem)
    return kept


def _tenant_tokens(
    entry: Mapping[str, Any],
    index: int,
    folder: Path,
    owners: dict[str, str],
    parsed: Parsed,
) -> tuple[tuple[str, ...], list[Problem]]:
    """The tenant's tokens, those given by ``token_file`` read, and the problems: a token
    given to two tenants, a file that holds none."""
    found: list[str] = []
    problems: list[Problem] = []
    for number, item in enumerate(entry.get("tokens", ())):
        where: tuple[str | int, ...] = ("tenants", index, "tokens", number)
        if isinstance(item, Mapping):
            where = (*where, "token_file")
            token, problem = _read_token_file(folder / item["token_file"])
            if problem is not None:
                problems.append(parsed.problem(where, f"{item['token_file']}: {problem}"))
                continue
        else:
            token = item
        owner = owners.setdefault(token, entry["name"])
        if owner != entry["name"]:
            message = f"this token is also tenant {owner!r}'s: a token is one tenant's"
            problems.append(parsed.problem(where, message))
        found.append(token)
    return tuple(found), problems


def _read_token_file(path: Path) -> tuple[str, str | None]:
    """The token on the file's first line, or why there is none (never quoting the file)."""
    try:
        lines = path.read_text(encoding="utf-8").strip().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        return "", f"cannot read: {exc.strerror if isinstance(exc, OSError) else 'not UTF-8'}"
    token = lines[0].strip() if lines else ""
    if not 16 <= len(token) <= 512 or not all("!" <= char <= "~" for char in token):
        return "", _MALFORMED.replace(", or {token_file: FILE}", " on its first line")
    return token, None


def _spec(
    entry: Mapping[str, Any], folder: Path, tokens: tuple[str, ...], *, bundle: bool
) -> TenantSpec:
    def where(value: str | None) -> str | None:
        if value is None or bundle:
            return value
        return str(folder / value)

    return TenantSpec(
        name=entry["name"],
        policy=where(entry["policy"]) or "",
        match_labels=dict(entry.get("selector", {}).get("matchLabels", {})),
        shadow=where(entry.get("shadow")),
        lock=where(entry.get("lock")),
        tokens=tokens,
    )


class LabelsError(InputError):
    """Labels a request cannot be routed by: a malformed header, or a label the header and
    the document give two values."""


def parse_labels_header(value: str, name: str = LABELS_HEADER) -> dict[str, str]:
    """``k=v,k2=v2`` as labels (spaces around items and ``=`` ignored; empty: none);
    :class:`LabelsError` locating each malformed item in the header ``name`` (line 1, its
    column)."""
    where = f"<header {name}>"
    labels: dict[str, str] = {}
    problems: list[Problem] = []
    offset = 0
    for item in value.split(","):
        column = offset + 1 + (len(item) - len(item.lstrip()))
        offset += len(item) + 1
        if not item.strip():
            continue
        key, sep, label = (part.strip() for part in item.partition("="))
        problem = _header_problem(key, sep, label, labels)
        if problem is not None:
            problems.append(Problem(where, 1, column, f"$.labels.{key or ''}", problem))
            continue
        labels[key] = label
    if len(labels) > MAX_LABELS:
        message = f"{len(labels)} labels, more than the limit of {MAX_LABELS}"
        problems.append(Problem(where, 1, 1, "$.labels", message))
    if problems:
        raise LabelsError(problems)
    return labels


def _header_problem(key: str, sep: str, label: str, seen: Mapping[str, str]) -> str | None:
    if not sep or not key:
        return "expected NAME=VALUE"
    if len(key) > MAX_LABEL_NAME_CHARS or len(label) > MAX_LABEL_VALUE_CHARS:
        return (
            f"a label name is at most {MAX_LABEL_NAME_CHARS} characters, a value at most "
            f"{MAX_LABEL_VALUE_CHARS}"
        )
    if key in seen and seen[key] != label:
        return f"given twice: {seen[key]!r} and {label!r}"
    return None


def merged_labels(
    header: Mapping[str, str] | None, document: Any, text: str | None = None
) -> dict[str, str] | None:
    """The request's labels: the header's and the document's ``labels`` together (None when
    neither gives any). A label both give with different values is refused, located at the
    document's key when ``text`` is given."""
    body = document.get("labels") if isinstance(document, Mapping) else None
    body = body if isinstance(body, Mapping) else None
    if header is None and body is None:
        return None
    merged = dict(header or {})
    problems = []
    for key, value in (body or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            continue  # the document's own validation says what is wrong with it
        if key in merged and merged[key] != value:
            message = (
                f"{value!r}, but the {LABELS_HEADER} header gives {merged[key]!r}: give a label "
                "once, or the same value in both"
            )
            problems.append(_located(text, ("labels", key), message))
        merged[key] = value
    if len(merged) > MAX_LABELS and not problems:
        message = f"{len(merged)} labels with the header's, more than the limit of {MAX_LABELS}"
        problems.append(Problem("<request>", 0, 0, "$.labels", message))
    if problems:
        raise LabelsError(problems)
    return merged


def _located(text: str | None, path: tuple[str, ...], message: str) -> Problem:
    if text is None:
        return Problem("<request>", 0, 0, "$." + ".".join(path), message)
    return locate(text, "<request>").problem(path, message, at_key=True)
