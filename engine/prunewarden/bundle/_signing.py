"""Ed25519 signatures over a bundle's manifest, with keys as PEM files (extra ``bundle``:
``cryptography``).

The signatures file lists each signature with the id of the key that made it (``sha256:`` over
the raw public key), so that a verifier holding several keys, or a key rotated in, knows which
signature to check. ``cryptography`` is imported when a key is read (through
:func:`~prunewarden._optional.optional_module`): a program that never signs or verifies a bundle
does not need it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from prunewarden._json import encode_canonical
from prunewarden._optional import optional_module

ALGORITHM = "ed25519"
_NEEDED = "signing and verifying bundles needs the bundle extra: pip install 'prunewarden[bundle]'"


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A new key pair as PEM bytes: PKCS#8 private key (unencrypted), SubjectPublicKeyInfo."""

    private_pem: bytes
    public_pem: bytes


def _serialization() -> Any:
    return optional_module("cryptography.hazmat.primitives.serialization", _NEEDED)


def _ed25519() -> Any:
    return optional_module("cryptography.hazmat.primitives.asymmetric.ed25519", _NEEDED)


def generate_key_pair() -> KeyPair:
    """A fresh Ed25519 key pair."""
    serialization, ed25519 = _serialization(), _ed25519()
    private = ed25519.Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(private_pem, public_pem)


def key_id(public_pem: bytes) -> str:
    """``sha256:`` over the raw 32 bytes of the public key in ``public_pem``."""
    return _key_id(_public_key(public_pem))


def sign(manifest: bytes, private_pem: bytes) -> bytes:
    """The signatures file for ``manifest`` signed with the private key in ``private_pem``;
    :class:`ValueError` when the PEM holds no Ed25519 private key."""
    serialization, ed25519 = _serialization(), _ed25519()
    try:
        private = serialization.load_pem_private_key(private_pem, password=None)
    except (ValueError, TypeError) as exc:
        msg = f"not an unencrypted PEM private key ({exc})"
        raise ValueError(msg) from None
    if not isinstance(private, ed25519.Ed25519PrivateKey):
        msg = "not an Ed25519 private key"
        raise ValueError(msg)  # noqa: TRY004 - a key file's content, as a malformed PEM is
    signature = private.sign(manifest)
    entry = {
        "algorithm": ALGORITHM,
        "key_id": _key_id(private.public_key()),
        "signature": base64.b64encode(signature).decode("ascii"),
    }
    return encode_canonical({"signatures": [entry]})


def check(manifest: bytes, signatures: bytes, public_pem: bytes) -> str | None:
    """Why ``signatures`` holds no valid signature of ``manifest`` by the key in
    ``public_pem``, or None when one is valid; :class:`ValueError` for a PEM that holds no
    Ed25519 public key (the verifier's mistake, not the bundle's)."""
    public = _public_key(public_pem)
    wanted = _key_id(public)
    try:
        entries = json.loads(signatures.decode("utf-8"))["signatures"]
        mine = [e for e in entries if e["algorithm"] == ALGORITHM and e["key_id"] == wanted]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return f"the signatures file is malformed ({type(exc).__name__})"
    if not mine:
        return f"not signed by the key {wanted}"
    exceptions = optional_module("cryptography.exceptions", _NEEDED)
    for entry in mine:
        try:
            public.verify(base64.b64decode(entry["signature"], validate=True), manifest)
        except (exceptions.InvalidSignature, binascii.Error, TypeError):
            continue
        return None
    return f"the signature by the key {wanted} does not match the manifest"


def _public_key(public_pem: bytes) -> Any:
    serialization, ed25519 = _serialization(), _ed25519()
    try:
        public = serialization.load_pem_public_key(public_pem)
    except (ValueError, TypeError) as exc:
        msg = f"not a PEM public key ({exc})"
        raise ValueError(msg) from None
    if not isinstance(public, ed25519.Ed25519PublicKey):
        msg = "not an Ed25519 public key"
        raise ValueError(msg)  # noqa: TRY004 - a key file's content, as a malformed PEM is
    return public


def _key_id(public: Any) -> str:
    serialization = _serialization()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()
