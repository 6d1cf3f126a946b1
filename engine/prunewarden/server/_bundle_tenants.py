"""Tenants from one signed bundle: one fetch, one verification and one swap for all of them.

A server whose tenants name policies of a bundle (``serve --bundle URL --tenants FILE``) holds
every tenant's engine in one mapping, replaced by a single assignment once a new revision is
verified whole and every tenant's policy (and shadow) found in it. A decision reads the mapping
once, when it begins: every decision begun after a swap is made under the new revision, whatever
its tenant, and none under a mix of two.

A bundle that fails in any way (unreachable, HTTP 500, truncated, signed by another key, a
tenant's policy missing from it, a ``name@version`` in force given another content) keeps the
last good revision for every tenant, and is recorded once (``policy_reload_failed``), as a
server of one policy does (:class:`~prunewarden.ReloadingEngine`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prunewarden._status import ReloadOutcome, ReloadStatus
from prunewarden.audit import log_policy_reload_failed, log_policy_rollback
from prunewarden.bundle import (
    BundleRules,
    Fetched,
    Fetcher,
    Rollback,
    VerifiedBundle,
    bounded_problems,
    check_order,
    verify_bundle,
)
from prunewarden.decision import utc_now
from prunewarden.engine import Engine, EngineCalls
from prunewarden.errors import BundleError, Problem
from prunewarden.policy import Policy
from prunewarden.reload import ReloadResult
from prunewarden.server._tenant_config import TenantSpec
from prunewarden.session import Session, SessionBinding, SessionStore

_diagnostics = logging.getLogger("prunewarden")


class BundleTenants:
    """The bundle at ``location`` verified with ``public_pem``, and one engine per tenant of
    ``specs`` on the policies it names. The first bundle must verify and hold every tenant's
    policy (:class:`BundleError`); later ones are fetched every ``interval`` seconds (0:
    never), with ``If-None-Match``. ``options`` go to every :class:`Engine` built."""

    def __init__(
        self,
        location: str,
        public_pem: bytes,
        specs: Sequence[TenantSpec],
        *,
        interval: float,
        rules: BundleRules | None = None,
        **options: Any,
    ) -> None:
        self.rules = rules or BundleRules()
        self._fetcher = Fetcher(location, deadline=self.rules.timeout)
        self.location = self._fetcher.location  # without userinfo and query
        self.interval = interval
        self._key = public_pem
        self._specs = tuple(specs)
        self._options = options
        audit = options.get("audit")
        self._records = audit.logger if audit is not None else options.get("logger")
        self._etag: str | None = None
        self._content: str | None = None
        self._refused: tuple[str, BundleError] | None = None
        # The revision and sequence in force, and those of the bundle being verified.
        self._order: tuple[str, int | None] | None = None
        self._next: tuple[tuple[str, int | None], Rollback | None] | None = None
        self._reported: tuple[str, ...] = ()
        self._reloading = threading.Lock()
        self._hooks: list[Callable[[ReloadResult], object]] = []
        try:
            fetched = self._first_fetch()
            self.engines: Mapping[str, Engine] = self._engines(fetched.data, None)
            self._order = self._next[0] if self._next is not None else None
        except BundleError as exc:
            raise BundleError(bounded_problems(exc.problems, self.location)) from None
        self._etag = fetched.etag
        self._content = hashlib.sha256(fetched.data).hexdigest()
        self._since = utc_now()
        self._last: tuple[str | None, ReloadOutcome | None, tuple[str, ...]] = (None, None, ())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval > 0:
            self._thread = threading.Thread(
                target=self._watch, name="prunewarden-bundle", daemon=True
            )
            self._thread.start()

    def _first_fetch(self) -> Fetched:
        fetched = self._fetcher.fetch(None)
        if fetched is None:  # a first fetch has no tag to be "not modified" against
            raise BundleError([Problem(self.location, 0, 0, "$", "no bundle was served")])
        return fetched

    def tenant(self, name: str) -> BundleTenant:
        """The policy holder of the tenant ``name``."""
        return BundleTenant(self, name)

    def add_reload_hook(self, hook: Callable[[ReloadResult], object]) -> None:
        """Call ``hook`` with what each fetch did; a hook added for several tenants (the
        server's metrics) is called once: one fetch is one reload."""
        if hook not in self._hooks:
            self._hooks.append(hook)

    def status(self, name: str) -> ReloadStatus:
        """How tenant ``name`` stands: its policy and shadow, and the bundle's last fetch."""
        engine = self.engines[name]
        shadow = engine.shadow.policy.identity if engine.shadow is not None else None
        at, outcome, problems = self._last
        polling = self._thread is not None and self._thread.is_alive()
        identity = engine.policy.identity
        return ReloadStatus(identity, shadow, self._since, at, outcome, problems, polling=polling)

    def poll(self) -> ReloadResult | None:
        """Fetch the bundle again: None when it did not change and nothing had failed, else
        what the fetch did (a new revision swapped in for every tenant, or the problems that
        kept the last good one)."""
        with self._reloading:
            current = self.engines
            first = current[self._specs[0].name].policy
            try:
                swapped = self._fetch(current)
            except BundleError as exc:
                bounded = bounded_problems(exc.problems, self.location)
                problems = tuple(str(problem) for problem in bounded)
            except Exception as exc:  # noqa: BLE001 - the bundle in force outlives any fetch
                problems = (f"{self.location}: $: the bundle could not be loaded ({exc!r})",)
            else:
                self._reported = ()
                if swapped is not None:
                    return self._noted(ReloadResult(True, swapped.identity))
                failed = self._last[1] == "failed"
                return self._noted(ReloadResult(False, first.identity)) if failed else None
            self._report(problems, first)
            return self._noted(ReloadResult(False, first.identity, problems))

    def close(self) -> None:
        """Stop polling (a fetch in flight is ended at once); every tenant keeps deciding on
        the revision in force."""
        self._stop.set()
        self._fetcher.close()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _fetch(self, current: Mapping[str, Engine]) -> Policy | None:
        """A new revision swapped in (the first tenant's policy under it), or None."""
        fetched = self._fetcher.fetch(self._etag)
        if fetched is None:
            return None
        content = hashlib.sha256(fetched.data).hexdigest()
        if content == self._content:  # a server without ETags: the bytes tell
            self._etag = fetched.etag
            return None
        if self._refused is not None and self._refused[0] == content:
            raise self._refused[1]
        try:
            engines = self._engines(fetched.data, current)
        except BundleError as exc:
            self._refused = (content, exc)
            raise
        self._etag, self._content, self._refused = fetched.etag, content, None
        if self._next is not None:
            self._order, rollback = self._next
            if rollback is not None:
                self._record_rollback(rollback, engines[self._specs[0].name].policy)
        # The swap: one assignment, every tenant at once.
        self.engines = engines
        self._since = utc_now()
        return engines[self._specs[0].name].policy

    def _engines(self, data: bytes, current: Mapping[str, Engine] | None) -> dict[str, Engine]:
        """An engine per tenant on the verified bundle ``data``; :class:`BundleError` when it
        does not verify or does not hold what a tenant names."""
        try:
            bundle = verify_bundle(data, self._key, self.location)
        except ValueError as exc:  # the key given, not the bundle
            raise BundleError([Problem(self.location, 0, 0, "$", f"the key: {exc}")]) from None
        rollback = check_order(bundle.manifest, self._order, self.rules, self.location)
        self._next = ((bundle.manifest.revision, bundle.manifest.sequence), rollback)
        problems: list[Problem] = []
        chosen: dict[str, tuple[Policy, Policy | None]] = {}
        for spec in self._specs:
            policy = self._named(bundle, spec, spec.policy, problems)
            # Without a shadow of its own, a tenant runs its policy with the candidate the
            # manifest names for it, as ``--bundle-policy`` does: never its policy without it.
            shadow = (
                self._named(bundle, spec, spec.shadow, problems)
                if spec.shadow
                else bundle.shadows.get(spec.policy)
            )
            in_force = current[spec.name].policy if current is not None else None
            if policy is not None and _reused_version(policy, in_force):
                message = (
                    f"tenant {spec.name!r}: {policy.name}@{policy.version} is in force with "
                    f"another content: a new content needs a new version"
                )
                problems.append(Problem(self.location, 0, 0, "$.policies", message))
            if policy is not None:
                chosen[spec.name] = (policy, shadow)
        if problems:
            raise BundleError(problems)
        return {
            name: Engine(policy, shadow=shadow, **self._options)
            for name, (policy, shadow) in chosen.items()
        }

    def _named(
        self, bundle: VerifiedBundle, spec: TenantSpec, name: str, problems: list[Problem]
    ) -> Policy | None:
        policy = bundle.policies.get(name)
        if policy is None:
            names = ", ".join(sorted(bundle.policies))
            message = f"tenant {spec.name!r}: no policy {name!r} in the bundle (it holds {names})"
            problems.append(Problem(self.location, 0, 0, "$.policies", message))
        return policy

    def _report(self, problems: tuple[str, ...], kept: Policy) -> None:
        """``policy_reload_failed`` once per distinct failure, naming the first tenant's
        policy still in force."""
        if problems == self._reported:
            return
        self._reported = problems
        with contextlib.suppress(Exception):
            if self._records is not None:
                log_policy_reload_failed(self._records, self.location, problems, kept.identity)
            _diagnostics.warning("policy_reload_failed: %s: %s", self.location, "; ".join(problems))

    def _record_rollback(self, rollback: Rollback, policy: Policy) -> None:
        """``policy_rollback`` (an older bundle allowed), before any decision under it."""
        if self._records is None:
            return
        previous, current = rollback.sides()
        with contextlib.suppress(Exception):
            log_policy_rollback(self._records, self.location, previous, current, policy.identity)

    def _noted(self, result: ReloadResult) -> ReloadResult:
        outcome: ReloadOutcome = (
            "failed" if result.problems else "reloaded" if result.changed else "unchanged"
        )
        self._last = (utc_now(), outcome, result.problems)
        for hook in list(self._hooks):
            try:
                hook(result)
            except Exception:  # noqa: BLE001 - a hook never changes a reload
                with contextlib.suppress(Exception):
                    _diagnostics.exception("reload hook %r raised", hook)
        return result

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # poll() turns every failure into a result
                self.poll()


class BundleTenant(EngineCalls):
    """One tenant of a :class:`BundleTenants`: its decision calls run on its engine in the
    revision in force when each begins; its sessions follow revisions as a reloading
    engine's do."""

    def __init__(self, watch: BundleTenants, name: str) -> None:
        self._watch = watch
        self._name = name

    def _in_force(self) -> Engine:
        return self._watch.engines[self._name]

    @property
    def engine(self) -> Engine:
        return self._in_force()

    @property
    def policy(self) -> Policy:
        return self._in_force().policy

    @property
    def bundle(self) -> str | None:
        return self._watch.location

    def session(
        self,
        session_id: str,
        labels: Mapping[str, str] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> Session:
        return self._in_force().open_session(
            session_id, labels, state=state, store=store, bind=self._binding
        )

    def _binding(self) -> SessionBinding:
        return self._in_force().session_binding

    def status(self) -> ReloadStatus:
        return self._watch.status(self._name)

    def add_reload_hook(self, hook: Callable[[ReloadResult], object]) -> None:
        self._watch.add_reload_hook(hook)

    def reload(self) -> ReloadResult:
        """Fetch the bundle now (for every tenant)."""
        return self._watch.poll() or ReloadResult(False, self.policy.identity)

    def close(self) -> None:
        self._watch.close()


def _reused_version(new: Policy, old: Policy | None) -> bool:
    return (
        old is not None
        and (new.name, new.version) == (old.name, old.version)
        and new.digest != old.digest
    )
