"""Signed policy bundles: policies, their bases and the lock file packed into one archive with
a manifest (each file's SHA-256, each policy's identity, a revision), signed with Ed25519, and
verified before anything in them is used (docs/fleet.md).

Signing and verifying need the ``bundle`` extra (``cryptography``); building and reading do not.
"""

from __future__ import annotations

from prunewarden.bundle._build import build_bundle, sign_bundle
from prunewarden.bundle._fetch import (
    Activation,
    BundleRules,
    BundleWatch,
    Fetched,
    Fetcher,
    Rollback,
    bounded_problems,
    check_order,
    fetch,
)
from prunewarden.bundle._manifest import (
    MANIFEST_NAME,
    SIGNATURES_NAME,
    BundledPolicy,
    Manifest,
)
from prunewarden.bundle._signing import KeyPair, generate_key_pair, key_id
from prunewarden.bundle._verify import VerifiedBundle, verify_bundle

__all__ = [
    "MANIFEST_NAME",
    "SIGNATURES_NAME",
    "Activation",
    "BundleRules",
    "BundleWatch",
    "BundledPolicy",
    "Fetched",
    "Fetcher",
    "KeyPair",
    "Manifest",
    "Rollback",
    "VerifiedBundle",
    "bounded_problems",
    "build_bundle",
    "check_order",
    "fetch",
    "generate_key_pair",
    "key_id",
    "sign_bundle",
    "verify_bundle",
]
