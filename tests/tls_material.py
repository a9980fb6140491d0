"""Certificates for TLS tests, made with ``cryptography``: a CA, a broker, a client, and an untrusted CA."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "store-pass-7Q"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
          | None, usage: str | None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject))
               .issuer_name(issuer[0].subject if issuer else _name(subject)).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=30)))
    if usage is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    else:
        oid = ExtendedKeyUsageOID.SERVER_AUTH if usage == "server" else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([oid]), critical=False)
        if usage == "server":
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


@dataclass
class Material:
    root: Path

    def path(self, name: str) -> Path:
        return self.root / name


def make_material(root: Path) -> Material:
    """ca.pem, server and client .pem/.key/.p12/-keystore.pem, truststore.p12 and .jks, client.jks, other-*."""
    root.mkdir(parents=True, exist_ok=True)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    for prefix, ca_name in (("", "test-ca"), ("other-", "other-ca")):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _cert(ca_name, ca_key, None, None)
        (root / f"{prefix}ca.pem").write_bytes(pem(ca))
        for role in ("server", "client"):
            key = ec.generate_private_key(ec.SECP256R1())
            cert = _cert("localhost" if role == "server" else "tabletopic", key, (ca, ca_key), role)
            (root / f"{prefix}{role}.pem").write_bytes(pem(cert))
            (root / f"{prefix}{role}.key").write_bytes(pem_key(key))
            (root / f"{prefix}{role}-keystore.pem").write_bytes(pem_key(key) + pem(cert))
            (root / f"{prefix}{role}.p12").write_bytes(pkcs12.serialize_key_and_certificates(
                b"tabletopic", key, cert, [ca], serialization.BestAvailableEncryption(PASSWORD.encode())))
        (root / f"{prefix}truststore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
            None, None, None, [ca], serialization.BestAvailableEncryption(PASSWORD.encode())))
    # JKS as Java's keytool writes it (the JDK is on every machine that runs the tests).
    # C1 and the serial collector: keytool lives a second, too short for C2's compiles to pay back.
    keytool = ["keytool", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-noprompt", "-storepass", PASSWORD]
    subprocess.run([*keytool, "-importcert", "-alias", "ca", "-file", str(root / "ca.pem"), "-keystore",
                    str(root / "truststore.jks"), "-storetype", "JKS"], check=True, capture_output=True)
    subprocess.run([*keytool, "-importkeystore", "-srckeystore", str(root / "client.p12"), "-srcstoretype", "PKCS12",
                    "-srcstorepass", PASSWORD, "-destkeystore", str(root / "client.jks"), "-deststoretype", "JKS"],
                   check=True, capture_output=True)
    return Material(root)
