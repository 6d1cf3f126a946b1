"""Hot reload: an engine whose policy follows its files, without restarts and without risk.

:class:`ReloadingEngine` holds one :class:`~prunewarden.engine.Engine` - an immutable snapshot of
a compiled policy (and of its shadow candidate, if any) - and replaces it by a single reference
assignment once a changed policy has loaded completely. A decision reads that reference once,
when it begins, and runs to its end on that snapshot: it records the version in force when it
began, and no decision ever sees a half-loaded policy.

A change is noticed by polling (modification time, size and inode of every file of the policy's
extends chain, of the shadow's, and of the lock files) in a background thread every
``interval`` seconds, or at once by :meth:`ReloadingEngine.reload`. The poller waits until a
change has settled (the same signatures on two consecutive polls), so a file written in place in
several steps is not read half-written. After a load, every file is hashed again: if one changed
while the chain was being read (a deploy replacing two files, one before and one after it was
read), the load is discarded and tried again rather than mixing two versions.

A change that does not load keeps the last good policy in force, logs ``policy_reload_failed``
with every problem (once per content), and is tried again when the files change again.
Replacing files atomically (write a temporary file, then rename it over the old one) is what
editors, ``kubectl`` and configuration managers do, and is always safe.

With ``bundle=`` the policy comes from a signed bundle (:mod:`prunewarden.bundle`), asked for
again at each poll (``If-None-Match``) and swapped in once verified whole; any failure keeps
the last good bundle and is logged once, as for files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from prunewarden._identity import PolicyIdentity
from prunewarden._status import ReloadOutcome, ReloadStatus
from prunewarden.audit import log_policy_reload_failed, log_policy_reloaded, log_policy_rollback
from prunewarden.decision import utc_now
from prunewarden.engine import Engine, EngineCalls
from prunewarden.errors import BundleError, PolicyError, Problem
from prunewarden.policy import BUILTIN, LockOption, Policy, load_policy
from prunewarden.policy._watch import (
    Signature,
    contents_digest,
    file_signature,
    lock_files,
    pair_differs,
    reused_version,
    unchanged_since_read,
)
from prunewarden.session import Session, SessionBinding, SessionRegistry, SessionStore

if TYPE_CHECKING:
    from prunewarden.bundle import Activation, BundleRules, BundleWatch

_diagnostics = logging.getLogger("prunewarden")

DEFAULT_INTERVAL = 1.0  # seconds between two looks at the files
_ATTEMPTS = 3  # loads tried by reload() while the files keep changing under it


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What a reload did: whether a new snapshot is in force, which policy is in force, and
    why a change was refused (or could not be read consistently)."""

    changed: bool
    policy: PolicyIdentity
    problems: tuple[str, ...] = ()


# Called with what each reload did (also the background poller's); what it returns is ignored.
ReloadHook = Callable[[ReloadResult], object]


class _ChangedWhileReadingError(Exception):
    """The files changed while the chain was read: what was read may mix two versions."""


class ReloadingEngine(EngineCalls):
    """An engine on the policy at ``path`` that reloads it when its files change.

    ``shadow`` names a candidate policy file, watched the same way (see
    :class:`~prunewarden.pipeline.Shadow`); ``lock`` chooses the lock file and ``base_dirs`` the
    folders of shared bases as for :func:`~prunewarden.load_policy`. Other keyword arguments
    (``logger``, ``rule_cache_size``, ...) go to every :class:`Engine` built. With ``interval``
    0 nothing is polled and only :meth:`reload` reloads. The first load must succeed: it raises
    :class:`PolicyError`.

    Instead of ``path``: ``bundle`` (a path or an HTTP(S) URL), ``bundle_key`` (the Ed25519
    public key, PEM bytes) and ``bundle_policy`` (None: the manifest's first), run with the
    shadow the manifest names for it, both swapped in together; a first bundle that fails
    raises :class:`~prunewarden.errors.BundleError`. ``bundle_rules``
    (:class:`~prunewarden.bundle.BundleRules`): the total deadline of a fetch, the lowest
    sequence run, whether a rollback is allowed; :meth:`close` ends a fetch in flight at once.

    Its decision calls are :class:`Engine`'s, with the same signatures; each runs on the
    snapshot in force when it begins.

    Thread-safe: any number of threads may evaluate while a reload happens.
    """

    def __init__(  # noqa: PLR0913 - each a documented option
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        bundle: str | None = None,
        bundle_key: bytes | None = None,
        bundle_policy: str | None = None,
        bundle_rules: BundleRules | None = None,
        shadow: str | os.PathLike[str] | None = None,
        lock: LockOption = None,
        base_dirs: tuple[str | os.PathLike[str], ...] = (),
        interval: float = DEFAULT_INTERVAL,
        logger: Any = None,
        **engine_options: Any,
    ) -> None:
        if (path is None) == (bundle is None) or (bundle is not None and bundle_key is None):
            msg = "give a policy path, or a bundle with its key (not both)"
            raise TypeError(msg)
        self._bundle: BundleWatch | None = None
        if bundle is not None:
            # tarfile, urllib and ssl load only for an engine on a bundle (architecture.md).
            from prunewarden.bundle import BundleWatch  # noqa: PLC0415

            self._bundle = BundleWatch(bundle, bundle_key or b"", bundle_policy, bundle_rules)
        # A bundle's URL is named without its userinfo and query, in records and problems too.
        self.path = str(path) if self._bundle is None else self._bundle.location
        self.shadow_path = str(shadow) if shadow is not None and bundle is None else None
        self.interval = interval
        self._lock_option = lock
        self._base_dirs = tuple(base_dirs)
        self._logger = logger
        # Every snapshot shares one registry of live sessions (and the store behind them).
        sessions = SessionRegistry(engine_options.pop("store", None))
        self._options = {"logger": self._logger, "sessions": sessions, **engine_options}
        # policy_reload_failed is an audit record: it goes where the decisions go.
        audit = engine_options.get("audit")
        self._records = audit.logger if audit is not None else self._logger
        if self._bundle is not None:
            activation = self._bundle.load(None)
            if activation is None:  # a first fetch has no tag to be "not modified" against
                raise BundleError([Problem(self.path, 0, 0, "$", "no bundle was served")])
            active, candidate = activation.policy, activation.shadow
        else:
            active = load_policy(self.path, lock=lock, base_dirs=self._base_dirs)
            candidate = (
                load_policy(self.shadow_path, lock=lock, base_dirs=self._base_dirs)
                if self.shadow_path
                else None
            )
        self._engine = Engine(active, shadow=candidate, **self._options)
        self._candidate = candidate
        self._reloading = threading.Lock()
        self._seen = self._signatures()
        self._pending: dict[str, Signature] | None = None
        self._reported: dict[str, tuple[tuple[str, ...], str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reload_hooks: list[ReloadHook] = []
        self._status = ReloadStatus(
            self._engine.policy.identity,
            candidate.identity if candidate is not None else None,
            utc_now(),
            None,
            None,
            (),
            polling=False,
        )
        if interval > 0:
            self.start()

    # --- deciding ------------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The snapshot in force now."""
        return self._engine

    @property
    def policy(self) -> Policy:
        return self._engine.policy

    @property
    def bundle(self) -> str | None:
        """Where the bundle is fetched from (None: the policy is read from its files)."""
        return self._bundle.location if self._bundle is not None else None

    def _in_force(self) -> Engine:
        return self._engine

    def session(
        self,
        session_id: str,
        labels: Mapping[str, str] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> Session:
        """:meth:`Engine.session`, following reloads: each call of the session decides under the
        snapshot in force when it begins. At the first call after a reload, the session carries
        its history over as far as the new policy's windows allow and writes one
        ``session_rebound`` record saying what it kept; the halt always carries over."""
        return self._engine.open_session(
            session_id, labels, state=state, store=store, bind=self._binding
        )

    def _binding(self) -> SessionBinding:
        return self._engine.session_binding

    # --- reloading -----------------------------------------------------------------------------

    def reload(self) -> ReloadResult:
        """Load the files now; swap the new snapshot in if they load and differ from what is in
        force. Never raises for a bad policy: the result says what happened."""
        if self._bundle is not None:
            result = self._reload_bundle(self._bundle)
            return self._noted(result or ReloadResult(False, self.policy.identity))
        for _ in range(_ATTEMPTS):
            try:
                return self._noted(self._reload(self._signatures()))
            except _ChangedWhileReadingError:
                continue
        message = "the policy files kept changing while they were read; try again"
        return self._noted(ReloadResult(False, self.policy.identity, (message,)))

    def poll(self) -> ReloadResult | None:
        """One look at the files, as the background thread takes it: None when nothing changed
        or a change has not settled yet, else what the reload did."""
        if self._bundle is not None:
            result = self._reload_bundle(self._bundle)
            return self._noted(result) if result is not None else None
        signatures = self._signatures()
        if signatures == self._seen:
            self._pending = None
            return None
        if signatures != self._pending:
            self._pending = signatures  # changed since the last look: let the writer finish
            return None
        try:
            return self._noted(self._reload(signatures))
        except _ChangedWhileReadingError:
            return None  # the next look sees the new signatures
        except Exception as exc:
            problem = f"the reload failed ({type(exc).__name__}: {exc})"
            self._noted(ReloadResult(False, self.policy.identity, (problem,)))
            raise

    def status(self) -> ReloadStatus:
        """The policy in force, the last reload and its problems: what a health check reads."""
        polling = self._thread is not None and self._thread.is_alive()
        return dataclasses.replace(self._status, polling=polling)

    def add_reload_hook(self, hook: ReloadHook) -> None:
        """Call ``hook`` with the result of every reload that looked at changed files (the
        background poller's too); a hook that raises is reported to the ``prunewarden`` logger
        and changes nothing."""
        self._reload_hooks.append(hook)

    def _noted(self, result: ReloadResult) -> ReloadResult:
        """Keep what a reload did for :meth:`status` (one assignment: readers never see half)."""
        engine = self._engine
        shadow = engine.shadow.policy.identity if engine.shadow is not None else None
        now = utc_now()
        previous = self._status
        outcome: ReloadOutcome = (
            "failed" if result.problems else "reloaded" if result.changed else "unchanged"
        )
        since = now if result.changed else previous.in_force_since
        self._status = ReloadStatus(
            engine.policy.identity, shadow, since, now, outcome, result.problems, polling=False
        )
        for hook in list(self._reload_hooks):
            try:
                hook(result)
            except Exception:  # noqa: BLE001 - a hook never changes a reload
                with contextlib.suppress(Exception):
                    _diagnostics.exception("reload hook %r raised", hook)
        return result

    def start(self) -> None:
        """Start polling in a daemon thread (done by the constructor unless ``interval`` is 0)."""
        if self._thread is not None or self.interval <= 0:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="prunewarden-reload", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop polling (a bundle fetch in flight is ended at once); the engine keeps deciding
        on the snapshot in force."""
        self._stop.set()
        if self._bundle is not None:
            self._bundle.close()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - the watcher must outlive any one failure
                with contextlib.suppress(Exception):
                    problem = f"the reload failed ({type(exc).__name__}: {exc})"
                    self._record_failure(self.path, (problem,), self.policy.identity)

    def _reload(self, before: dict[str, Signature]) -> ReloadResult:
        with self._reloading:
            current = self._engine
            active, active_problems = self._load(self.path, current.policy)
            candidate = self._candidate
            shadow_problems: tuple[str, ...] = ()
            if self.shadow_path is not None:
                loaded, shadow_problems = self._load(self.shadow_path, self._candidate)
                candidate = loaded or self._candidate
            if self._signatures() != before:
                raise _ChangedWhileReadingError
            self._report(self.path, active_problems, before, current.policy)
            if self.shadow_path is not None:
                self._report(self.shadow_path, shadow_problems, before, self._candidate)
            self._seen = before
            self._pending = None
            policy = active or current.policy
            changed = pair_differs(policy, candidate, current.policy, self._candidate)
            if changed:
                self._swap(policy, candidate, current.policy)
            return ReloadResult(changed, policy.identity, (*active_problems, *shadow_problems))

    def _reload_bundle(self, watch: BundleWatch) -> ReloadResult | None:
        """One fetch of the bundle: None when it did not change and nothing had failed."""
        with self._reloading:
            current = self._engine.policy
            try:
                activation = watch.load(current, self._candidate)
            except BundleError as exc:
                problems = tuple(str(problem) for problem in exc.problems)
            except Exception as exc:  # noqa: BLE001 - the bundle in force outlives any fetch
                problems = (f"{self.path}: $: the bundle could not be loaded ({exc!r})",)
            else:
                self._report(self.path, (), {}, current)
                if activation is not None and activation.rollback is not None:
                    self._record_rollback(activation)
                if activation is not None and pair_differs(
                    activation.policy, activation.shadow, current, self._candidate
                ):  # the policy and its shadow come from one verified bundle: one swap
                    self._swap(activation.policy, activation.shadow, current)
                    return ReloadResult(True, activation.policy.identity)
                failed = self._status.last_reload == "failed"
                return ReloadResult(False, current.identity) if failed else None
            self._report(self.path, problems, {}, current)
            return ReloadResult(False, current.identity, problems)

    def _record_rollback(self, activation: Activation) -> None:
        """``policy_rollback``, before the first decision under the older bundle."""
        if activation.rollback is not None and self._records is not None:
            previous, current = activation.rollback.sides()
            identity = activation.policy.identity
            with contextlib.suppress(Exception):
                log_policy_rollback(self._records, self.path, previous, current, identity)

    def _swap(self, policy: Policy, candidate: Policy | None, previous: Policy) -> None:
        # The swap: one assignment of a complete, immutable snapshot.
        self._engine = Engine(policy, shadow=candidate, **self._options)
        self._candidate = candidate
        with contextlib.suppress(Exception):
            if self._logger is not None:
                log_policy_reloaded(self._logger, previous.identity, policy)
            _diagnostics.info(
                "policy_reloaded: %s@%s %s", policy.name, policy.version, policy.digest
            )

    def _load(self, path: str, in_force: Policy | None) -> tuple[Policy | None, tuple[str, ...]]:
        """The policy at ``path`` if it loads from files that did not change while being read,
        and does not give the ``name@version`` in force another content; else None and its
        problems. Never raises for a bad policy: whatever goes wrong is a problem."""
        try:
            policy = load_policy(path, lock=self._lock_option, base_dirs=self._base_dirs)
        except PolicyError as exc:
            return None, tuple(str(problem) for problem in exc.problems)
        except Exception as exc:  # noqa: BLE001 - the policy in force must outlive any file
            return None, (f"{path}: $: the policy could not be loaded ({type(exc).__name__})",)
        if not unchanged_since_read(policy):
            raise _ChangedWhileReadingError
        if in_force is not None and reused_version(policy, in_force):
            message = (
                f"{path}: $: {policy.name}@{policy.version} is in force with another content "
                f"({in_force.digest}; read: {policy.digest}): not reloaded; a new content needs "
                "a new version (a file written in place may have been read half-written)"
            )
            return None, (message,)
        return policy, ()

    def _report(
        self,
        path: str,
        problems: tuple[str, ...],
        signatures: dict[str, Signature],
        in_force: Policy | None,
    ) -> None:
        """Log ``policy_reload_failed`` once per content of the files (and problems), naming
        what stays in force: a file touched again, or polled again, is not news."""
        if not problems:
            self._reported.pop(path, None)
            return
        seen = (problems, contents_digest(signatures))
        if self._reported.get(path) == seen:
            return
        self._reported[path] = seen
        kept = in_force.identity if in_force is not None else None
        with contextlib.suppress(Exception):
            self._record_failure(path, problems, kept)

    def _record_failure(
        self, path: str, problems: tuple[str, ...], kept: PolicyIdentity | None
    ) -> None:
        """``policy_reload_failed`` to the sink the caller chose, and to the diagnostics log."""
        if self._records is not None:
            log_policy_reload_failed(self._records, path, problems, kept)
        _diagnostics.warning("policy_reload_failed: %s: %s", path, "; ".join(problems))

    def _signatures(self) -> dict[str, Signature]:
        """Every file whose change matters: both chains, the top files, the lock files."""
        if self._bundle is not None:
            return {}  # a bundle is fetched again at each poll, not watched
        files = {self.path}
        if self.shadow_path is not None:
            files.add(self.shadow_path)
        engine = self._engine
        policies = [engine.policy]
        if engine.shadow is not None:
            policies.append(engine.shadow.policy)
        for policy in policies:
            files.update(s.path for s in policy.sources if not s.path.startswith(BUILTIN))
        for top in (self.path, self.shadow_path):
            if top is not None:
                files.update(lock_files(top, self._lock_option))
        return {name: file_signature(name) for name in sorted(files)}


__all__ = ["ReloadResult", "ReloadingEngine"]
