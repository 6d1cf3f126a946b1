"""A bundle's fetch and its failures, bounded: a total deadline on a fetch (a bundle server
trickling bytes for ever), a close that ends a fetch in flight, a location shown without its
userinfo and query, and problems bounded in count and length."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pytest
from _support.bundles import Bundles, bundle_server, make_bundles
from _support.slow_bundles import slow_bundle_server
from prunewarden import AuditLog, ReloadingEngine
from prunewarden.bundle import BundleRules
from prunewarden.bundle._archive import pack, unpack
from prunewarden.errors import BundleError
from prunewarden.limits import MAX_PROBLEM_CHARS, MAX_PROBLEMS

SECRET = "s3cret-signature"  # noqa: S105 - what must never be shown


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return make_bundles(tmp_path_factory.mktemp("bundles"))


def failures(stream: io.StringIO) -> list[dict[str, object]]:
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [record for record in records if record["kind"] == "policy_reload_failed"]


class TestDeadline:
    def test_a_trickling_bundle_server_fails_the_fetch_at_its_deadline(
        self, bundles: Bundles
    ) -> None:
        """A server sending a byte every 0.2 s never trips a read timeout; the fetch fails at
        its total deadline, the failure is recorded, and the bundle in force stays."""
        stream = io.StringIO()
        with (
            slow_bundle_server(bundles.r1) as served,
            AuditLog(stream) as audit,
            ReloadingEngine(
                bundle=served.url,
                bundle_key=bundles.keys.public_pem,
                bundle_rules=BundleRules(timeout=1.0),
                interval=0,
                audit=audit,
            ) as engine,
        ):
            served.body, served.trickle = bundles.r2, True
            started = time.monotonic()
            result = engine.reload()
            elapsed = time.monotonic() - started
        assert elapsed < 5, elapsed
        assert not result.changed
        assert any("deadline (1 s)" in problem for problem in result.problems), result.problems
        assert engine.status().last_reload == "failed"
        assert engine.policy.identity.bundle_revision == "r1"
        (failed,) = failures(stream)
        assert "deadline" in json.dumps(failed)

    def test_close_ends_a_fetch_in_flight(self, bundles: Bundles) -> None:
        """The poller is in a fetch that would take minutes: close() returns at once."""
        with slow_bundle_server(bundles.r1) as served:
            engine = ReloadingEngine(
                bundle=served.url,
                bundle_key=bundles.keys.public_pem,
                bundle_rules=BundleRules(timeout=600.0),
                interval=0.05,
            )
            served.body, served.trickle = bundles.r2, True
            assert served.trickling.wait(30), "the poller never fetched"
            started = time.monotonic()
            closing = threading.Thread(target=engine.close, daemon=True)
            closing.start()
            closing.join(10)
            assert not closing.is_alive(), "close() waited for the fetch"
            assert time.monotonic() - started < 5
            assert engine.policy.identity.bundle_revision == "r1"


@pytest.fixture
def tampered(bundles: Bundles) -> bytes:
    """r2 with 3,000 files the manifest does not list, each with a long name: a small
    archive, one problem per file."""
    files, problems = unpack(bundles.r2, "r2")
    assert not problems
    for index in range(3000):
        files[f"extra/{'n' * 200}-{index:05d}.yaml"] = b""
    return pack(files)


class TestShownAndBounded:
    def test_problems_are_bounded_in_count_and_length(
        self, bundles: Bundles, tampered: bytes
    ) -> None:
        """3,000 refusals become at most MAX_PROBLEMS problems and a note, each short: the
        record and the status stay small."""
        assert len(tampered) < 200_000
        stream = io.StringIO()
        with bundle_server() as served, AuditLog(stream) as audit:
            served.serve(bundles.r1)
            engine = ReloadingEngine(
                bundle=served.url, bundle_key=bundles.keys.public_pem, interval=0, audit=audit
            )
            served.serve(tampered)
            result = engine.reload()
            engine.close()
        assert 1 < len(result.problems) <= MAX_PROBLEMS + 1
        assert "more problems not shown" in result.problems[0]
        assert all(len(problem) < 3 * MAX_PROBLEM_CHARS for problem in result.problems)
        assert len(stream.getvalue()) < 200_000
        assert engine.status().problems == result.problems

    def test_a_location_is_shown_without_its_query(self, bundles: Bundles) -> None:
        """A signed URL's query is in no problem, record or status."""
        stream = io.StringIO()
        with bundle_server() as served, AuditLog(stream) as audit:
            served.serve(bundles.r1)
            url = f"{served.url}?X-Amz-Signature={SECRET}"
            engine = ReloadingEngine(
                bundle=url, bundle_key=bundles.keys.public_pem, interval=0, audit=audit
            )
            served.serve(bundles.r2, fault="500")
            result = engine.reload()
            engine.close()
        assert result.problems
        assert engine.bundle == served.url
        shown = json.dumps([result.problems, engine.status().problems, engine.bundle])
        assert SECRET not in shown
        assert SECRET not in stream.getvalue()
        assert failures(stream)

    def test_a_first_fetch_names_no_userinfo(self, bundles: Bundles) -> None:
        """A first bundle that cannot be had is refused naming the URL without user:password."""
        with pytest.raises(BundleError) as raised:
            ReloadingEngine(
                bundle=f"http://user:{SECRET}@127.0.0.1:9/bundle.tar.gz?sig={SECRET}",
                bundle_key=bundles.keys.public_pem,
                interval=0,
            )
        assert SECRET not in str(raised.value)
        assert "http://127.0.0.1:9/bundle.tar.gz" in str(raised.value)


def test_the_problem_limit_is_documented() -> None:
    """docs/limits.md states MAX_PROBLEM_CHARS with its value."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "limits.md").read_text("utf-8")
    assert f"`MAX_PROBLEM_CHARS` ({MAX_PROBLEM_CHARS})" in text
