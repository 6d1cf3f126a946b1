"""A bundle naming a shadow (candidate) per policy: manifest version 2, built, signed and
verified like the policies it shadows, and refused whole when the shadow is not as listed."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from _support.bundles import BASE, prod
from prunewarden._json import encode_canonical
from prunewarden.bundle import (
    MANIFEST_NAME,
    SIGNATURES_NAME,
    KeyPair,
    build_bundle,
    generate_key_pair,
    sign_bundle,
    verify_bundle,
)
from prunewarden.bundle._archive import pack
from prunewarden.bundle._signing import sign
from prunewarden.cli._main import run
from prunewarden.errors import BundleError, PolicyError
from prunewarden.policy import load_policy

BUILT_AT = "2026-12-01T00:00:00Z"


def members(bundle: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive}  # type: ignore[union-attr]


def manifest_of(bundle: bytes) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(members(bundle)[MANIFEST_NAME])
    return document


@pytest.fixture(scope="module")
def keys() -> KeyPair:
    return generate_key_pair()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """prod.yaml (allows the example eviction) and its candidate (denies it), on one base."""
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    (tmp_path / "prod.yaml").write_text(prod(0.25, "1.0.0"), encoding="utf-8")
    (tmp_path / "candidate.yaml").write_text(prod(0.01, "1.1.0-rc.1"), encoding="utf-8")
    return tmp_path


def with_shadow(folder: Path) -> bytes:
    return build_bundle(
        [folder / "prod.yaml"],
        revision="r1",
        built_at=BUILT_AT,
        shadows={"prod": folder / "candidate.yaml"},
    )


def resigned(bundle: bytes, manifest: dict[str, Any], keys: KeyPair) -> bytes:
    """``bundle`` with another manifest, signed by ``keys`` all the same (a signer's mistake,
    or a manifest written by another tool: ``bundle sign`` itself refuses such a manifest)."""
    files = members(bundle)
    files[MANIFEST_NAME] = encode_canonical(manifest)
    files[SIGNATURES_NAME] = sign(files[MANIFEST_NAME], keys.private_pem)
    return pack(files)


class TestManifest:
    def test_a_shadow_is_named_in_the_manifest(self, folder: Path) -> None:
        """The policy's entry names its shadow's path, name@version and digest; the
        candidate's file is one of the bundle's files."""
        candidate = load_policy(folder / "candidate.yaml")
        manifest = manifest_of(with_shadow(folder))
        assert manifest["manifest_version"] == 3
        (entry,) = manifest["policies"]
        assert entry["shadow"] == {
            "path": "candidate.yaml",
            "name": "prod",
            "version": "1.1.0-rc.1",
            "digest": candidate.digest,
        }
        assert "candidate.yaml" in manifest["files"]

    def test_without_a_shadow_the_manifest_has_no_shadow_field(self, folder: Path) -> None:
        """A bundle naming no shadow has no shadow field (and, as every bundle now, a
        sequence: version 3)."""
        manifest = manifest_of(build_bundle([folder / "prod.yaml"], revision="r1"))
        assert manifest["manifest_version"] == 3
        assert "shadow" not in manifest["policies"][0]

    def test_a_shadow_of_no_policy_is_refused(self, folder: Path) -> None:
        """A shadow must name a policy of the bundle: PolicyError at $.shadow."""
        with pytest.raises(PolicyError) as caught:
            build_bundle([folder / "prod.yaml"], revision="r1", shadows={"prd": "candidate.yaml"})
        (problem,) = caught.value.problems
        assert problem.path == "$.shadow"
        assert problem.message == "'prd' is not a policy of the bundle (prod)"


class TestVerify:
    def test_the_shadow_is_loaded_and_named_in_the_bundle(
        self, folder: Path, keys: KeyPair
    ) -> None:
        """Verified, the shadow carries the bundle's revision and its files' bundle names."""
        verified = verify_bundle(
            sign_bundle(with_shadow(folder), keys.private_pem), keys.public_pem
        )
        shadow = verified.shadows["prod"]
        assert (shadow.name, shadow.version) == ("prod", "1.1.0-rc.1")
        assert shadow.identity.bundle_revision == "r1"
        assert shadow.source == "bundle:r1/candidate.yaml"
        assert verified.policies["prod"].version == "1.0.0"

    def test_a_shadow_unlike_its_listing_is_refused(self, folder: Path, keys: KeyPair) -> None:
        """A shadow listed with another digest fails verification at its entry."""
        bundle = with_shadow(folder)
        manifest = manifest_of(bundle)
        listed = manifest["policies"][0]["shadow"]
        listed["digest"] = "sha256:" + "0" * 64
        with pytest.raises(BundleError) as caught:
            verify_bundle(resigned(bundle, manifest, keys), keys.public_pem, "b.tar.gz")
        (problem,) = caught.value.problems
        assert problem.path == "$.policies[0].shadow"
        assert problem.message.startswith("loads as prod@1.1.0-rc.1 sha256:")

    def test_a_version_1_manifest_cannot_name_a_shadow(self, folder: Path, keys: KeyPair) -> None:
        """A shadow in a version 1 manifest is refused, not ignored."""
        bundle = with_shadow(folder)
        manifest = {**manifest_of(bundle), "manifest_version": 1}
        del manifest["sequence"]
        with pytest.raises(BundleError) as caught:
            verify_bundle(resigned(bundle, manifest, keys), keys.public_pem, "b.tar.gz")
        (problem,) = caught.value.problems
        assert (problem.path, problem.message) == (
            "$.policies[0].shadow",
            "needs manifest_version 2",
        )

    def test_a_newer_manifest_version_is_refused(self, folder: Path, keys: KeyPair) -> None:
        """A reader refuses a manifest version it does not know, saying which it knows."""
        bundle = with_shadow(folder)
        manifest = {**manifest_of(bundle), "manifest_version": 4}
        with pytest.raises(BundleError) as caught:
            verify_bundle(resigned(bundle, manifest, keys), keys.public_pem, "b.tar.gz")
        (problem,) = caught.value.problems
        assert (problem.path, problem.message) == (
            "$.manifest_version",
            "4: this reader knows 1, 2 and 3",
        )


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


class TestCommands:
    def test_build_with_a_shadow_and_verify_it(self, folder: Path, keys: KeyPair) -> None:
        """bundle build --shadow NAME=FILE; verify lists the shadow under its policy."""
        (folder / "key.pem").write_bytes(keys.private_pem)
        (folder / "key.pub.pem").write_bytes(keys.public_pem)
        out = str(folder / "b.tar.gz")
        code, _, err = cli(
            "bundle", "build", str(folder / "prod.yaml"), "--revision", "r1", "--out", out,
            "--shadow", f"prod={folder / 'candidate.yaml'}",
        )  # fmt: skip
        assert (code, err) == (0, "")
        assert cli("bundle", "sign", out, "--key", str(folder / "key.pem"))[0] == 0
        code, text, _ = cli("bundle", "verify", out, "--key", str(folder / "key.pub.pem"))
        assert code == 0
        lines = text.splitlines()
        assert lines[1].startswith("  prod@1.0.0 sha256:")
        assert lines[2].startswith("    shadow prod@1.1.0-rc.1 sha256:")
        assert lines[2].endswith(" (candidate.yaml)")

    @pytest.mark.parametrize("value", ["prod", "=candidate.yaml", "prod="])
    def test_a_shadow_option_without_name_and_file_is_a_usage_error(
        self, folder: Path, value: str
    ) -> None:
        """--shadow takes NAME=FILE: anything else exits 2 before building."""
        code, _, err = cli(
            "bundle", "build", str(folder / "prod.yaml"), "--revision", "r1",
            "--out", str(folder / "b.tar.gz"), "--shadow", value,
        )  # fmt: skip
        assert code == 2
        assert "expected NAME=FILE" in err
        assert not (folder / "b.tar.gz").exists()
