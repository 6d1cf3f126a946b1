"""``prunewarden bundle build|sign|verify|keygen``: signed policy bundles (docs/fleet.md).

Registered by :mod:`prunewarden.cli`; each verb takes the parsed arguments and the two streams
and returns its exit code, as every command of the CLI does.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from prunewarden._files import read_regular
from prunewarden.bundle import build_bundle, generate_key_pair, key_id, sign_bundle, verify_bundle
from prunewarden.cli._common import UsageError, exit_codes_epilog
from prunewarden.cli._policy import base_dirs
from prunewarden.errors import ExitCode
from prunewarden.limits import MAX_BUNDLE_BYTES, MAX_POLICY_BYTES

BUNDLE_EXIT_CODES = exit_codes_epilog(
    {
        ExitCode.OK: "done; verify: signed by the key, every file as listed, every policy loads as "
        "listed",
        ExitCode.USAGE: "usage error: a file or key that cannot be read or written, a key of "
        "another kind",
        ExitCode.POLICY: "build, sign: a policy that does not load (or fails the lock file), a "
        "bundle unlike its manifest",
        ExitCode.UNVERIFIED: "verify: the bundle failed verification (incomplete, unsigned, signed "
        "by another key, a file unlike its manifest, a policy that does not load as listed)",
    }
)


def add_bundle_command(commands: Any) -> None:
    """``prunewarden bundle ...``: build, sign and verify policy bundles."""
    bundle = commands.add_parser(
        "bundle",
        help="build, sign and verify signed policy bundles (docs/fleet.md)",
        epilog=BUNDLE_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = bundle.add_subparsers(
        dest="bundle_command", required=True, metavar="VERB", parser_class=type(bundle)
    )

    def verb(name: str, help_text: str) -> Any:
        return verbs.add_parser(
            name,
            help=help_text,
            epilog=BUNDLE_EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    _add_build(verb)
    sign = verb("sign", "sign a bundle's manifest with an Ed25519 private key (PEM)")
    sign.add_argument("bundle", metavar="BUNDLE", help="the bundle to sign")
    sign.add_argument("--key", required=True, metavar="PEM", help="the private key")
    sign.add_argument("--out", metavar="FILE", help="where to write it (default: in place)")
    verify = verb("verify", "check a bundle's signature, every digest and every policy")
    verify.add_argument("bundle", metavar="BUNDLE", help="the bundle to verify")
    verify.add_argument("--key", required=True, metavar="PEM", help="the public key")
    verify.add_argument("--format", choices=["text", "json"], default="text")
    keygen = verb("keygen", "write a new Ed25519 key pair as PEM files")
    keygen.add_argument("--private", required=True, metavar="FILE", help="private key (0600)")
    keygen.add_argument("--public", required=True, metavar="FILE", help="public key")


def _add_build(verb: Callable[[str, str], Any]) -> None:
    """``bundle build``: its policies, revision, output, lock file, shadows and manifest fields."""
    build = verb("build", "pack policies, their bases and the lock file with a manifest")
    build.add_argument("policies", nargs="+", metavar="POLICY", help="policy YAML; first: default")
    build.add_argument("--revision", required=True, help="the bundle's revision (e.g. a commit)")
    build.add_argument("--out", required=True, metavar="FILE", help="the bundle to write")
    build.add_argument(
        "--lock", metavar="FILE", help="lock file (default: policy.lock beside the first policy)"
    )
    build.add_argument(
        "--shadow",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="the candidate decided beside the bundle's policy NAME (repeatable; manifest v2)",
    )
    build.add_argument(
        "--built-at",
        metavar="TIMESTAMP",
        help="the manifest's built_at (default: now; fix it for byte-identical rebuilds)",
    )
    build.add_argument(
        "--sequence",
        type=int,
        metavar="N",
        help="the manifest's sequence, which orders bundles: a server refuses one lower than "
        "the one in force (default: built_at in milliseconds since 1970)",
    )


def run_bundle(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    return int(_VERBS[args.bundle_command](args, stdout, stderr))


def _build(args: argparse.Namespace, stdout: IO[str], _stderr: IO[str]) -> int:
    data = build_bundle(
        args.policies,
        revision=args.revision,
        lock=args.lock,
        base_dirs=base_dirs(args),
        built_at=args.built_at,
        shadows=_shadows(args.shadow),
        sequence=args.sequence,
    )
    _write(args.out, data)
    stdout.write(f"{args.out}: revision {args.revision}, {len(args.policies)} policies\n")
    return ExitCode.OK


def _sign(args: argparse.Namespace, stdout: IO[str], _stderr: IO[str]) -> int:
    private = _read(args.key, MAX_POLICY_BYTES)
    try:
        signed = sign_bundle(_read(args.bundle, MAX_BUNDLE_BYTES), private, args.bundle)
    except ValueError as exc:
        raise UsageError(f"{args.key}: {exc}") from None
    out = args.out or args.bundle
    _write(out, signed)
    stdout.write(f"{out}: signed\n")
    return ExitCode.OK


def _verify(args: argparse.Namespace, stdout: IO[str], _stderr: IO[str]) -> int:
    public = _read(args.key, MAX_POLICY_BYTES)
    try:
        signer = key_id(public)
        verified = verify_bundle(_read(args.bundle, MAX_BUNDLE_BYTES), public, args.bundle)
    except ValueError as exc:
        raise UsageError(f"{args.key}: {exc}") from None
    manifest = verified.manifest
    if args.format == "json":
        out = {"bundle": args.bundle, "verified": True, "key_id": signer, **manifest.to_dict()}
        stdout.write(json.dumps(out, indent=2) + "\n")
        return ExitCode.OK
    stdout.write(
        f"{args.bundle}: verified: revision {manifest.revision}, built {manifest.built_at}, "
        f"{_sequence_text(manifest.sequence)}signed by {signer}\n"
    )
    for policy in manifest.policies:
        stdout.write(f"  {policy.name}@{policy.version} {policy.digest} ({policy.path})\n")
        shadow = policy.shadow
        if shadow is not None:
            stdout.write(
                f"    shadow {shadow.name}@{shadow.version} {shadow.digest} ({shadow.path})\n"
            )
    return ExitCode.OK


def _shadows(pairs: list[str]) -> dict[str, str]:
    """``--shadow NAME=FILE`` options as a mapping; one shadow per policy."""
    shadows: dict[str, str] = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--shadow {pair!r}: expected NAME=FILE (a policy's name, a file)")
        if name in shadows:
            raise UsageError(f"--shadow {pair!r}: {name} has a shadow already")
        shadows[name] = path
    return shadows


def _keygen(args: argparse.Namespace, stdout: IO[str], _stderr: IO[str]) -> int:
    pair = generate_key_pair()
    _write(args.private, pair.private_pem, private=True)
    _write(args.public, pair.public_pem)
    stdout.write(f"{args.public}: {key_id(pair.public_pem)}\n")
    return ExitCode.OK


def _read(path: str, limit: int) -> bytes:
    try:
        return read_regular(path, limit)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _write(path: str, data: bytes, *, private: bool = False) -> None:
    """Write ``data`` whole or not at all (a temporary file renamed over ``path``); a private
    key is created 0600 and never written over."""
    target = Path(path)
    try:
        if private:
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
            return
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(data)
        partial.replace(target)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None


_VERBS: dict[str, Any] = {"build": _build, "sign": _sign, "verify": _verify, "keygen": _keygen}


def _sequence_text(sequence: int | None) -> str:
    return "no sequence, " if sequence is None else f"sequence {sequence}, "
