"""Optional dependencies, imported when a command needs them.

Dask, fsspec, zstandard and pyarrow serve a few commands (a cluster run, remote or compressed
traces, Parquet output) and are extras of the package, so the engine's core installs without
them. The module that needs one asks for it here when it is used; a missing one is an
:class:`OSError` that says what to install, which callers turn into a located problem or a
usage error like any unreadable input.
"""

from __future__ import annotations

import errno
import importlib
from types import ModuleType


class MissingExtraError(OSError):
    """An optional dependency that is not installed; its message says which extra to install.
    An :class:`OSError`, so that a caller reading a file treats it as one more unreadable
    input; the command line answers any other as a usage error (exit 2), never exit 70."""


def optional_module(module: str, needed: str) -> ModuleType:
    """The optional dependency ``module``; :class:`MissingExtraError` saying ``needed`` when
    missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(errno.ENOENT, needed) from None
