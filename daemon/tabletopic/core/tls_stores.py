"""TLS stores as Kafka names them: PEM or PKCS12 truststores and keystores, read for Python's ``ssl``.

PKCS12 is read with ``cryptography``, JKS with ``purejks``.  Python's ``ssl`` reads
a private key only from a file, so a key from a store is handed to it through a
0600 temporary file that is removed at once.
Every message names the keys to fix and never a password.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any


def store_type(path: str) -> str:
    return {".pem": "PEM", ".crt": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS"}.get(
        Path(path).suffix.lower(), "JKS")  # Kafka's default store type is JKS


def _jks(key: str, path: Path, data: bytes, password: str | None) -> Any:
    """A JKS store, read with purejks (a maintained fork of pyjks)."""
    import jks

    try:
        return jks.KeyStore.loads(data, password or "", try_decrypt_keys=False)
    except Exception:  # the library raises several kinds for a wrong password or a damaged file
        raise ValueError(f"{key}.location {path} cannot be opened as JKS: check {key}.password, or convert it "
                         f"with keytool -importkeystore -srckeystore {path} -srcstoretype JKS -destkeystore "
                         f"{path.with_suffix('.p12')} -deststoretype PKCS12") from None


def _pem_of(der: bytes) -> str:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_der_x509_certificate(der).public_bytes(Encoding.PEM).decode()


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
        store = _jks(key, path, data, password)
        certs = [e.cert for e in store.certs.values()] + \
            [der for e in store.private_keys.values() for _, der in e.cert_chain]
        if not certs:
            raise ValueError(f"{key}.location {path} holds no certificate")
        return "".join(_pem_of(der) for der in certs)
    if kind != "PKCS12":
        raise ValueError(f"{key}.type {kind} is not supported: use PEM, PKCS12 or JKS")
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
        data, key_password = _jks_key_pem(key, path, data, password, key_password), None
    elif kind not in ("PEM", "PKCS12"):
        raise ValueError(f"{key}.type {kind} is not supported: use PEM, PKCS12 or JKS")
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


def _jks_key_pem(key: str, path: Path, data: bytes, password: str | None, key_password: str | None) -> bytes:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_der_private_key,
    )

    entries = list(_jks(key, path, data, password).private_keys.values())
    if not entries:
        raise ValueError(f"{key}.location {path} holds no private key")
    entry = entries[0]
    try:
        entry.decrypt(key_password or password or "")
    except Exception:
        raise ValueError(f"{key}.location {path}: its key does not open with ssl.key.password") from None
    private = load_der_private_key(entry.pkey_pkcs8, None)
    return private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + \
        "".join(_pem_of(der) for _, der in entry.cert_chain).encode()
