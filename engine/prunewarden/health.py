"""A deployment's health, checked from its files: what ``prunewarden doctor`` prints in one line.

A deployment is healthy when its policy (and shadow candidate) load and match their lock file,
its audit log can be appended to and its hash chain verifies, still holding the head hash kept
at the last checkpoint (so that records cut from the end show), and the optional extras it
relies on are installed. Every check runs, so one run names every problem; the exit code is
that of the first that failed, in that order.

A checkpoint is a file holding one head hash. After the chain verifies, the current head is
written to it (replacing the file whole), so the next run checks that nothing recorded since
this one was removed; ``prunewarden audit verify --expect "$(cat FILE)"`` reads the same file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prunewarden._extras import declared_extras, missing_requirements, normalize
from prunewarden._files import read_regular
from prunewarden.audit import rotated_files, verify_files
from prunewarden.errors import ExitCode, PolicyError
from prunewarden.policy import BUILTIN, LOCK_FILENAME, Policy, load_policy

# A checkpoint holds one head hash and a newline; anything longer is not one.
_CHECKPOINT_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's result: what was checked, whether it passed, and what to say about it."""

    check: str
    ok: bool
    detail: str
    exit_code: int = ExitCode.OK

    def __str__(self) -> str:
        return f"{self.check} {self.detail}"


@dataclass(slots=True)
class Diagnosis:
    """Every check's finding, in the order they ran."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(finding.ok for finding in self.findings)

    @property
    def exit_code(self) -> int:
        failed = [finding for finding in self.findings if not finding.ok]
        return failed[0].exit_code if failed else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        """What ``prunewarden doctor --format json`` prints: the verdict, the exit code and
        each finding."""
        return {
            "ok": self.ok,
            "exit_code": int(self.exit_code),
            "findings": [
                {"check": f.check, "ok": f.ok, "detail": f.detail, "exit_code": int(f.exit_code)}
                for f in self.findings
            ],
        }

    def line(self) -> str:
        """One line: ``ok: ...`` or ``FAIL: <what failed>; ok: <what passed>``."""
        passed = "; ".join(str(f) for f in self.findings if f.ok)
        if self.ok:
            return f"ok: {passed}"
        failed = "; ".join(str(f) for f in self.findings if not f.ok)
        return f"FAIL: {failed}" + (f"; ok: {passed}" if passed else "")


def diagnose(  # noqa: PLR0913 - each a part of a deployment
    policy: str,
    *,
    shadow: str | None = None,
    audit_log: str | None = None,
    key: bytes | None = None,
    checkpoint: str | None = None,
    extras: Sequence[str] = (),
) -> Diagnosis:
    """Check a deployment; never raises for what it finds (the diagnosis says)."""
    diagnosis = Diagnosis()
    diagnosis.findings.append(_check_policy("policy", policy))
    if shadow is not None:
        diagnosis.findings.append(_check_policy("shadow", shadow))
    if audit_log is not None:
        diagnosis.findings += _check_sink(audit_log, key, checkpoint)
    extras_finding = _check_extras(extras)
    if extras_finding is not None:
        diagnosis.findings.append(extras_finding)
    return diagnosis


def _check_policy(role: str, path: str) -> Finding:
    try:
        loaded = load_policy(path)
    except PolicyError as exc:
        first = str(exc.problems[0]) if exc.problems else str(exc)
        more = len(exc.problems) - 1
        extra = f" (and {more} more problem{'s' * (more != 1)})" if more > 0 else ""
        return Finding(role, False, f"{first}{extra}", ExitCode.POLICY)
    return Finding(role, True, f"{_identity(loaded)}, {_lock_state(path)}")


def _identity(policy: Policy) -> str:
    return f"{policy.name}@{policy.version} {policy.digest[:19]}"


def _lock_state(path: str) -> str:
    if path.startswith(BUILTIN):
        return "bundled"
    lock = Path(path).parent / LOCK_FILENAME
    return f"locked by {lock}" if lock.is_file() else f"no {LOCK_FILENAME}"


def _check_sink(path: str, key: bytes | None, checkpoint: str | None) -> list[Finding]:
    stream = _stream_kind(path)
    if stream is not None:
        return [_check_stream(path, stream)]
    return _check_audit(path, key, checkpoint)


def _check_audit(path: str, key: bytes | None, checkpoint: str | None) -> list[Finding]:
    writable = _writable(path)
    if writable is not None:
        return [Finding("audit", False, f"{path}: {writable}", ExitCode.USAGE)]
    files = rotated_files(path)
    if not files:
        return [Finding("audit", True, f"{path} writable, no records yet")]
    expected = _read_checkpoint(checkpoint)
    if isinstance(expected, Finding):
        return [expected]
    try:
        result = verify_files(files, key=key, expect=[expected] if expected else [])
    except OSError as exc:
        return [Finding("audit", False, f"{path}: cannot read: {exc.strerror}", ExitCode.USAGE)]
    fatal = [finding for finding in result.findings if finding.fatal]
    if fatal:
        return [Finding("audit", False, f"chain fails: {fatal[0]}", ExitCode.UNVERIFIED)]
    records = sum(report.records for report in result.files)
    head = result.files[-1].head if result.files else None
    held = ", checkpoint held" if expected else ""
    found = [Finding("audit", True, f"{path} writable, {records} records verify{held}")]
    if checkpoint is not None and head is not None:
        found.append(_write_checkpoint(checkpoint, head))
    return found


def _stream_kind(path: str) -> str | None:
    """Which stream sink the log is (a FIFO, a character device), or None for a file."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a character device" if stat.S_ISCHR(mode) else None


def _check_stream(path: str, kind: str) -> Finding:
    """A stream sink keeps its chain in memory: there is nothing to verify, only whether a
    record can go out now. Opened without blocking, as the writer opens it: opening a FIFO
    for writing otherwise waits for a reader, and doctor waited forever."""
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        os.close(os.open(path, flags))
    except OSError as exc:
        reason = "no reader" if exc.errno == errno.ENXIO else exc.strerror
        return Finding(
            "audit", False, f"{path}: not writable: {kind} with {reason}", ExitCode.USAGE
        )
    return Finding(
        "audit", True, f"{path} writable ({kind}: its chain is not kept, nothing to verify)"
    )


def _writable(path: str) -> str | None:
    """Why records cannot be appended to ``path``, or None. Opening for append writes
    nothing; a log not created yet needs a writable folder."""
    target = Path(path)
    if target.exists():
        try:
            with target.open("ab"):
                pass
        except OSError as exc:
            return f"not writable: {exc.strerror}"
        return None
    folder = target.parent
    if not folder.is_dir():
        return f"not writable: no folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"not writable: folder {folder} is not writable"
    return None


def _read_checkpoint(checkpoint: str | None) -> str | Finding | None:
    if checkpoint is None:
        return None
    try:
        # A regular file only, and small: a FIFO named as the checkpoint hung doctor forever.
        text = read_regular(checkpoint, _CHECKPOINT_BYTES).decode("ascii").strip()
    except FileNotFoundError:
        return None  # the first run starts the checkpoint
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not a head hash"
        return Finding("checkpoint", False, f"{checkpoint}: cannot read: {reason}", ExitCode.USAGE)
    return text or None


def _write_checkpoint(checkpoint: str, head: str) -> Finding:
    target = Path(checkpoint)
    scratch = target.with_name(f".{target.name}.tmp")
    try:
        scratch.write_text(head + "\n", encoding="ascii")
        scratch.replace(target)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        reason = f"{checkpoint}: cannot write: {exc.strerror}"
        return Finding("checkpoint", False, reason, ExitCode.USAGE)
    return Finding("checkpoint", True, f"{checkpoint} at {head[:19]}")


def _check_extras(wanted: Sequence[str]) -> Finding | None:
    """Whether each extra named is installed, as the package's metadata declares it; None
    when none is named."""
    if not wanted:
        return None
    declared = declared_extras()
    names = list(dict.fromkeys(normalize(name) for name in wanted))
    unknown = [name for name in names if name not in declared]
    if unknown:
        known = ", ".join(declared) if declared else "none: prunewarden's metadata is not installed"
        detail = f"unknown: {', '.join(unknown)} (the extras of prunewarden: {known})"
        return Finding("extras", False, detail, ExitCode.USAGE)
    missing = {name: missing_requirements(name, declared) for name in names}
    absent = [name for name in names if missing[name]]
    if absent:
        needs = "; ".join(f"{name} needs {', '.join(missing[name])}" for name in absent)
        command = f"pip install 'prunewarden[{','.join(absent)}]'"
        detail = f"not installed: {', '.join(absent)} ({command}): {needs}"
        return Finding("extras", False, detail, ExitCode.USAGE)
    return Finding("extras", True, f"{', '.join(names)} installed")


__all__ = ["Diagnosis", "Finding", "diagnose"]
