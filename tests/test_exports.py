"""What is public is written down in docs/api.md, and the code exports exactly that."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import prunewarden
import pytest

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"

SECTION = re.compile(r"^## `(prunewarden(?:\.\w+)*)`\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
NAMES = re.compile(r"^Public names: (.*?)\.$", re.MULTILINE | re.DOTALL)

#: Public modules that are not packages and export by ``__all__``; limits is public as a whole
#: (docs/api.md says so).
MODULES = (
    "prunewarden.aio",
    "prunewarden.client",
    "prunewarden.decision",
    "prunewarden.errors",
    "prunewarden.health",
    "prunewarden.integrations.anthropic",
    "prunewarden.integrations.claude_code",
    "prunewarden.integrations.codex",
    "prunewarden.integrations.compaction_gate",
    "prunewarden.integrations.compaction_preview",
    "prunewarden.integrations.edits",
    "prunewarden.integrations.langchain",
    "prunewarden.integrations.langgraph",
    "prunewarden.integrations.memory",
    "prunewarden.integrations.openai_agents",
    "prunewarden.integrations.openai_agents_edits",
    "prunewarden.metrics",
    "prunewarden.reload",
    "prunewarden.scoring.embed",
    "prunewarden.tracing",
)


def documented() -> dict[str, list[str]]:
    """Each section of docs/api.md: the module it names and its public names, in order."""
    sections = {}
    for module, body in SECTION.findall(API.read_text(encoding="utf-8")):
        (names,) = NAMES.findall(body)
        sections[module] = re.findall(r"`(\w+)`", names)
    return sections


def packages() -> list[str]:
    """prunewarden and every subpackage whose name has no leading underscore."""
    found = [
        info.name
        for info in pkgutil.walk_packages(prunewarden.__path__, "prunewarden.")
        if info.ispkg and not any(part.startswith("_") for part in info.name.split("."))
    ]
    return sorted(["prunewarden", *found])


def ruff_order(name: str) -> tuple[int, str]:
    """The order ruff keeps ``__all__`` in (RUF022): constants, then classes, then the rest."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, name)


class TestDocumentedApi:
    def test_every_package_and_public_module_has_a_section(self) -> None:
        """docs/api.md has one section per package and per public module, and no other."""
        assert sorted(documented()) == sorted([*packages(), *MODULES])

    @pytest.mark.parametrize("module", [*packages(), *MODULES])
    def test_all_is_what_the_page_lists(self, module: str) -> None:
        """A module's ``__all__`` is the list of its section: adding or removing a public
        name is done on purpose, here and in the code."""
        imported = importlib.import_module(module)
        assert list(imported.__all__) == documented()[module]

    @pytest.mark.parametrize("module", [*packages(), *MODULES])
    def test_every_exported_name_exists_once_and_in_order(self, module: str) -> None:
        """Each name of ``__all__`` can be imported, none twice, kept in ruff's order."""
        imported = importlib.import_module(module)
        names = list(imported.__all__)
        assert [name for name in names if not hasattr(imported, name)] == []
        assert len(set(names)) == len(names)
        assert names == sorted(names, key=ruff_order)


class TestPrivateNames:
    @pytest.mark.parametrize("module", packages())
    def test_a_package_exposes_none_of_ours_beyond_all(self, module: str) -> None:
        """A package holds no class or function of prunewarden under a public name outside its
        ``__all__``: what it keeps for itself is not public by accident."""
        imported = importlib.import_module(module)
        extra = {
            name
            for name, value in vars(imported).items()
            if not name.startswith("_")
            and name not in imported.__all__
            and str(getattr(value, "__module__", "")).startswith("prunewarden")
        }
        assert extra == set()
