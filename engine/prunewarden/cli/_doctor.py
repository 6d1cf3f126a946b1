"""``prunewarden doctor``: a deployment's health in one line, for a probe or a person.

The checks are :func:`prunewarden.health.diagnose`; this module parses the options and prints
the line on standard output, whatever it says, so a probe reads one stream and the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import IO, Any

from prunewarden.cli._common import exit_codes_epilog
from prunewarden.cli._evaluate_audit import ENV_KEY
from prunewarden.errors import ExitCode
from prunewarden.health import diagnose

DOCTOR_EXIT_CODES = exit_codes_epilog(
    {
        ExitCode.OK: "healthy: every check passed",
        ExitCode.USAGE: "the audit log or checkpoint cannot be written or read, or a required "
        "extra is missing",
        ExitCode.POLICY: "a policy does not load, or does not match its lock file",
        ExitCode.UNVERIFIED: "the audit log's chain fails verification, or lost the "
        "checkpoint's head",
    }
)


def add_doctor(commands: Any) -> None:
    """``prunewarden doctor``."""
    doctor = commands.add_parser(
        "doctor",
        help="check a deployment (policy, lock, audit log, extras); one line, non-zero if sick",
        description="Check that the policy (and shadow) load and match their lock file, that "
        "the audit log can be\nappended to and its chain verifies, holding the head kept at "
        "the last checkpoint, and that\nthe extras named are installed. Prints one line.",
        epilog=DOCTOR_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    doctor.add_argument("--policy", required=True, metavar="FILE", help="the policy in force")
    doctor.add_argument("--shadow", metavar="FILE", help="the shadow candidate, if one runs")
    doctor.add_argument("--audit-log", metavar="PATH", help="the audit log (with its rotations)")
    doctor.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="a file keeping the chain's head: must still be in the chain; advanced when it is",
    )
    doctor.add_argument(
        "--key-env",
        metavar="NAME",
        default=ENV_KEY,
        help=f"environment variable holding the HMAC key of a keyed log (default: {ENV_KEY})",
    )
    doctor.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME",
        help="an extra the deployment needs installed, as the package's metadata declares "
        "it (repeatable; an unknown name lists the extras)",
    )
    doctor.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: the one line (default); json: the verdict, exit code and each finding",
    )


def run_doctor(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:  # noqa: ARG001
    key_text = os.environ.get(args.key_env, "")
    diagnosis = diagnose(
        args.policy,
        shadow=args.shadow,
        audit_log=args.audit_log,
        key=key_text.encode("utf-8") if key_text else None,
        checkpoint=args.checkpoint,
        extras=args.extra,
    )
    if args.format == "json":
        stdout.write(json.dumps(diagnosis.to_dict()) + "\n")
    else:
        stdout.write(diagnosis.line() + "\n")
    return diagnosis.exit_code
