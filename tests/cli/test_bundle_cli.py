"""``prunewarden bundle keygen|build|sign|verify``, run in-process, with their exit codes."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest
from _support.bundles import BASE, prod
from prunewarden.cli._main import run

BUILT_AT = "2026-12-01T00:00:00Z"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "prod.yaml").write_text(prod(0.25, "1.0.0"), encoding="utf-8")
    assert cli("policy", "lock", str(tmp_path / "prod.yaml"))[0] == 0
    for name in ("signer", "other"):
        code, out, _ = cli(
            "bundle",
            "keygen",
            "--private",
            str(tmp_path / f"{name}.pem"),
            "--public",
            str(tmp_path / f"{name}.pub.pem"),
        )
        assert code == 0
        assert out.startswith(f"{tmp_path / f'{name}.pub.pem'}: sha256:")
    return tmp_path


def build_and_sign(workdir: Path) -> Path:
    bundle = workdir / "bundle.tar.gz"
    code, out, err = cli(
        "bundle", "build", str(workdir / "prod.yaml"), "--revision", "r1", "--out", str(bundle),
        "--built-at", BUILT_AT,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out == f"{bundle}: revision r1, 1 policies\n"
    code, out, err = cli("bundle", "sign", str(bundle), "--key", str(workdir / "signer.pem"))
    assert (code, out, err) == (0, f"{bundle}: signed\n", "")
    return bundle


class TestBundleCommand:
    def test_keygen_writes_a_private_key_only_its_owner_reads(self, workdir: Path) -> None:
        """The private key is created 0600 and never written over (exit 2)."""
        mode = stat.S_IMODE((workdir / "signer.pem").stat().st_mode)
        assert mode == 0o600
        code, _, err = cli(
            "bundle", "keygen", "--private", str(workdir / "signer.pem"),
            "--public", str(workdir / "x.pem"),
        )  # fmt: skip
        assert code == 2
        assert "cannot write" in err

    def test_build_sign_verify(self, workdir: Path) -> None:
        """A signed bundle verifies (exit 0): revision, signer and each policy printed."""
        bundle = build_and_sign(workdir)
        code, out, err = cli(
            "bundle", "verify", str(bundle), "--key", str(workdir / "signer.pub.pem")
        )
        assert (code, err) == (0, "")
        first, policy = out.splitlines()
        assert first.startswith(
            f"{bundle}: verified: revision r1, built {BUILT_AT}, sequence 1796083200000, "
            "signed by sha256:"
        )
        assert policy.startswith("  prod@1.0.0 sha256:")
        assert policy.endswith("(prod.yaml)")

    def test_verify_as_json(self, workdir: Path) -> None:
        """--format json prints the manifest, the signer's key id and verified: true."""
        bundle = build_and_sign(workdir)
        key = str(workdir / "signer.pub.pem")
        code, out, _ = cli("bundle", "verify", str(bundle), "--key", key, "--format", "json")
        document = json.loads(out)
        assert code == 0
        assert (document["verified"], document["revision"]) == (True, "r1")
        assert sorted(document["files"]) == ["base.yaml", "policy.lock", "prod.yaml"]

    def test_another_key_exits_5(self, workdir: Path) -> None:
        """A bundle not signed by the key given fails verification: exit 5, one located line."""
        bundle = build_and_sign(workdir)
        code, out, err = cli(
            "bundle", "verify", str(bundle), "--key", str(workdir / "other.pub.pem")
        )
        assert (code, out) == (5, "")
        assert err.startswith(f"{bundle}: $['signatures.json']: not signed by the key sha256:")

    def test_a_truncated_bundle_exits_5(self, workdir: Path) -> None:
        """A bundle cut short fails verification: exit 5."""
        bundle = build_and_sign(workdir)
        bundle.write_bytes(bundle.read_bytes()[:100])
        code, _, err = cli(
            "bundle", "verify", str(bundle), "--key", str(workdir / "signer.pub.pem")
        )
        assert code == 5
        assert "not a complete gzip archive" in err

    def test_an_unreadable_key_exits_2(self, workdir: Path) -> None:
        """A key file that is missing, or holds a private key where a public one is asked,
        is a usage error (exit 2)."""
        bundle = build_and_sign(workdir)
        code, _, err = cli("bundle", "verify", str(bundle), "--key", str(workdir / "none.pem"))
        assert code == 2
        assert "cannot read" in err
        code, _, err = cli("bundle", "verify", str(bundle), "--key", str(workdir / "signer.pem"))
        assert code == 2
        assert "not a PEM public key" in err

    def test_an_invalid_policy_exits_3(self, workdir: Path) -> None:
        """A policy that does not load is not bundled: exit 3, nothing written."""
        (workdir / "prod.yaml").write_text(prod(2.0, "1.0.1"), encoding="utf-8")
        out = workdir / "bundle.tar.gz"
        code, _, err = cli(
            "bundle", "build", str(workdir / "prod.yaml"), "--revision", "r1", "--out", str(out)
        )
        assert code == 3
        assert "stability_delta" in err
        assert not out.exists()
