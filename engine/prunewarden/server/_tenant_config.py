"""What ``serve --tenants FILE`` reads: the tenants, their label selectors and their policies,
and how a request's labels choose one of them.

The file is YAML validated by ``tenants.v1.schema.json``; every problem is located
(``tenants.yaml:7:9: $.tenants[1].name: ...``), all of a file's problems reported together, as
for a policy. Selectors are Kubernetes ``matchLabels``: equality on every label listed; the
first tenant in file order whose selector matches decides, and a request no selector matches
goes to the ``default`` tenant. File order, not "most specific", because the one who writes the
file can then read which tenant wins without computing anything.

A request carries its labels in its document (``labels``) or in a ``Prunewarden-Labels: k=v,k2=v2``
header. Both may be given; a label given in both with two values is refused rather than one
silently preferred.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden._schemas import read_yaml_file
from prunewarden._source import locate
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
    if parsed is None or problems:
        raise TenantsError(problems)
    data: dict[str, Any] = parsed.data
    seen: set[str] = set()
    for index, entry in enumerate(data["tenants"]):
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
    folder = Path(shown).parent
    tenants = tuple(_spec(entry, folder, bundle=bundle) for entry in data["tenants"])
    return TenantsConfig(tenants, data["default"], shown)


def _spec(entry: Mapping[str, Any], folder: Path, *, bundle: bool) -> TenantSpec:
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
