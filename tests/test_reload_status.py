"""ReloadingEngine.status(): what a health check reads about hot reload."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prunewarden import ReloadingEngine, ReloadStatus

VERSION_A = """\
apiVersion: prunewarden/v1
kind: Policy
metadata: {name: prod, version: 1.0.0}
spec:
  eviction: {stability_delta: 0.25}
"""
VERSION_B = VERSION_A.replace("1.0.0", "1.1.0").replace("0.25", "0.01")
INVALID = VERSION_A.replace("1.0.0", "1.2.0").replace("0.25", "2.0")


def replace(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    replace(tmp_path / "prod.yaml", VERSION_A)
    return tmp_path / "prod.yaml"


@pytest.fixture
def engine(files: Path) -> Iterator[ReloadingEngine]:
    with ReloadingEngine(files, interval=0) as reloading:
        yield reloading


class TestStatus:
    def test_fresh_engine_is_healthy(self, engine: ReloadingEngine) -> None:
        """Before any reload: the policy in force, since when, no reload yet, not polling."""
        status = engine.status()
        assert isinstance(status, ReloadStatus)
        assert status.healthy
        assert (status.policy.name, status.policy.version) == ("prod", "1.0.0")
        assert status.policy.digest == engine.policy.digest
        assert status.shadow is None
        assert (status.last_reload, status.last_reload_at, status.problems) == (None, None, ())
        assert status.in_force_since.endswith("Z")
        assert not status.polling

    def test_a_reload_is_recorded(self, files: Path, engine: ReloadingEngine) -> None:
        """A swap names the new policy and moves its in-force time; a look at the same
        content says unchanged and keeps it."""
        before = engine.status()
        replace(files, VERSION_B)
        engine.reload()
        reloaded = engine.status()
        assert (reloaded.last_reload, reloaded.policy.version) == ("reloaded", "1.1.0")
        assert reloaded.last_reload_at is not None
        assert reloaded.in_force_since >= before.in_force_since
        assert reloaded.in_force_since == reloaded.last_reload_at
        engine.reload()
        again = engine.status()
        assert (again.last_reload, again.healthy) == ("unchanged", True)
        assert again.in_force_since == reloaded.in_force_since

    def test_a_failed_reload_is_unhealthy_until_fixed(
        self, files: Path, engine: ReloadingEngine
    ) -> None:
        """A change that does not load: unhealthy, with its problems, the old policy still in
        force; a good change makes it healthy again."""
        replace(files, INVALID)
        engine.reload()
        failed = engine.status()
        assert (failed.healthy, failed.last_reload) == (False, "failed")
        assert failed.policy.version == "1.0.0"
        assert any("stability_delta" in problem for problem in failed.problems)
        assert failed.to_dict()["problems"] == list(failed.problems)
        replace(files, VERSION_B)
        engine.reload()
        assert engine.status().healthy
        assert engine.status().problems == ()

    def test_polling_is_reported(self, files: Path) -> None:
        """A polling engine says so; once closed it does not."""
        reloading = ReloadingEngine(files, interval=30)
        try:
            assert reloading.status().polling
        finally:
            reloading.close()
        assert not reloading.status().polling

    def test_to_dict_is_json_ready(self, engine: ReloadingEngine) -> None:
        """to_dict() names every field a health endpoint would serve."""
        assert set(engine.status().to_dict()) == {
            "healthy",
            "policy",
            "shadow",
            "in_force_since",
            "last_reload_at",
            "last_reload",
            "problems",
            "polling",
        }


class TestReloadHooks:
    def test_hooks_hear_every_reload(self, files: Path, engine: ReloadingEngine) -> None:
        """A reload hook gets the result of each reload, failed ones included."""
        heard: list[tuple[bool, int]] = []
        engine.add_reload_hook(lambda result: heard.append((result.changed, len(result.problems))))
        replace(files, VERSION_B)
        engine.reload()
        replace(files, INVALID)
        engine.reload()
        assert heard[0] == (True, 0)
        assert heard[1][0] is False
        assert heard[1][1] > 0

    def test_a_hook_that_raises_changes_nothing(
        self, files: Path, engine: ReloadingEngine, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The reload stands and the failure goes to the prunewarden logger."""

        def broken(result: object) -> None:
            raise RuntimeError(result)

        engine.add_reload_hook(broken)
        replace(files, VERSION_B)
        with caplog.at_level(logging.ERROR, logger="prunewarden"):
            assert engine.reload().changed
        assert engine.policy.version == "1.1.0"
        assert "reload hook" in caplog.text
