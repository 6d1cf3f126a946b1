"""How a fitted policy's ``extends`` names its base: the base's ``builtin:`` name, else a path
relative to the fitted policy's folder (which may leave that folder). Shared by the fit of the
spread floor (:mod:`._fit`), of the fidelity floor (:mod:`._fit_fidelity`) and the command."""

from __future__ import annotations

import os
from pathlib import Path


def base_outside(base_ref: str) -> bool:
    """Whether ``base_ref`` (from :func:`extends_reference`) leaves the fitted policy's folder:
    then the fitted policy loads only where the base's folder is an allowed base folder
    (``--base-dir``), as every ``extends`` outside a policy's folder does."""
    return base_ref.startswith("../")


def extends_reference(base: str, out: str) -> str:
    """How the fitted policy names its base: ``builtin:<name>`` as given, else a path relative
    to the fitted policy's folder."""
    if base.startswith("builtin:"):
        return base
    folder = Path(out).resolve().parent
    return Path(os.path.relpath(Path(base).resolve(), folder)).as_posix()
