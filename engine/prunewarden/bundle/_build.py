"""``bundle build`` and ``bundle sign``: policies, their bases and the lock file packed with a
manifest, and the manifest signed.

A build loads every policy first, exactly as a server would (``extends``, guardrails, the lock
file), so that a bundle that builds is a bundle whose policies load; the manifest then holds
each policy's ``name@version`` and digest as loaded, and the SHA-256 of each file's bytes as
they were read (a file that changes during the build is refused, not packed half-new). A
policy's shadow (its candidate) is loaded the same way, with the same lock file.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from prunewarden._files import read_regular
from prunewarden.bundle._archive import pack, unpack
from prunewarden.bundle._manifest import (
    MANIFEST_NAME,
    SIGNATURES_NAME,
    BundledPolicy,
    Manifest,
    check_revision,
    check_sequence,
    parse_manifest,
)
from prunewarden.bundle._signing import sign
from prunewarden.decision import utc_now
from prunewarden.errors import PolicyError, Problem
from prunewarden.limits import MAX_POLICY_BYTES
from prunewarden.policy import BUILTIN, LockOption, Policy, load_policy
from prunewarden.policy._lock import find


def build_bundle(  # noqa: PLR0913 - each a documented option
    policies: Sequence[str | os.PathLike[str]],
    *,
    revision: str,
    lock: LockOption = None,
    base_dirs: tuple[str | os.PathLike[str], ...] = (),
    built_at: str | None = None,
    shadows: Mapping[str, str | os.PathLike[str]] | None = None,
    sequence: int | None = None,
) -> bytes:
    """The unsigned bundle of ``policies`` (the first is the default a server runs), with
    every file they extend and the lock file (``lock``, or ``policy.lock`` beside the first
    policy; ``False``: none), under ``revision``. ``shadows`` maps a policy's name to the file
    of its candidate, decided beside it by a server running it. ``sequence`` orders bundles
    (a server refuses one lower than the one in force); default: ``built_at`` in milliseconds
    since 1970, so that a later build has a larger one and a rebuild with the same
    ``built_at`` the same bytes. Raises :class:`PolicyError` for a policy that does not load,
    two policies of one name, a shadow of no policy, a bad revision or sequence."""
    if not policies:
        raise PolicyError([Problem("<bundle>", 0, 0, "$.policies", "no policy to bundle")])
    why = check_revision(revision)
    if why is not None:
        raise PolicyError([Problem("<bundle>", 0, 0, "$.revision", f"{revision!r}: {why}")])
    built_at = built_at or utc_now()
    sequence = _sequence(sequence, built_at)
    lock_path = find(policies[0], lock)
    loaded = [
        load_policy(Path(path), lock=lock_path or False, base_dirs=base_dirs) for path in policies
    ]
    _refuse_duplicates(loaded, policies)
    candidates = _load_shadows(shadows or {}, loaded, lock_path, base_dirs)
    everything = [*loaded, *candidates.values()]
    paths = {Path(s.path).resolve() for p in everything for s in p.sources if not _builtin(s.path)}
    if lock_path is not None:
        paths.add(lock_path.resolve())
    root = Path(os.path.commonpath([path.parent for path in paths]))
    contents = {path.relative_to(root).as_posix(): _read(path) for path in paths}
    _refuse_changed(everything, root, contents)
    entries = tuple(
        dataclasses.replace(
            _entry(policy, root),
            shadow=_entry(candidates[policy.name], root) if policy.name in candidates else None,
        )
        for policy in loaded
    )
    manifest = Manifest(
        revision,
        built_at,
        {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()},
        entries,
        lock_path.resolve().relative_to(root).as_posix() if lock_path is not None else None,
        sequence,
    )
    return pack({**contents, MANIFEST_NAME: manifest.encode()})


def _sequence(sequence: int | None, built_at: str) -> int:
    """``sequence``, or ``built_at`` in milliseconds since 1970."""
    if sequence is None:
        try:
            moment = dt.datetime.fromisoformat(built_at)
        except ValueError:
            message = f"{built_at!r} is not a timestamp: give the sequence (--sequence N)"
            raise PolicyError([Problem("<bundle>", 0, 0, "$.built_at", message)]) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        sequence = int(moment.timestamp() * 1000)
    why = check_sequence(sequence)
    if why is not None:
        raise PolicyError([Problem("<bundle>", 0, 0, "$.sequence", f"{sequence!r}: {why}")])
    return sequence


def sign_bundle(bundle: bytes, private_pem: bytes, where: str = "<bundle>") -> bytes:
    """``bundle`` with its manifest signed by the key in ``private_pem`` (a signature it had
    is replaced). Raises :class:`PolicyError` when the bundle is unreadable or a file does not
    match its manifest (only a consistent bundle is signed), :class:`ValueError` for a PEM
    that holds no Ed25519 private key."""
    files, problems = unpack(bundle, where)
    manifest_bytes = files.get(MANIFEST_NAME)
    if manifest_bytes is None and not problems:
        problems.append(Problem(where, 0, 0, "$", f"no {MANIFEST_NAME}"))
    if problems or manifest_bytes is None:
        raise PolicyError(problems)
    manifest, problems = parse_manifest(manifest_bytes, f"{where}:{MANIFEST_NAME}")
    if manifest is not None:
        for name, digest in manifest.files.items():
            data = files.get(name)
            if data is None or hashlib.sha256(data).hexdigest() != digest:
                problems.append(Problem(where, 0, 0, f"$[{name!r}]", "missing or not as listed"))
    if problems:
        raise PolicyError(problems)
    files[SIGNATURES_NAME] = sign(manifest_bytes, private_pem)
    return pack(files)


def _entry(policy: Policy, root: Path) -> BundledPolicy:
    path = Path(policy.sources[0].path).resolve().relative_to(root).as_posix()
    return BundledPolicy(path, policy.name, policy.version, policy.digest)


def _load_shadows(
    shadows: Mapping[str, str | os.PathLike[str]],
    loaded: list[Policy],
    lock_path: Path | None,
    base_dirs: tuple[str | os.PathLike[str], ...],
) -> dict[str, Policy]:
    """Each candidate of ``shadows`` loaded, by the name of the policy it shadows."""
    names = {policy.name for policy in loaded}
    candidates = {}
    for name, path in sorted(shadows.items()):
        if name not in names:
            message = f"{name!r} is not a policy of the bundle ({', '.join(sorted(names))})"
            raise PolicyError([Problem(str(path), 0, 0, "$.shadow", message)])
        candidates[name] = load_policy(Path(path), lock=lock_path or False, base_dirs=base_dirs)
    return candidates


def _builtin(path: str) -> bool:
    return path.startswith(BUILTIN)


def _read(path: Path) -> bytes:
    try:
        return read_regular(path, MAX_POLICY_BYTES)
    except OSError as exc:
        raise PolicyError([Problem(str(path), 0, 0, "$", f"cannot read: {exc.strerror}")]) from None


def _refuse_duplicates(loaded: list[Policy], paths: Sequence[str | os.PathLike[str]]) -> None:
    seen: dict[str, str] = {}
    for policy, path in zip(loaded, paths, strict=True):
        if policy.name in seen:
            message = f"policy {policy.name!r} is also {seen[policy.name]}: names must differ"
            raise PolicyError([Problem(str(path), 0, 0, "$.metadata.name", message)])
        seen[policy.name] = str(path)


def _refuse_changed(loaded: list[Policy], root: Path, contents: dict[str, bytes]) -> None:
    """Every file packed holds the bytes its policy was loaded from."""
    for policy in loaded:
        for source in policy.sources:
            if _builtin(source.path):
                continue
            name = Path(source.path).resolve().relative_to(root).as_posix()
            if hashlib.sha256(contents[name]).hexdigest() != source.sha256:
                message = "changed while the bundle was built; build again"
                raise PolicyError([Problem(source.path, 0, 0, "$", message)])
