"""Who a request is: the bearer token it presents, the server's (``--token-file``) or one of a
tenant's (``tokens:`` in the tenants file).

- The server's token reaches every route and every tenant that lists no tokens.
- A tenant's token authenticates the request as well, and makes it that tenant's: it reaches
  the tenant's decisions, sessions and policy (``/v1/evaluate``, ``/v1/plan``,
  ``/v1/sessions/...``, ``/v1/policy``) and the documents everyone may read, not the server's
  own views of every tenant (``/v1/policies``, ``/v1/status``, ``/metrics``: 403 while the server
  has a token of its own).
- A tenant that lists tokens decides only requests presenting one of them (:mod:`._tenants`).

A token presented is compared with every token the server knows, each in constant time
(:func:`hmac.compare_digest`), all of them whatever matched, so that the time taken says nothing
of which one did. No token is ever logged, shown in a problem, or kept in a record.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping

from prunewarden.server._problems import ProblemDocument
from prunewarden.server._tenant_config import TenantSpec

# The routes that show every tenant: the server's token only (when it has one).
SERVER_ROUTES = frozenset({"/v1/policies", "/v1/status", "/metrics"})


class CredentialError(Exception):
    """A request its credential does not let in, with the problem document it gets."""

    def __init__(self, problem: ProblemDocument) -> None:
        super().__init__(problem.detail)
        self.problem = problem


def unauthorized() -> CredentialError:
    return CredentialError(ProblemDocument("unauthorized", "send Authorization: Bearer <token>"))


class Credentials:
    """The server's token and each tenant's, and which one a request presents. ``bound``:
    more tokens, each naming who it makes a request (the collector's replica tokens, as a
    tenant's make it that tenant's); ``anonymous``: whether a request without a token passes
    when the only tokens are bound ones (a server's tenants that list no tokens decide it; a
    collector's replicas do not); ``server_routes``: the routes a bound token may not reach
    while there is a server's token."""

    def __init__(
        self,
        token: str | None,
        tenants: Iterable[TenantSpec] = (),
        *,
        bound: Mapping[str, str] | None = None,
        anonymous: bool = True,
        server_routes: frozenset[str] = SERVER_ROUTES,
    ) -> None:
        self._server = token.encode("utf-8") if token is not None else None
        self._tenants = [
            (given.encode("utf-8"), spec.name) for spec in tenants for given in spec.tokens
        ]
        self._tenants += [(given.encode("utf-8"), name) for given, name in (bound or {}).items()]
        self._anonymous = anonymous
        self._server_routes = server_routes

    def __repr__(self) -> str:  # never the tokens
        return f"Credentials(server={self._server is not None}, tenant_tokens={len(self._tenants)})"

    def identify(self, authorization: str | None, route: str) -> str | None:
        """The tenant the request's credential makes it (None: the server's token, or none
        needed); :class:`CredentialError` (401) for a missing or wrong token where one is
        needed, a presented token that is nobody's, or (403) a tenant's token on a route that
        shows every tenant."""
        if self._server is None and not self._tenants:
            return None  # a server without tokens asks for none, and reads none
        if authorization is None:
            if self._server is not None or not self._anonymous:
                raise unauthorized()
            return None
        scheme, _, value = authorization.partition(" ")
        server, tenant = self._match(value.encode("utf-8"))
        if scheme.lower() != "bearer" or not (server or tenant is not None):
            raise unauthorized()
        if tenant is not None and route in self._server_routes and self._server is not None:
            detail = (
                f"a tenant's token reaches its own tenant's decisions, sessions and policy; "
                f"{route} shows every tenant and takes the server's token"
            )
            raise CredentialError(ProblemDocument("forbidden-tenant", detail))
        return tenant

    def _match(self, given: bytes) -> tuple[bool, str | None]:
        """Whether ``given`` is the server's token, and the tenant whose token it is: every
        comparison made, whichever matched."""
        server = self._server is not None and hmac.compare_digest(given, self._server)
        tenant = None
        for expected, name in self._tenants:
            if hmac.compare_digest(given, expected):
                tenant = name
        return server, tenant
