"""The public ways to get a :class:`Policy`: from a file, from the bundled set, from text."""

from __future__ import annotations

from pathlib import Path

from prunewarden.policy import _overlay as overlay
from prunewarden.policy._bases import BaseDirs
from prunewarden.policy._lock import enforce, find
from prunewarden.policy._model import LockOption, Policy


def load_policy(path: str | Path, *, lock: LockOption = None, base_dirs: BaseDirs = ()) -> Policy:
    """Read, resolve, validate and compile the policy at ``path``; raise :class:`PolicyError`
    listing every problem found.

    An ``extends`` chain is resolved and its guardrails checked (``extends``);
    ``lock`` says which lock file holds the policy's ``name@version`` to a digest (the default
    finds ``policy.lock`` next to the policy, ``False`` checks none). An ``extends`` path must
    lead into the folder of the policy naming it (or below) or into one of ``base_dirs``, the
    folders of shared bases.
    """

    resolution = overlay.resolve_file(path, base_dirs)
    enforce(resolution, find(path, lock))
    return resolution.policy


def load_builtin_policy(name: str = "default") -> Policy:
    """A policy bundled with prunewarden, by name (``default``); its source is
    ``builtin:<name>``."""

    return overlay.load_builtin(name)


def parse_policy(text: str, filename: str = "<policy>", *, base_dirs: BaseDirs = ()) -> Policy:
    """Validate policy YAML text; raise :class:`PolicyError` listing every problem found.

    A relative ``extends`` is read relative to ``filename``'s folder, and must lead into it (or
    below) or into one of ``base_dirs``. No lock file is checked.
    """

    return overlay.parse(text, filename, base_dirs)
