"""The package's extras, read from its installed metadata (``Provides-Extra``, ``Requires-Dist``),
and which of their requirements are installed: what ``prunewarden doctor --extra`` checks.

Nothing here imports an extra's modules: a requirement is met when a distribution of its name is
installed. A requirement's environment marker is evaluated for the clauses packaging's markers
write most (``extra``, ``sys_platform``, ``platform_system``, ``os_name``, ...); a clause this
module cannot read counts as true, so the requirement is still checked (a false "missing" rather
than a false "installed"). An extra that names the package's own extras (``prunewarden[a,b]``)
needs theirs too.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

DISTRIBUTION = "prunewarden"

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_CLAUSE = re.compile(r"""^\(?\s*(\w+)\s*(==|!=)\s*(['"])([^'"]*)\3\s*\)?$""")
_ENVIRONMENT = {
    "sys_platform": sys.platform,
    "platform_system": platform.system(),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "implementation_name": sys.implementation.name,
}


def normalize(name: str) -> str:
    """A distribution or extra name as metadata compares them (PEP 503 / PEP 685)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``Requires-Dist`` line of an extra: the distribution, the package's own extras it
    names (for ``prunewarden[...]``), and the requirement as written (without its marker)."""

    name: str
    extras: tuple[str, ...]
    text: str


def declared_extras(distribution: str = DISTRIBUTION) -> dict[str, tuple[Requirement, ...]]:
    """Every extra the installed ``distribution`` declares, in its metadata's order, with the
    requirements that apply on this machine; empty when its metadata is not installed."""
    try:
        found = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return {}
    extras: dict[str, list[Requirement]] = {
        normalize(name): [] for name in found.metadata.get_all("Provides-Extra") or ()
    }
    for line in found.requires or ():
        text, _, marker = line.partition(";")
        extra, applies = _marker(marker)
        name = _NAME.match(text)
        if extra is None or extra not in extras or not applies or name is None:
            continue
        own = tuple(normalize(e) for e in (name[2] or "").split(",") if e.strip())
        extras[extra].append(Requirement(normalize(name[1]), own, text.strip()))
    return {name: tuple(requirements) for name, requirements in extras.items()}


def _marker(marker: str) -> tuple[str | None, bool]:
    """The extra a marker names, and whether the rest of it holds here (``and`` clauses)."""
    extra, applies = None, True
    for clause in (c.strip() for c in re.split(r"\band\b", marker) if c.strip()):
        matched = _CLAUSE.match(clause)
        if matched is None:
            continue  # a clause not read here: the requirement is checked anyway
        variable, operator, _, value = matched.groups()
        if variable == "extra":
            extra = normalize(value)
        elif variable in _ENVIRONMENT:
            applies = applies and ((_ENVIRONMENT[variable] == value) == (operator == "=="))
    return extra, applies


def missing_requirements(
    extra: str, extras: Mapping[str, tuple[Requirement, ...]], distribution: str = DISTRIBUTION
) -> list[str]:
    """The requirements of ``extra`` (and of the package's own extras it names) whose
    distribution is not installed, as written in the metadata."""
    missing: list[str] = []
    seen: set[str] = set()
    pending = [normalize(extra)]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in extras.get(name, ()):
            if requirement.name == normalize(distribution):
                pending += requirement.extras
            elif not _installed(requirement.name):
                missing.append(requirement.text)
    return missing


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
