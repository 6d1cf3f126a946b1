"""``bundle verify``, and what a server does before it activates a bundle: the signature
first, then every file against the manifest, then every policy loaded and held to the identity
the manifest gives it.

Nothing of a bundle is trusted before its manifest's signature checks; a file the manifest does
not list is refused rather than ignored (an archive carries exactly what was signed). The
policies are read from a private folder that lives only while they load: what stays is the
compiled :class:`~prunewarden.policy.Policy`, whose files are named ``bundle:REVISION/PATH`` (the
same on every replica, and what a reviewer finds in the archive), and whose identity carries the
bundle's revision, so that every decision made under it names the revision.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prunewarden._identity import PolicySource
from prunewarden.bundle._archive import unpack
from prunewarden.bundle._manifest import (
    MANIFEST_NAME,
    SIGNATURES_NAME,
    BundledPolicy,
    Manifest,
    parse_manifest,
)
from prunewarden.bundle._signing import check
from prunewarden.errors import BundleError, PolicyError, Problem
from prunewarden.policy import LockOption, Policy, load_policy

BUNDLE_PREFIX = "bundle:"


@dataclass(frozen=True, slots=True)
class VerifiedBundle:
    """A bundle whose signature and digests checked, its policies loaded, by name; ``shadows``:
    the candidates the manifest names, by the name of the policy each shadows."""

    manifest: Manifest
    policies: Mapping[str, Policy]
    shadows: Mapping[str, Policy] = field(default_factory=dict)

    @property
    def revision(self) -> str:
        return self.manifest.revision


def verify_bundle(data: bytes, public_pem: bytes, where: str = "<bundle>") -> VerifiedBundle:
    """The bundle in ``data`` verified against the Ed25519 public key in ``public_pem``, and its
    policies loaded; :class:`BundleError` listing every problem otherwise, :class:`ValueError`
    for a PEM that holds no Ed25519 public key."""
    files, problems = unpack(data, where)
    if problems or not files:
        raise BundleError(problems or [Problem(where, 0, 0, "$", "an empty archive")])
    manifest_bytes = files.pop(MANIFEST_NAME, None)
    signatures = files.pop(SIGNATURES_NAME, None)
    if manifest_bytes is None:
        raise BundleError([Problem(where, 0, 0, "$", f"no {MANIFEST_NAME}")])
    if signatures is None:
        raise BundleError([Problem(where, 0, 0, "$", f"unsigned: no {SIGNATURES_NAME}")])
    refused = check(manifest_bytes, signatures, public_pem)
    if refused is not None:
        raise BundleError([Problem(where, 0, 0, f"$[{SIGNATURES_NAME!r}]", refused)])
    manifest, problems = parse_manifest(manifest_bytes, f"{where}:{MANIFEST_NAME}")
    if manifest is None:
        raise BundleError(problems)
    problems = _file_problems(manifest, files, where)
    if problems:
        raise BundleError(problems)
    return _load(manifest, files, where)


def _file_problems(manifest: Manifest, files: Mapping[str, bytes], where: str) -> list[Problem]:
    problems = []
    for name in sorted({*manifest.files, *files}):
        listed, data = manifest.files.get(name), files.get(name)
        if data is None:
            problems.append(Problem(where, 0, 0, f"$[{name!r}]", "listed in the manifest, absent"))
        elif listed is None:
            problems.append(Problem(where, 0, 0, f"$[{name!r}]", "not listed in the manifest"))
        elif hashlib.sha256(data).hexdigest() != listed:
            found = hashlib.sha256(data).hexdigest()
            message = f"SHA-256 {found}, the manifest lists {listed}"
            problems.append(Problem(where, 0, 0, f"$[{name!r}]", message))
    return problems


def _load(manifest: Manifest, files: Mapping[str, bytes], where: str) -> VerifiedBundle:
    """Each policy of the manifest (and each shadow), loaded from a private copy of the files
    and renamed into the bundle; raises :class:`BundleError` when one does not load as the
    manifest says."""
    prefix = f"{BUNDLE_PREFIX}{manifest.revision}/"
    loaded: dict[str, Policy] = {}
    shadows: dict[str, Policy] = {}
    problems: list[Problem] = []
    with tempfile.TemporaryDirectory(prefix="prunewarden-bundle-") as folder:
        root = Path(folder).resolve()
        for name, data in files.items():
            target = root / name
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            except OSError as exc:  # e.g. "a" and "a/b" both files of the archive
                message = f"cannot be laid out as a file ({exc.strerror})"
                problems.append(Problem(where, 0, 0, f"$[{name!r}]", message))
        if problems:
            raise BundleError(problems)
        lock: LockOption = root / manifest.lock if manifest.lock is not None else False
        for index, entry in enumerate(manifest.policies):
            at = f"$.policies[{index}]"
            policy = _load_entry(entry, root, lock, (where, at, prefix), problems)
            if policy is not None:
                loaded[policy.name] = _in_bundle(policy, root, prefix, manifest.revision)
            if entry.shadow is None:
                continue
            shadow = _load_entry(
                entry.shadow, root, lock, (where, f"{at}.shadow", prefix), problems
            )
            if shadow is not None:
                shadows[entry.name] = _in_bundle(shadow, root, prefix, manifest.revision)
    if problems:
        raise BundleError(problems)
    return VerifiedBundle(manifest, loaded, shadows)


def _load_entry(
    entry: BundledPolicy,
    root: Path,
    lock: LockOption,
    located: tuple[str, str, str],
    problems: list[Problem],
) -> Policy | None:
    """The policy ``entry`` lists if it loads to the identity listed, else None with its
    problems appended (``located``: the bundle, the entry's JSON path, the files' prefix)."""
    where, at, prefix = located
    try:
        policy = load_policy(root / entry.path, lock=lock, base_dirs=(root,))
    except PolicyError as exc:
        problems.extend(_renamed(problem, root, prefix) for problem in exc.problems)
        return None
    if (policy.name, policy.version, policy.digest) != (entry.name, entry.version, entry.digest):
        found = f"{policy.name}@{policy.version} {policy.digest}"
        listed = f"{entry.name}@{entry.version} {entry.digest}"
        problems.append(Problem(where, 0, 0, at, f"loads as {found}, the manifest lists {listed}"))
        return None
    return policy


def _in_bundle(policy: Policy, root: Path, prefix: str, revision: str) -> Policy:
    sources = tuple(
        PolicySource(_bundle_path(source.path, root, prefix), source.sha256)
        for source in policy.sources
    )
    identity = dataclasses.replace(policy.identity, bundle_revision=revision)
    source = _bundle_path(policy.source, root, prefix)
    return dataclasses.replace(policy, identity=identity, source=source, sources=sources)


def _bundle_path(path: str, root: Path, prefix: str) -> str:
    try:
        return prefix + Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return path  # a builtin: policy, named as it is everywhere


def _renamed(problem: Problem, root: Path, prefix: str) -> Problem:
    return dataclasses.replace(problem, file=_bundle_path(problem.file, root, prefix))
