"""The policies one server holds, by tenant, and the choice of one per request.

A server without ``--tenants`` holds one tenant, ``default``, selecting every request: the
server of one policy it always was, its sessions bound to nothing. With ``--tenants FILE`` it
holds one policy holder per tenant of the file:

- from files, a :class:`~prunewarden.ReloadingEngine` each: its own policy, shadow and lock
  file, polled and reloaded on its own, keeping its own last good policy when a change of its
  files does not load;
- from a bundle, one watch of the bundle for all (:mod:`._bundle_tenants`): a new revision is
  verified whole and swaps every tenant's policy in one assignment, so that no two decisions
  made after it ever mix two revisions.

Sessions are bound to the tenant that opened them: the binding is saved with the session's state
(``session-state.v4``'s ``tenant``, written by :class:`BoundStore`), so it outlives a restart and
holds on every replica sharing a Redis.

A tenant that lists tokens is a trust boundary (:meth:`Tenants.choose`): a request presenting
one of its tokens is its request, labels choosing another tenant are refused
(:class:`ForbiddenTenantError`, HTTP 403), and a request without one of its tokens never
reaches it, whatever its labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prunewarden._status import ReloadStatus
from prunewarden.bundle import BundleRules
from prunewarden.engine import DecidingCalls, Engine
from prunewarden.policy import Policy
from prunewarden.reload import ReloadingEngine, ReloadResult
from prunewarden.server._bundle_tenants import BundleTenants
from prunewarden.server._tenant_config import TenantsConfig, TenantSpec
from prunewarden.session import Session, SessionStore

DEFAULT_TENANT = "default"
ReloadHook = Callable[[ReloadResult], object]
TENANT_KEY = "tenant"  # where a stored session state names its tenant


class PolicyHolder(DecidingCalls, Protocol):
    """What the server asks of a tenant's policy: a :class:`~prunewarden.ReloadingEngine`, or
    a tenant of a bundle: the deciding calls (each runs on the snapshot in force when it begins),
    and what the server shows of the policy behind them."""

    @property
    def engine(self) -> Engine: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def bundle(self) -> str | None: ...

    def session(
        self,
        session_id: str,
        labels: Mapping[str, str] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        store: SessionStore | None = None,
    ) -> Session: ...

    def status(self) -> ReloadStatus: ...

    def add_reload_hook(self, hook: ReloadHook) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant: its name, its selector and its policy holder."""

    spec: TenantSpec
    holder: PolicyHolder

    @property
    def name(self) -> str:
        return self.spec.name

    def document(self, *, default: bool) -> dict[str, Any]:
        """This tenant as ``GET /v1/policies`` lists it."""
        status = self.holder.status()
        identity = status.policy
        return {
            "name": self.name,
            "default": default,
            "selector": {"matchLabels": dict(self.spec.match_labels)},
            "policy": identity.to_dict(),
            "bundle_revision": identity.bundle_revision,
            "shadow": status.shadow.to_dict() if status.shadow is not None else None,
            "healthy": status.healthy,
            "last_reload": status.last_reload,
            "problems": list(status.problems),
        }


class Tenants:
    """The tenants in their file's order and the default one. ``bound``: whether sessions are
    bound to their tenant (only with a tenants file: a server of one policy binds nothing, so
    its stored states keep their form)."""

    def __init__(self, tenants: Sequence[Tenant], default: str, *, bound: bool) -> None:
        self.all = tuple(tenants)
        self._by_name = {tenant.name: tenant for tenant in self.all}
        self.default = self._by_name[default]
        self.bound = bound

    @classmethod
    def single(cls, holder: PolicyHolder) -> Tenants:
        """A server of one policy: one tenant, selecting every request."""
        spec = TenantSpec(DEFAULT_TENANT, holder.policy.source)
        return cls([Tenant(spec, holder)], DEFAULT_TENANT, bound=False)

    def select(self, labels: Mapping[str, str] | None) -> Tenant:
        """The first tenant whose selector matches ``labels`` (an empty selector matches every
        request), else the default."""
        given = labels or {}
        return next((t for t in self.all if t.spec.matches(given)), self.default)

    def get(self, name: str) -> Tenant | None:
        return self._by_name.get(name)

    def choose(self, labels: Mapping[str, str] | None, credential: str | None = None) -> Tenant:
        """The tenant of a request: the one whose token it presents (``credential``), else the
        one ``labels`` select. :class:`ForbiddenTenantError` when labels choose another tenant
        than the credential's, or the tenant chosen lists tokens the request did not present."""
        own = self.get(credential) if credential is not None else None
        if own is None:
            return self.admit(self.select(labels), None)
        chosen = self.select(labels) if labels else own
        if chosen is not own:
            raise ForbiddenTenantError(
                f"this request's token is tenant {own.name!r}'s and its labels choose "
                f"{chosen.name!r}: a token's tenant decides its requests (send labels choosing "
                f"{own.name!r}, or none)"
            )
        return own

    @staticmethod
    def admit(tenant: Tenant, credential: str | None) -> Tenant:
        """``tenant``, unless it lists tokens and ``credential`` is not its
        (:class:`ForbiddenTenantError`)."""
        if tenant.spec.tokens and credential != tenant.name:
            raise ForbiddenTenantError(
                f"tenant {tenant.name!r} decides only requests presenting one of its own tokens "
                "(Authorization: Bearer <token>)"
            )
        return tenant

    def of_session(
        self,
        session_id: str,
        bound: str,
        labels: Mapping[str, str] | None,
        credential: str | None = None,
    ) -> Tenant:
        """The tenant of a call naming a session bound to ``bound``: that one, unless
        ``labels`` or ``credential`` choose another, or the server no longer holds it
        (:class:`TenantConflictError`): a session is never moved to another policy. A
        session of a tenant that lists tokens is reached with one of them only
        (:class:`ForbiddenTenantError`)."""
        tenant = self.get(bound)
        chosen = self.choose(labels, credential) if labels or credential is not None else None
        if tenant is None or (chosen is not None and chosen is not tenant):
            by = "token" if credential is not None else "labels"
            raise TenantConflictError(session_id, bound, (chosen or self.default).name, by)
        return self.admit(tenant, credential)

    def holders(self) -> Iterable[PolicyHolder]:
        return (tenant.holder for tenant in self.all)

    def document(self) -> dict[str, Any]:
        """``GET /v1/policies``."""
        return {
            "default": self.default.name,
            "tenants": [tenant.document(default=tenant is self.default) for tenant in self.all],
        }

    def close(self) -> None:
        for holder in self.holders():
            holder.close()


class TenantConflictError(Exception):
    """A session's stored state is bound to another tenant than the one a call chose."""

    def __init__(self, session_id: str, bound: str, chosen: str, by: str = "labels") -> None:
        self.session_id = session_id
        self.bound = bound
        self.chosen = chosen
        if by == "labels":
            choice, advice = "labels choose", f"send labels choosing {bound!r}, none, or use"
        else:
            choice, advice = "token is tenant", "use"
        super().__init__(
            f"session {session_id!r} is bound to tenant {bound!r}; this request's {choice} "
            f"{chosen!r}: a session is never moved to another policy ({advice} another "
            "session id)"
        )


class ForbiddenTenantError(Exception):
    """A request its credential does not let reach the tenant it would be decided by."""


class StateStore(Protocol):
    """The part of a session store a binding is kept through."""

    def load(self, session_id: str) -> dict[str, Any] | None: ...

    def save(self, session_id: str, state: Mapping[str, Any]) -> None: ...


class BoundStore:
    """A session store as one tenant sees it: every state it saves names the tenant, and a
    state naming another tenant is refused (:class:`TenantConflictError`) rather than loaded.
    A state naming none (kept by a server of one policy, or before tenants) is the tenant's
    once it saves it."""

    def __init__(self, store: StateStore, tenant: str) -> None:
        self.store = store
        self.tenant = tenant

    def load(self, session_id: str) -> dict[str, Any] | None:
        state = self.store.load(session_id)
        if state is None:
            return None
        bound = state.get(TENANT_KEY)
        if bound is not None and bound != self.tenant:
            raise TenantConflictError(session_id, bound, self.tenant)
        return state

    def save(self, session_id: str, state: Mapping[str, Any]) -> None:
        self.store.save(session_id, {**state, TENANT_KEY: self.tenant})


def stored_tenant(state: Mapping[str, Any] | None) -> str | None:
    """The tenant a stored state is bound to (None: none)."""
    if state is None:
        return None
    bound = state.get(TENANT_KEY)
    return bound if isinstance(bound, str) else None


def open_tenants(
    config: TenantsConfig,
    bundle: tuple[str, bytes] | None,
    *,
    interval: float,
    bundle_rules: BundleRules | None = None,
    **options: Any,
) -> Tenants:
    """The tenants of ``config``, their policies loaded (the first load of each must succeed:
    :class:`~prunewarden.errors.PolicyError`, or :class:`~prunewarden.errors.BundleError` for
    a bundle). From files, one :class:`ReloadingEngine` each; from ``bundle`` (its location
    and public key), one watch of the bundle for all. ``options`` go to every engine (the
    audit log, the shared session registry, hooks...)."""
    if bundle is not None:
        location, key = bundle
        watch = BundleTenants(
            location, key, config.tenants, interval=interval, rules=bundle_rules, **options
        )
        tenants = [Tenant(spec, watch.tenant(spec.name)) for spec in config.tenants]
        return Tenants(tenants, config.default, bound=True)
    opened: list[Tenant] = []
    try:
        for spec in config.tenants:
            holder = ReloadingEngine(
                spec.policy, shadow=spec.shadow, lock=spec.lock, interval=interval, **options
            )
            opened.append(Tenant(spec, holder))
    except BaseException:
        for tenant in opened:
            tenant.holder.close()
        raise
    return Tenants(opened, config.default, bound=True)


# The Prunewarden-Labels header, as the OpenAPI document gives it on every route that chooses.
LABELS_PARAMETER: dict[str, Any] = {
    "name": "Prunewarden-Labels",
    "in": "header",
    "required": False,
    "description": "The request's labels, `name=value` pairs separated by commas; with the "
    "document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label "
    "given here and in the document with two values is a 400; on a session, labels choosing "
    "another tenant than the session's are a 409 `tenant-conflict`",
    "schema": {"type": "string"},
}


def tenant_schema(identity: dict[str, Any]) -> dict[str, Any]:
    """The schema of a tenant as ``GET /v1/policies``, ``/v1/status`` and ``/readyz`` list it,
    ``identity`` being the schema of a policy identity."""
    return {
        "type": "object",
        "required": ["name", "default", "selector", "policy", "bundle_revision", "shadow"],
        "properties": {
            "name": {"type": "string"},
            "default": {"type": "boolean"},
            "selector": {
                "type": "object",
                "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}
                },
            },
            "policy": identity,
            "bundle_revision": {"type": ["string", "null"]},
            "shadow": {"oneOf": [{"type": "null"}, identity]},
            "healthy": {"type": "boolean", "description": "false while its last reload failed"},
            "last_reload": {"enum": ["reloaded", "unchanged", "failed", None]},
            "problems": {"type": "array", "items": {"type": "string"}},
        },
    }


def ready_tenant_schema(identity: dict[str, Any]) -> dict[str, Any]:
    """A tenant as ``/readyz`` lists it, without the token: as :func:`tenant_schema`, without
    its selector (which labels route a request is for callers holding the token)."""
    schema = tenant_schema(identity)
    schema["required"] = [name for name in schema["required"] if name != "selector"]
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k != "selector"}
    return schema


def policies_schema(tenant: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``GET /v1/policies``, ``tenant`` being the schema of a tenant."""
    return {
        "type": "object",
        "required": ["default", "tenants"],
        "description": "The tenants in the order their selectors are tried (a server without "
        "--tenants: one, `default`, selecting every request)",
        "properties": {
            "default": {"type": "string"},
            "tenants": {"type": "array", "items": tenant},
        },
    }
