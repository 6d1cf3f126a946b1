"""Policies: what one is (model), and how it is read, merged (extends), checked against its
guardrails and lock file, compared and explained.
"""

from __future__ import annotations

from prunewarden._identity import PolicyIdentity, PolicySource
from prunewarden.inputs import ScoreRange
from prunewarden.policy._classify import classifier
from prunewarden.policy._load import load_builtin_policy, load_policy, parse_policy
from prunewarden.policy._lock import LOCK_FILENAME
from prunewarden.policy._merge import Resolution
from prunewarden.policy._model import (
    Calibration,
    ClassifySettings,
    CollapseSettings,
    CompactionSettings,
    CusumSettings,
    EvictionSettings,
    LockOption,
    Mode,
    Policy,
    Spec,
    StalenessSettings,
    TransitionSettings,
)
from prunewarden.policy._overlay import BUILTIN, resolve_file

__all__ = [
    "BUILTIN",
    "LOCK_FILENAME",
    "Calibration",
    "ClassifySettings",
    "CollapseSettings",
    "CompactionSettings",
    "CusumSettings",
    "EvictionSettings",
    "LockOption",
    "Mode",
    "Policy",
    "PolicyIdentity",
    "PolicySource",
    "Resolution",
    "ScoreRange",
    "Spec",
    "StalenessSettings",
    "TransitionSettings",
    "classifier",
    "load_builtin_policy",
    "load_policy",
    "parse_policy",
    "resolve_file",
]
