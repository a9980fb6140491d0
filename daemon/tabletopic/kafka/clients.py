"""Every Kafka client the daemon opens is built here: security, prefixes and overrides, as Connect does.

Precedence follows Kafka Connect: the worker's keys (``security.protocol``,
``ssl.*``, ``sasl.*``) apply to every client; ``consumer.``, ``producer.`` and
``admin.`` prefixed keys in the worker file narrow them to one kind of client;
a connector's ``consumer.override.*`` and ``producer.override.*`` win.

TLS stores may be PEM or PKCS12 (see :mod:`tabletopic.core.tls_stores`).  SASL takes
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 from Kafka's JAAS line, and OAUTHBEARER with
the client-credentials grant (see :mod:`tabletopic.kafka.oauth_token`).

:meth:`KafkaClients.probe` tells a bad configuration (an untrusted certificate, a
refused client certificate, wrong credentials) from a broker that is down, so the
daemon can exit with a code that stops a restart loop; no message names a secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from tabletopic.core.tls_stores import load_keystore, store_type, trusted_pem
from tabletopic.kafka.oauth_token import ClientCredentialsToken, TokenRefused

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_LOGIN_MODULES = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule", "SCRAM-SHA-512": "ScramLoginModule",
                  "OAUTHBEARER": "OAuthBearerLoginModule"}
ROLES = ("consumer", "producer", "admin")
_SECURITY_PREFIXES = ("security.", "ssl.", "sasl.")
_PROBE_AGAIN_S = 1.0  # between two start-up probes of brokers that did not answer
_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)\s+(?P<options>.*?);?\s*$",
                   re.S)
_OPTION = re.compile(r'(\w[\w.-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


class KafkaAccessError(RuntimeError):
    """The brokers answer but refuse this configuration: certificates or credentials. Not transient."""


class KafkaUnavailable(RuntimeError):
    """No broker answered: perhaps down for a while."""


@dataclass(frozen=True)
class Security:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    context: ssl.SSLContext | None = field(default=None, repr=False)
    client_cert: bool = False
    token: ClientCredentialsToken | None = field(default=None, repr=False)  # OAUTHBEARER

    def describe(self) -> str:
        parts = [self.protocol]
        if self.mechanism:
            parts.append(f"mechanism {self.mechanism}" + (f" as {self.username}" if self.username else ""))
        if self.context is not None:
            parts.append("with a client certificate" if self.client_cert else "without a client certificate")
        return ", ".join(parts)

    def aiokafka(self) -> dict[str, Any]:
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.context is not None:
            out["ssl_context"] = self.context
        if self.token is not None:
            out.update(sasl_mechanism=self.mechanism, sasl_oauth_token_provider=self.token)
        elif self.mechanism:
            out.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                       sasl_plain_password=self.password)
        return out


def security_of(props: Mapping[str, str]) -> Security:
    """The security of one client from its Kafka properties; ValueError names the key to fix."""
    protocol = (props.get("security.protocol") or "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol must be one of {', '.join(PROTOCOLS)}")
    context, client_cert = (_ssl_context(props) if protocol.endswith("SSL") else (None, False))
    if not protocol.startswith("SASL"):
        return Security(protocol, context=context, client_cert=client_cert)
    mechanism = (props.get("sasl.mechanism") or "GSSAPI").upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"sasl.mechanism {mechanism} is not supported: use one of {', '.join(MECHANISMS)}")
    options = _jaas_options(props.get("sasl.jaas.config") or "", mechanism)
    if mechanism == "OAUTHBEARER":
        endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
        if not endpoint:
            raise ValueError("sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url: tabletopic "
                             "logs in with the OAuth client-credentials grant")
        if not options.get("clientId") or "clientSecret" not in options:
            raise ValueError('sasl.jaas.config needs clientId="..." and clientSecret="..." for OAUTHBEARER')
        token = ClientCredentialsToken(endpoint, options["clientId"], options["clientSecret"], options.get("scope"),
                                       context)
        return Security(protocol, mechanism, options["clientId"], None, context, client_cert, token)
    if not options.get("username") or "password" not in options:
        raise ValueError('sasl.jaas.config needs username="..." and password="..."')
    return Security(protocol, mechanism, options["username"], options["password"], context, client_cert)


def _jaas_options(text: str, mechanism: str) -> dict[str, str]:
    match = _JAAS.match(text)
    if match is None:
        raise ValueError('sasl.jaas.config must look like: <LoginModule> required username="..." password="...";')
    module, expected = match.group("module").rsplit(".", 1)[-1], _LOGIN_MODULES[mechanism]
    if module != expected:
        raise ValueError(f"sasl.jaas.config uses {module}, but sasl.mechanism={mechanism} needs {expected}")
    return {m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
            for m in _OPTION.finditer(match.group("options"))}


def _ssl_context(props: Mapping[str, str]) -> tuple[ssl.SSLContext, bool]:
    context = ssl.create_default_context()
    identification = props.get("ssl.endpoint.identification.algorithm", "https")
    context.check_hostname = identification.lower() == "https"
    trust = props.get("ssl.truststore.location")
    if trust:
        kind = (props.get("ssl.truststore.type") or store_type(trust)).upper()
        context.load_verify_locations(cadata=trusted_pem("ssl.truststore", Path(trust), kind,
                                                         props.get("ssl.truststore.password")))
    keystore = props.get("ssl.keystore.location")
    if keystore:
        kind = (props.get("ssl.keystore.type") or store_type(keystore)).upper()
        load_keystore("ssl.keystore", context, Path(keystore), kind, props.get("ssl.keystore.password"),
                      props.get("ssl.key.password"))
    return context, bool(keystore)


class KafkaClients:
    def __init__(self, bootstrap: list[str], worker_props: Mapping[str, str],
                 overrides: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.bootstrap = list(bootstrap)
        self._worker = dict(worker_props)
        self._overrides = {r: dict(o) for r, o in (overrides or {}).items()}
        self._security: dict[str, Security] = {}

    def for_connector(self, consumer: Mapping[str, str], producer: Mapping[str, str],
                      admin: Mapping[str, str] | None = None) -> KafkaClients:
        """The same worker settings, with a connector's ``consumer.override.*``, ``producer.override.*`` and
        ``admin.override.*``."""
        return KafkaClients(self.bootstrap, self._worker, {"consumer": consumer, "producer": producer,
                                                           "admin": admin or {}})

    def for_control(self, props: Mapping[str, str]) -> KafkaClients:
        """The control topic's clients, as the Iceberg sink makes them: the worker's settings with the
        connector's ``iceberg.kafka.*`` over them, for every role (its ``bootstrap.servers`` too)."""
        servers = props.get("bootstrap.servers")
        bootstrap = [s.strip() for s in servers.split(",") if s.strip()] if servers else self.bootstrap
        return KafkaClients(bootstrap, self._worker, {role: props for role in ("consumer", "producer", "admin")})

    def props(self, role: str) -> dict[str, str]:
        out = {k: v for k, v in self._worker.items() if k.startswith(_SECURITY_PREFIXES)}
        out.update({k: v for k, v in _prefixed(self._worker, role + ".").items() if k.startswith(_SECURITY_PREFIXES)})
        out.update({k: v for k, v in self._overrides.get(role, {}).items() if k.startswith(_SECURITY_PREFIXES)})
        return out

    def security(self, role: str) -> Security:
        if role not in self._security:
            self._security[role] = security_of(self.props(role))
        return self._security[role]

    def describe(self, role: str = "admin") -> str:
        return f"bootstrap {','.join(self.bootstrap)} over {self.security(role).describe()}"

    def kwargs(self, role: str) -> dict[str, Any]:
        return {"bootstrap_servers": ",".join(self.bootstrap), **self.security(role).aiokafka()}

    def admin(self, **kwargs: Any) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(**self.kwargs("admin"), **kwargs)

    def producer(self, **kwargs: Any) -> AIOKafkaProducer:
        return AIOKafkaProducer(**self.kwargs("producer"), **kwargs)

    def consumer(self, *topics: str, **kwargs: Any) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(*topics, **self.kwargs("consumer"), **kwargs)

    def faust_credentials(self) -> Any:
        """The consumer's security as Faust's ``broker_credentials`` (None for PLAINTEXT)."""
        import faust

        s = self.security("consumer")
        if s.token is not None:
            return faust.OAuthCredentials(oauth_cb=s.token, ssl_context=s.context)
        if s.mechanism:
            return faust.SASLCredentials(username=s.username, password=s.password, ssl_context=s.context,
                                         mechanism=s.mechanism)
        if s.context is not None:
            return faust.SSLCredentials(s.context)
        return None

    async def probe(self, role: str = "admin", timeout_s: float = 15.0) -> str | None:
        """Connect as a ``role`` client would; raise KafkaAccessError or KafkaUnavailable with the reason.
        Returns the cluster's id, as the brokers report it (None if they do not say).

        Brokers that do not answer are asked again for ``timeout_s`` in all, as a Kafka client retries:
        a broker restarting, or a network blip, as the daemon starts does not stop it. A refusal of the
        login or the TLS handshake is final at once."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            try:
                return await self._probe_once(role, max(1.0, deadline - asyncio.get_running_loop().time()))
            except KafkaUnavailable:
                if asyncio.get_running_loop().time() + _PROBE_AGAIN_S >= deadline:
                    raise
            await asyncio.sleep(_PROBE_AGAIN_S)

    async def _probe_once(self, role: str, timeout_s: float) -> str | None:
        security = self.security(role)
        if security.context is not None:
            await self._probe_tls(security, timeout_s)
        seen = _Capture()
        logger = logging.getLogger("aiokafka")
        logger.addHandler(seen)
        admin = AIOKafkaAdminClient(**self.kwargs(role), request_timeout_ms=int(timeout_s * 1000))
        try:
            await asyncio.wait_for(admin.start(), timeout_s)
        except (KafkaError, asyncio.TimeoutError, OSError, TokenRefused) as exc:
            where = self.describe(role)
            if security.token is not None and security.token.last_error:
                raise KafkaAccessError(f"{security.token.last_error} ({where})") from None
            if any("Authentication failed" in m or "SaslAuthenticationFailed" in m for m in seen.messages):
                raise KafkaAccessError(f"the brokers refused the login ({where}): check sasl.jaas.config "
                                       "and sasl.mechanism") from None
            if any("UnsupportedSaslMechanism" in m for m in seen.messages):
                raise KafkaAccessError(f"the brokers do not offer this SASL mechanism ({where})") from None
            raise KafkaUnavailable(f"no broker answered ({where}): {type(exc).__name__}") from None
        else:
            try:
                cluster = await asyncio.wait_for(admin.describe_cluster(), timeout_s)
            except (KafkaError, asyncio.TimeoutError, OSError):
                return None  # shown as "" by GET /; nothing else needs it
            return str(cluster.get("cluster_id") or "") or None
        finally:
            logger.removeHandler(seen)
            with contextlib.suppress(Exception):
                await admin.close()

    async def _probe_tls(self, security: Security, timeout_s: float) -> None:
        """A TLS handshake and one ApiVersions round trip, to name certificate trouble precisely."""
        refused: list[str] = []
        for server in self.bootstrap:
            host, _, port = server.rpartition(":")
            where = f"{server} ({security.describe()})"
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, int(port), ssl=security.context, server_hostname=host), timeout_s)
            except ssl.SSLCertVerificationError as exc:
                raise KafkaAccessError(f"the broker's certificate at {where} is not trusted ({exc.verify_message}): "
                                       "check ssl.truststore.location and ssl.endpoint.identification.algorithm"
                                       ) from None
            except (OSError, asyncio.TimeoutError) as exc:
                refused.append(f"{server}: {type(exc).__name__}")
                continue
            try:
                client_id = b"tabletopic-probe"
                body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id  # ApiVersions v0
                writer.write(struct.pack(">i", len(body)) + body)
                await writer.drain()
                await asyncio.wait_for(reader.readexactly(4), timeout_s)
                return
            except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError) as exc:
                reason = getattr(exc, "reason", None) or type(exc).__name__
                hint = "check ssl.keystore.location" if not security.client_cert else \
                    "is the client certificate signed by a CA the broker trusts?"
                raise KafkaAccessError(f"the broker at {where} closed the TLS session ({reason}): it may require a "
                                       f"client certificate it trusts; {hint}") from None
            except asyncio.TimeoutError:
                refused.append(f"{server}: no answer")
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
        raise KafkaUnavailable(f"no broker answered ({', '.join(refused)})")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.messages.append(record.getMessage())


def _prefixed(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def security_problem(props: Mapping[str, str]) -> str | None:
    """Why these Kafka properties cannot make a client, or None."""
    try:
        security_of(props)
    except ValueError as exc:
        return str(exc)
    except ssl.SSLError as exc:
        return f"TLS settings cannot be used: {exc.reason or exc}"
    return None
