"""Where ``extends`` may lead: the folder of the policy naming it, or an allowed base folder.

A policy under review (a pull request validated in CI, its log public) is not trusted with the
host: ``extends: /etc/passwd`` or ``../../.env`` would read the runner's files into an error
message. So a path in ``extends`` must resolve, symbolic links followed, into the folder of the
file naming it or below, or into a folder the caller allows for shared bases (``base_dirs``, the
command line's ``--base-dir`` and ``PRUNEWARDEN_BASE_DIRS``), as OPA and Cerbos take their policy
roots from whoever runs them. ``builtin:<name>`` is always allowed.
"""

from __future__ import annotations

import os

BaseDirs = tuple[str | os.PathLike[str], ...]

OUTSIDE = (
    "outside the folder of this policy and of the allowed base folders; a shared base must be "
    "allowed explicitly (--base-dir, PRUNEWARDEN_BASE_DIRS, base_dirs=)"
)


def real_dirs(base_dirs: BaseDirs) -> tuple[str, ...]:
    """The allowed folders, symbolic links resolved."""
    return tuple(os.path.realpath(folder) for folder in base_dirs)


def confined(real: str, referrer: str, allowed: tuple[str, ...]) -> bool:
    """Whether the file at ``real`` lies in the folder of the file ``referrer`` (both resolved
    paths), or below it, or in an allowed folder."""
    own = os.path.dirname(referrer)  # noqa: PTH120 - a resolved path, as a string
    return any(os.path.commonpath((real, folder)) == folder for folder in (own, *allowed))
