"""SASL/OAUTHBEARER with the OAuth 2 client-credentials grant, as Kafka's KIP-768 login handler does it.

Configured with Kafka's keys::

    sasl.mechanism=OAUTHBEARER
    sasl.oauthbearer.token.endpoint.url=https://idp.example.com/oauth2/token
    sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
        clientId="tabletopic" clientSecret="${file:/etc/tabletopic/oauth.properties:secret}" scope="kafka";

The token is fetched when a connection logs in and reused until shortly before
it expires.  A refused request raises :class:`TokenRefused`, which the start-up
probe reports as a configuration error rather than an outage.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import urllib.parse

import aiohttp
from aiokafka.abc import AbstractTokenProvider

_REFRESH_BEFORE_S = 30.0  # fetch a new token this long before the old one expires


class TokenRefused(RuntimeError):
    """The token endpoint refused the client credentials (or answered without a token)."""


class ClientCredentialsToken(AbstractTokenProvider):
    def __init__(self, endpoint: str, client_id: str, client_secret: str, scope: str | None,
                 context: ssl.SSLContext | None, timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self.client_id = client_id
        self._secret = client_secret
        self._scope = scope
        self._context = context
        self._timeout_s = timeout_s
        self._token: str | None = None
        self._expires = 0.0
        self._lock: asyncio.Lock | None = None
        self.last_error: str | None = None

    def __repr__(self) -> str:
        return f"ClientCredentialsToken({self.endpoint}, client {self.client_id})"

    async def token(self) -> str:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._token is None or time.monotonic() >= self._expires - _REFRESH_BEFORE_S:
                self._token, lifetime = await self._fetch()
                self._expires = time.monotonic() + lifetime
            return self._token

    async def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials", **({"scope": self._scope} if self._scope else {})}
        # RFC 6749 2.3.1: the client id and secret are form-encoded, then sent as HTTP Basic credentials.
        login = f"{urllib.parse.quote(self.client_id, safe='')}:{urllib.parse.quote(self._secret, safe='')}"
        headers = {"Authorization": "Basic " + base64.b64encode(login.encode()).decode()}
        timeout = aiohttp.ClientTimeout(total=self._timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.post(
                self.endpoint, data=form, headers=headers,
                ssl=self._context if self._context is not None else True) as reply:
            text = await reply.text()
            if reply.status != 200:
                self.last_error = (f"the token endpoint {self.endpoint} refused client {self.client_id} "
                                   f"(HTTP {reply.status}): check clientId and clientSecret in sasl.jaas.config")
                raise TokenRefused(self.last_error)
        try:
            body = json.loads(text)
            token, lifetime = str(body["access_token"]), float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            self.last_error = f"the token endpoint {self.endpoint} answered without an access_token"
            raise TokenRefused(self.last_error) from None
        self.last_error = None
        return token, lifetime
