"""What a server tells its fleet's operators: ``GET /v1/status`` (every tenant's policy and
health, the bundle in force, the last activation and the last error, decisions by outcome
since start, log shipping) and the ``bundle`` and ``tenants`` details of ``/readyz``, with the
schemas the OpenAPI document gives them.

Decisions are counted by a decision hook and errors kept by a reload hook, both attached when
the app is built (:func:`~prunewarden.server.build_app`): the counts are of this process, since
it started. With ``--status-url``, the same document is pushed (:mod:`._push`), and says how its
pushes have done.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from prunewarden.__about__ import __version__
from prunewarden.decision import Decision, utc_now
from prunewarden.pipeline import PassResult
from prunewarden.reload import ReloadResult
from prunewarden.server._push import STATUS_PUSH_DETAIL, StatusPush
from prunewarden.server._tenants import PolicyHolder, Tenants
from prunewarden.shipping import LogShipper

OUTCOMES = ("allow", "deny", "halt")
COLUMNS_VERSION = 3  # the record_version of a pass recorded as columns (audit-record.v3)

BUNDLE_DETAIL: dict[str, Any] = {
    "type": "object",
    "description": "With `--bundle`: where it is fetched from, the revision in force, and the "
    "last fetch (a failed one keeps the last good bundle)",
    "required": ["location", "revision", "healthy", "problems"],
    "properties": {
        "location": {"type": "string"},
        "revision": {"type": ["string", "null"]},
        "healthy": {"type": "boolean"},
        "last_fetch_at": {"type": ["string", "null"]},
        "last_fetch": {"enum": ["reloaded", "unchanged", "failed", None]},
        "problems": {"type": "array", "items": {"type": "string"}},
    },
}


LOG_SHIPPING: dict[str, Any] = {
    "type": "object",
    "description": "With `--ship`: each destination the audit log is shipped to, with the "
    "records acknowledged and dropped since start, what is buffered, and the last failure",
    "required": ["destinations"],
    "properties": {
        "destinations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["destination", "replica", "healthy", "shipped", "dropped"],
                "properties": {
                    "destination": {"type": "string"},
                    "replica": {"type": "string"},
                    "healthy": {"type": "boolean"},
                    "shipped": {"type": "integer"},
                    "dropped": {"type": "integer"},
                    "buffered_records": {"type": "integer"},
                    "buffered_bytes": {"type": "integer"},
                    "last_shipped_hash": {"type": ["string", "null"]},
                    "last_shipped_at": {"type": ["string", "null"]},
                    "failing": {"type": "integer"},
                    "last_error": {"type": ["string", "null"]},
                    "last_error_at": {"type": ["string", "null"]},
                },
            },
        }
    },
}


def tenants_detail(tenant: dict[str, Any]) -> dict[str, Any]:
    """The ``tenants`` detail of ``/v1/status`` and ``/readyz``, ``tenant`` being the schema
    of one tenant as ``GET /v1/policies`` lists it."""
    return {
        "type": "array",
        "items": tenant,
        "description": "Every tenant, in the order its selector is tried, with its policy, "
        "shadow and health (a server without --tenants: one, `default`)",
    }


#: What every ``GET /v1/status`` document holds, in the order its schema lists it.
_STATUS_REQUIRED = (
    "healthy",
    "started_at",
    "engine_version",
    "default_tenant",
    "tenants",
    "policy",
    "shadow",
    "bundle",
    "activated_at",
    "last_reload",
    "last_error",
    "decisions",
    "log_shipping",
    "status_push",
)


def status_schema(identity: dict[str, Any], tenant: dict[str, Any]) -> dict[str, Any]:
    """The schema of ``GET /v1/status``, ``identity`` being the schema of a policy identity
    and ``tenant`` that of a tenant."""
    when = {"type": ["string", "null"]}
    problems = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "required": list(_STATUS_REQUIRED),
        "properties": {
            "healthy": {
                "type": "boolean",
                "description": "false while the last reload of any tenant failed",
            },
            "started_at": {"type": "string"},
            "engine_version": {"type": "string"},
            "default_tenant": {"type": "string"},
            "tenants": tenants_detail(tenant),
            "policy": {**identity, "description": "the default tenant's policy"},
            "shadow": {"oneOf": [{"type": "null"}, identity]},
            "bundle": {"oneOf": [{"type": "null"}, BUNDLE_DETAIL]},
            "activated_at": {"type": "string", "description": "when the policy in force began"},
            "last_reload": {
                "type": "object",
                "properties": {
                    "at": when,
                    "outcome": {"enum": ["reloaded", "unchanged", "failed", None]},
                    "problems": problems,
                },
            },
            "last_error": {
                "description": "the last reload or fetch that failed since start, even if a "
                "later one succeeded",
                "oneOf": [
                    {"type": "null"},
                    {"type": "object", "properties": {"at": when, "problems": problems}},
                ],
            },
            "decisions": {
                "type": "object",
                "description": "decisions made since start, by outcome",
                "properties": {outcome: {"type": "integer"} for outcome in OUTCOMES},
            },
            "log_shipping": {"oneOf": [{"type": "null"}, LOG_SHIPPING]},
            "status_push": {"oneOf": [{"type": "null"}, STATUS_PUSH_DETAIL]},
        },
    }


def bundle_detail(engine: PolicyHolder) -> dict[str, Any] | None:
    """The ``bundle`` detail of ``/readyz`` and ``/v1/status`` (None without a bundle)."""
    if engine.bundle is None:
        return None
    status = engine.status()
    return {
        "location": engine.bundle,
        "revision": engine.policy.identity.bundle_revision,
        "healthy": status.healthy,
        "last_fetch_at": status.last_reload_at,
        "last_fetch": status.last_reload,
        "problems": list(status.problems),
    }


class FleetStatus:
    """Counts decisions by outcome (a decision hook) and keeps the last failed reload (a
    reload hook, see :meth:`watch`); :meth:`document` is the ``/v1/status`` answer. ``push``:
    the status push it reports on (None: none configured)."""

    def __init__(self) -> None:
        self.push: StatusPush | None = None
        self.started_at = utc_now()
        # The shipper of the audit log, when the server ships it (build_app sets it).
        self.shipper: LogShipper | None = None
        self._lock = threading.Lock()
        self._outcomes: Counter[str] = Counter()
        self._last_error: dict[str, Any] | None = None

    def __call__(self, decision: Decision, _record: Mapping[str, Any]) -> None:
        with self._lock:
            self._outcomes[decision.outcome] += 1

    def on_pass(self, result: PassResult) -> None:
        """An eviction pass counted from its columns (no decision is built for it): each
        allowed segment an ``allow``, each other one the outcome its record names."""
        record = result.record
        outcomes: Counter[str]
        if record is None or record.get("record_version") != COLUMNS_VERSION:
            # A pass recorded decision by decision: its decisions are built already.
            outcomes = Counter(decision.outcome for decision in result)
        else:
            allowed = sum(result.allowed)
            outcomes = Counter({"allow": allowed, str(record["refusal"]): len(result) - allowed})
        with self._lock:
            self._outcomes.update(outcomes)

    def watch(self, engine: PolicyHolder) -> None:
        engine.add_reload_hook(self._observe_reload)

    def _observe_reload(self, result: ReloadResult) -> None:
        if result.problems:
            error = {"at": utc_now(), "problems": list(result.problems)}
            with self._lock:
                self._last_error = error

    def document(self, tenants: Tenants | PolicyHolder) -> dict[str, Any]:
        """The status of every tenant (a policy holder alone: a server of one policy); the
        top-level ``policy``, ``shadow``, ``bundle`` and ``last_reload`` are the default
        tenant's, as they were before tenants."""
        held = tenants if isinstance(tenants, Tenants) else Tenants.single(tenants)
        engine = held.default.holder
        status = engine.status()
        every = [tenant.document(default=tenant is held.default) for tenant in held.all]
        with self._lock:
            decisions = {outcome: self._outcomes[outcome] for outcome in OUTCOMES}
            last_error = self._last_error
        return {
            "healthy": all(tenant["healthy"] for tenant in every),
            "started_at": self.started_at,
            "engine_version": __version__,
            "default_tenant": held.default.name,
            "tenants": every,
            "policy": status.policy.to_dict(),
            "shadow": status.shadow.to_dict() if status.shadow is not None else None,
            "bundle": bundle_detail(engine),
            "activated_at": status.in_force_since,
            "last_reload": {
                "at": status.last_reload_at,
                "outcome": status.last_reload,
                "problems": list(status.problems),
            },
            "last_error": last_error,
            "decisions": decisions,
            "status_push": self.push.detail() if self.push is not None else None,
            "log_shipping": log_shipping(self.shipper),
        }


def log_shipping(shipper: LogShipper | None) -> dict[str, Any] | None:
    """The ``log_shipping`` detail of ``/v1/status`` (None: the log is not shipped)."""
    if shipper is None:
        return None
    return {"destinations": [status.to_dict() for status in shipper.status()]}
