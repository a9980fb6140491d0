"""HTTPS and HTTP Basic authentication for the daemon's two listeners: the REST API and the Schema Registry.

Keys follow Connect's and Confluent's names where they exist::

    listeners=https://0.0.0.0:8443
    listeners.https.ssl.keystore.location=/etc/tabletopic/rest.p12    # PEM or PKCS12
    listeners.https.ssl.keystore.password=${file:/etc/tabletopic/secrets.properties:rest.keystore}
    rest.authentication.method=BASIC
    rest.authentication.credentials.file=/etc/tabletopic/rest-users.properties

    schema.registry.listeners=https://0.0.0.0:8081
    schema.registry.ssl.keystore.location=...      (and .type, .password, schema.registry.ssl.key.password)
    schema.registry.authentication.method=BASIC
    schema.registry.authentication.credentials.file=/etc/tabletopic/registry-users.properties

A credentials file holds ``user: password`` lines, as the file of Connect's
``PropertyFileLoginModule``.  ``/health`` stays open for probes; every other path
answers 401 without valid credentials.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from tabletopic.core.java_properties import parse_properties
from tabletopic.core.tls_stores import load_keystore, store_type, trusted_pem

OPEN_PATHS = frozenset({"/health"})
_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?", re.S)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ListenerSecurity:
    context: ssl.SSLContext | None = field(default=None, repr=False)
    users: Mapping[str, str] | None = field(default=None, repr=False)  # None: no authentication
    trust_pem: str | None = field(default=None, repr=False)  # the listener's own certificates, for its own clients

    @property
    def scheme(self) -> str:
        return "https" if self.context is not None else "http"

    def own_login(self) -> str | None:
        """``user:password`` this process uses for its own calls (converters on the built-in registry)."""
        if not self.users:
            return None
        user = next(iter(self.users))
        return f"{user}:{self.users[user]}"

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.users is None or request.path in OPEN_PATHS or self._authorized(request.headers.get("Authorization")):
            return await handler(request)
        return web.Response(status=401, content_type="application/json",
                            headers={"WWW-Authenticate": 'Basic realm="tabletopic"'},
                            text=json.dumps({"error_code": 401, "message": "Unauthorized"}))

    def _authorized(self, header: str | None) -> bool:
        if not header or not header.startswith("Basic ") or self.users is None:
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = self.users.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())


def listener_security(props: Mapping[str, str], url: str, tls_prefix: str, auth_prefix: str) -> ListenerSecurity:
    """The security of the listener at ``url``; ValueError names the key to fix."""
    context = trust = None
    if url.startswith("https://"):
        location = props.get(f"{tls_prefix}keystore.location")
        if not location:
            raise ValueError(f"{url} is HTTPS: set {tls_prefix}keystore.location (PEM or PKCS12)")
        kind = (props.get(f"{tls_prefix}keystore.type") or store_type(location)).upper()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        load_keystore(f"{tls_prefix}keystore", context, Path(location), kind,
                      props.get(f"{tls_prefix}keystore.password"), props.get(f"{tls_prefix}key.password"))
        chain = trusted_pem(f"{tls_prefix}keystore", Path(location), kind, props.get(f"{tls_prefix}keystore.password"))
        trust = "".join(_CERTIFICATE.findall(chain))  # a PEM keystore holds the key too: keep certificates only
    method = (props.get(f"{auth_prefix}authentication.method") or "NONE").upper()
    if method == "NONE":
        return ListenerSecurity(context, None, trust)
    if method != "BASIC":
        raise ValueError(f"{auth_prefix}authentication.method must be NONE or BASIC")
    path = props.get(f"{auth_prefix}authentication.credentials.file")
    if not path:
        raise ValueError(f"{auth_prefix}authentication.method=BASIC needs {auth_prefix}authentication.credentials.file")
    try:
        users = parse_properties(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"{auth_prefix}authentication.credentials.file {path} cannot be read: "
                         f"{exc.strerror or exc}") from None
    if not users:
        raise ValueError(f"{auth_prefix}authentication.credentials.file {path} names no user")
    return ListenerSecurity(context, users, trust)
