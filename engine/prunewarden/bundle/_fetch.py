"""Where a bundle comes from: a file, or an HTTP(S) URL polled with ``If-None-Match``; and the
watch that turns each new bundle into the policy to activate, or into the reason it is not.

HTTP goes through the standard library (``urllib``): a server or a :class:`ReloadingEngine`
loading bundles needs no extra dependency for it. Whatever goes wrong with a fetch (refused,
timed out, over its total deadline, HTTP 500, a body shorter than its ``Content-Length``, too
large) is a :class:`BundleError` naming the location, never a partial bundle: a body is
verified only once it has arrived whole. A location is named without its userinfo and query
(:func:`~prunewarden._locations.shown_location`), and a failure's problems are bounded in count
and length (:func:`bounded_problems`) before anything keeps or shows them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass

from prunewarden._files import read_bounded, read_regular
from prunewarden._locations import shown_location
from prunewarden._schemas import capped
from prunewarden.bundle._http import Deadline, opener
from prunewarden.bundle._manifest import Manifest
from prunewarden.bundle._verify import verify_bundle
from prunewarden.errors import BundleError, Problem
from prunewarden.limits import BUNDLE_FETCH_SECONDS, MAX_BUNDLE_BYTES, MAX_PROBLEM_CHARS
from prunewarden.policy import Policy

DEFAULT_TIMEOUT = 10.0  # seconds a fetch may take to connect, and between two reads
_NOT_MODIFIED = 304


def bounded_problems(problems: Iterable[Problem], where: str) -> list[Problem]:
    """At most :data:`~prunewarden.limits.MAX_PROBLEMS` of ``problems`` (a note says when more
    were found), each path and message at most :data:`~prunewarden.limits.MAX_PROBLEM_CHARS`
    characters: what a record, ``/readyz`` and standard error may hold of one failure."""
    return [
        dataclasses.replace(problem, path=_short(problem.path), message=_short(problem.message))
        for problem in capped(problems, where)
    ]


def _short(text: str) -> str:
    if len(text) <= MAX_PROBLEM_CHARS:
        return text
    return text[: MAX_PROBLEM_CHARS - 1] + "\N{HORIZONTAL ELLIPSIS}"


@dataclass(frozen=True, slots=True)
class Fetched:
    """A bundle's bytes and the tag that names them (the ETag, or a file's SHA-256)."""

    data: bytes
    etag: str | None


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def fetch(
    location: str,
    etag: str | None,
    timeout: float = DEFAULT_TIMEOUT,
    deadline: Deadline | None = None,
) -> Fetched | None:
    """The bundle at ``location`` (a path, or an ``http://``/``https://`` URL), or None when
    it is still the one tagged ``etag``; :class:`BundleError` when it cannot be had whole, or
    not before ``deadline`` (default: :data:`~prunewarden.limits.BUNDLE_FETCH_SECONDS`)."""
    shown = shown_location(location)
    try:
        if is_url(location):
            ends = deadline or Deadline(BUNDLE_FETCH_SECONDS)
            try:
                return _fetch_url(location, shown, etag, timeout, ends)
            finally:
                ends.close()
        data = read_regular(location, MAX_BUNDLE_BYTES)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BundleError([Problem(shown, 0, 0, "$", f"cannot read: {reason}")]) from None
    tag = "sha256:" + hashlib.sha256(data).hexdigest()
    return None if tag == etag else Fetched(data, tag)


def _fetch_url(
    url: str, shown: str, etag: str | None, timeout: float, deadline: Deadline
) -> Fetched | None:
    request = urllib.request.Request(url, headers={"If-None-Match": etag} if etag else {})  # noqa: S310 - http(s) only: is_url
    try:
        with opener(deadline).open(request, timeout=timeout) as response:
            data = read_bounded(response, MAX_BUNDLE_BYTES)
            if deadline.expired:
                raise TimeoutError  # the socket was shut down under the read
            announced = response.headers.get("Content-Length")
            # http.client stops quietly at a connection closed early: count the bytes.
            if announced is None or not announced.isdigit() or int(announced) == len(data):
                return Fetched(data, response.headers.get("ETag"))
            message = f"the download ended early ({len(data)} of {announced} bytes)"
    except urllib.error.HTTPError as exc:
        if exc.code == _NOT_MODIFIED:
            return None
        message = f"HTTP {exc.code} {exc.reason}"
    except http.client.IncompleteRead as exc:
        message = f"the download ended early ({len(exc.partial)} bytes, then the end)"
    except (urllib.error.URLError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc
        message = f"cannot fetch: {reason}"
    except OSError as exc:  # a timeout, a reset, a body over the limit
        message = f"cannot fetch: {exc.strerror or exc or type(exc).__name__}"
    if deadline.expired:
        message = f"the fetch took longer than its deadline ({deadline.seconds:g} s)"
    raise BundleError([Problem(shown, 0, 0, "$", message)])


@dataclass(frozen=True, slots=True)
class BundleRules:
    """How a bundle is fetched and which bundles may follow the one in force: ``timeout``,
    the seconds one fetch may take in all; ``min_sequence``, the lowest manifest ``sequence``
    a server runs (None: any); ``allow_rollback``, whether a bundle of a lower sequence than the
    one in force is activated (recorded ``policy_rollback``) rather than refused."""

    timeout: float = BUNDLE_FETCH_SECONDS
    min_sequence: int | None = None
    allow_rollback: bool = False


class Fetcher:
    """Fetches the bundle at ``location`` again and again, each fetch of a URL under a total
    deadline of ``deadline`` seconds; :meth:`close` ends the fetch in flight at once (a server
    stopping does not wait for a bundle server sending a byte a second), and refuses any after.
    ``location`` (the property) is the location as shown: without userinfo and query."""

    def __init__(
        self,
        location: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        deadline: float = BUNDLE_FETCH_SECONDS,
    ) -> None:
        self._url = location
        self.location = shown_location(location)
        self.timeout = timeout
        self.deadline = deadline
        self._lock = threading.Lock()
        self._in_flight: Deadline | None = None
        self._closed = False

    def fetch(self, etag: str | None) -> Fetched | None:
        """:func:`fetch` of the location; :class:`BundleError` with bounded problems."""
        if not is_url(self._url):
            return fetch(self._url, etag, self.timeout)
        with self._lock:
            if self._closed:
                problem = Problem(self.location, 0, 0, "$", "not fetched: the server is stopping")
                raise BundleError([problem])
            self._in_flight = ends = Deadline(self.deadline)
        try:
            return fetch(self._url, etag, self.timeout, ends)
        finally:
            with self._lock:
                self._in_flight = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            in_flight = self._in_flight
        if in_flight is not None:
            in_flight.expire()


@dataclass(frozen=True, slots=True)
class Rollback:
    """A bundle older than the one in force, activated because the rules allow it: each side's
    revision and sequence (None: a manifest without one)."""

    location: str
    previous: tuple[str, int | None]
    current: tuple[str, int | None]

    def sides(self) -> tuple[dict[str, object], dict[str, object]]:
        """``previous`` and ``current`` as a record names them."""
        return (
            {"revision": self.previous[0], "sequence": self.previous[1]},
            {"revision": self.current[0], "sequence": self.current[1]},
        )


def check_order(
    manifest: Manifest,
    in_force: tuple[str, int | None] | None,
    rules: BundleRules,
    location: str,
) -> Rollback | None:
    """Whether the verified ``manifest`` may follow the bundle ``in_force`` (its revision and
    sequence; None: none yet): None when its sequence is not lower, a :class:`Rollback` when it
    is and the rules allow it; :class:`BundleError` when it is below ``rules.min_sequence`` or
    older and not allowed. A bundle without a sequence is older than any bundle with one."""
    sequence = manifest.sequence
    shown = "no sequence" if sequence is None else f"sequence {sequence}"
    floor = rules.min_sequence
    if floor is not None and (sequence is None or sequence < floor):
        why = (
            f"manifest version {manifest.manifest_version} has no sequence: build it again"
            if sequence is None
            else f"below --bundle-min-sequence {floor}"
        )
        message = f"{shown} (revision {manifest.revision}): {why}"
        raise BundleError([Problem(location, 0, 0, "$.sequence", message)])
    if in_force is None or in_force[1] is None:
        return None  # nothing to compare with: the first bundle, or one without a sequence
    if sequence is not None and sequence >= in_force[1]:
        return None  # newer, or built as of the same moment (the order cannot tell them)
    if not rules.allow_rollback:
        message = (
            f"{shown} (revision {manifest.revision}) is older than sequence {in_force[1]} "
            f"in force (revision {in_force[0]}): a rollback, refused; build it again with a "
            "higher sequence, or allow it (serve --bundle-allow-rollback)"
        )
        raise BundleError([Problem(location, 0, 0, "$.sequence", message)])
    return Rollback(location, in_force, (manifest.revision, sequence))


@dataclass(frozen=True, slots=True)
class Activation:
    """What a new bundle gives a server to run: the policy, and the shadow its manifest names
    for it (None: none), activated together or not at all; ``rollback``: set when the bundle
    is older than the one it replaces (allowed, and to be recorded)."""

    policy: Policy
    shadow: Policy | None = None
    rollback: Rollback | None = None


class BundleWatch:
    """The bundle at ``location``, verified with ``public_pem``, and its policy ``policy``
    (None: the first the manifest lists) with that policy's shadow. :meth:`load` fetches it
    again: a new :class:`Activation`, None when the bundle did not change, or
    :class:`BundleError` (a refused bundle is remembered by its SHA-256, so that polling it
    again costs no second verification). A bundle giving the ``name@version`` in force (or the
    shadow's) another content is refused, as a reload of files refuses it: a new content needs
    a new version."""

    def __init__(
        self,
        location: str,
        public_pem: bytes,
        policy: str | None = None,
        rules: BundleRules | None = None,
    ) -> None:
        self.rules = rules or BundleRules()
        self._fetcher = Fetcher(location, deadline=self.rules.timeout)
        self.location = self._fetcher.location
        self.policy_name = policy
        self.revision: str | None = None
        self._key = public_pem
        self._etag: str | None = None
        self._content: str | None = None  # SHA-256 of the bundle in force
        self._refused: tuple[str, BundleError] | None = None  # a bundle's SHA-256, and why
        self._order: tuple[str, int | None] | None = None  # revision and sequence in force
        self._next_order: tuple[str, int | None] | None = None

    def close(self) -> None:
        """End the fetch in flight now, and fetch no more."""
        self._fetcher.close()

    def load(
        self, in_force: Policy | None, shadow_in_force: Policy | None = None
    ) -> Activation | None:
        try:
            return self._load(in_force, shadow_in_force)
        except BundleError as exc:
            raise BundleError(bounded_problems(exc.problems, self.location)) from None

    def _load(self, in_force: Policy | None, shadow_in_force: Policy | None) -> Activation | None:
        fetched = self._fetcher.fetch(self._etag)
        if fetched is None:
            return None
        # A server without ETags (or with a new one for the same bytes): the bytes tell.
        content = hashlib.sha256(fetched.data).hexdigest()
        if content == self._content:
            self._etag = fetched.etag
            return None
        if self._refused is not None and self._refused[0] == content:
            raise self._refused[1]
        try:
            activation = self._verified(fetched.data)
            _refuse_reused_version(activation.policy, in_force, self.location)
            if activation.shadow is not None:
                _refuse_reused_version(activation.shadow, shadow_in_force, self.location)
        except BundleError as exc:
            self._refused = (content, exc)
            raise
        self._etag, self._content, self._refused = fetched.etag, content, None
        self.revision = activation.policy.identity.bundle_revision
        self._order = self._next_order
        return activation

    def _verified(self, data: bytes) -> Activation:
        try:
            bundle = verify_bundle(data, self._key, self.location)
        except ValueError as exc:  # the key given, not the bundle
            raise BundleError([Problem(self.location, 0, 0, "$", f"the key: {exc}")]) from None
        rollback = check_order(bundle.manifest, self._order, self.rules, self.location)
        wanted = bundle.manifest.policy(self.policy_name)
        if wanted is None:
            names = ", ".join(sorted(bundle.policies))
            message = f"no policy {self.policy_name!r} in the bundle (it holds {names})"
            raise BundleError([Problem(self.location, 0, 0, "$.policies", message)])
        policy, shadow = bundle.policies[wanted.name], bundle.shadows.get(wanted.name)
        # The order moves only once nothing else can refuse the bundle (in _load).
        self._next_order = (bundle.manifest.revision, bundle.manifest.sequence)
        return Activation(policy, shadow, rollback)


def _refuse_reused_version(policy: Policy, in_force: Policy | None, location: str) -> None:
    if in_force is None or (policy.name, policy.version) != (in_force.name, in_force.version):
        return
    if policy.digest != in_force.digest:
        message = (
            f"{policy.name}@{policy.version} is in force with another content "
            f"({in_force.digest}; the bundle holds {policy.digest}): a new content needs a "
            "new version"
        )
        raise BundleError([Problem(location, 0, 0, "$.policies", message)])
