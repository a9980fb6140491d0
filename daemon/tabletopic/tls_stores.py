"""TLS stores as Kafka names them: PEM or PKCS12 truststores and keystores, read for Python's ``ssl``.

PKCS12 is read with ``cryptography``.  Python's ``ssl`` reads a private key only
from a file, so a PKCS12 key is handed to it through a 0600 temporary file that
is removed at once.  JKS is refused with the ``keytool`` line that converts it.
Every message names the keys to fix and never a password.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from pathlib import Path


def store_type(path: str) -> str:
    return {".pem": "PEM", ".crt": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS"}.get(
        Path(path).suffix.lower(), "JKS")  # Kafka's default store type is JKS


def _jks(key: str, path: Path) -> ValueError:
    return ValueError(f"{key}.location {path} is a JKS store, which tabletopic does not read; convert it once "
                      f"with keytool -importkeystore -srckeystore {path} -srcstoretype JKS -destkeystore "
                      f"{path.with_suffix('.p12')} -deststoretype PKCS12, then set {key}.type=PKCS12")


def _read(key: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{key} {path} cannot be read: {exc.strerror or exc}") from None


def trusted_pem(key: str, path: Path, kind: str, password: str | None) -> str:
    """The certificates of a truststore, as PEM text; ``key`` is its keys' prefix (ssl.truststore)."""
    data = _read(f"{key}.location", path)
    if kind == "PEM":
        return data.decode()
    if kind == "JKS":
        raise _jks(key, path)
    if kind != "PKCS12":
        raise ValueError(f"{key}.type {kind} is not supported: use PEM or PKCS12")
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        _, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise ValueError(f"{key}.location {path} cannot be opened: check {key}.password") from None
    certs = [c for c in (cert, *extra) if c is not None]
    if not certs:
        raise ValueError(f"{key}.location {path} holds no certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


def load_keystore(key: str, context: ssl.SSLContext, path: Path, kind: str, password: str | None,
                  key_password: str | None) -> None:
    """Load a key and its certificate chain into ``context``; ``key`` is its keys' prefix (ssl.keystore)."""
    data = _read(f"{key}.location", path)
    if kind == "JKS":
        raise _jks(key, path)
    if kind not in ("PEM", "PKCS12"):
        raise ValueError(f"{key}.type {kind} is not supported: use PEM or PKCS12")
    if kind == "PKCS12":
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12

        try:
            private, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
        except ValueError:
            raise ValueError(f"{key}.location {path} cannot be opened: check {key}.password") from None
        if private is None or cert is None:
            raise ValueError(f"{key}.location {path} holds no private key and certificate")
        data = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) \
            + b"".join(c.public_bytes(Encoding.PEM) for c in (cert, *extra))
        key_password = None
    # Python's ssl reads a key only from a file: a private one, removed as soon as it is read.
    fd, name = tempfile.mkstemp(prefix="tabletopic-key-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        context.load_cert_chain(name, password=key_password or password or None)
    except ssl.SSLError as exc:
        raise ValueError(f"{key}.location {path} has no usable key and certificate "
                         f"(check the key's password): {exc.reason or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
