"""The options of ``serve`` that say how a bundle is fetched and which bundles may follow the
one in force (docs/fleet.md, "Serving a bundle")."""

from __future__ import annotations

import argparse
from typing import Any

from prunewarden.bundle import BundleRules
from prunewarden.cli._common import UsageError
from prunewarden.limits import BUNDLE_FETCH_SECONDS


def add_bundle_rules(serve: Any) -> None:
    serve.add_argument(
        "--bundle-timeout",
        type=float,
        default=BUNDLE_FETCH_SECONDS,
        metavar="SECONDS",
        help="longest one fetch of the bundle may take in all, headers and body "
        f"(default {BUNDLE_FETCH_SECONDS:g}); a fetch over it fails and keeps the bundle in force",
    )
    serve.add_argument(
        "--bundle-min-sequence",
        type=int,
        metavar="N",
        help="refuse a bundle whose manifest sequence is lower than N (or has none), the first "
        "one included",
    )
    serve.add_argument(
        "--bundle-allow-rollback",
        action="store_true",
        help="activate a bundle of a lower sequence than the one in force (recorded as "
        "policy_rollback) instead of refusing it",
    )


def bundle_rules(args: argparse.Namespace) -> BundleRules:
    if args.bundle_timeout <= 0:
        raise UsageError(
            f"prunewarden serve: --bundle-timeout {args.bundle_timeout:g}: must be positive"
        )
    if args.bundle_min_sequence is not None and args.bundle_min_sequence < 0:
        raise UsageError("prunewarden serve: --bundle-min-sequence: must be 0 or more")
    return BundleRules(
        timeout=args.bundle_timeout,
        min_sequence=args.bundle_min_sequence,
        allow_rollback=args.bundle_allow_rollback,
    )
