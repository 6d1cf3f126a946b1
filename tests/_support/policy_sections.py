"""What the tests of an optional policy section share: a policy text around a section, a file
written from it, and the bundled default's digest that an absent section must leave as it is."""

from __future__ import annotations

import textwrap
from pathlib import Path

# The bundled default's digest before the optional sections existed (docs/guards.md shows it).
DEFAULT_DIGEST = "sha256:7134b8e2d3c988856d3bb44e66cd65bd208cecc51761692f41f586b6b72776f7"


def policy_text(body: str = "", *, name: str = "p", extends: str | None = None) -> str:
    """A policy named ``name`` (version 1.0.0) whose spec is ``body``, over ``extends``."""
    head = "apiVersion: prunewarden/v1\nkind: Policy\n"
    if extends is not None:
        head += f"extends: {extends}\n"
    head += f"metadata:\n  name: {name}\n  version: 1.0.0\n"
    return head + textwrap.dedent(body).lstrip("\n")


def write_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
