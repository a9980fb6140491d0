"""A small, synchronous Schema Registry client for converters: schemas by id, with their references.

Ids never change their schema, so every answer is cached for the life of the
converter and the registry is asked once per id.  A registry that is down is
not a bad record: :class:`RegistryUnavailable` stops the connector with its
offsets unmoved, where a record-level failure would send good data to the
dead-letter topic.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabletopic.convert.isolation import SystemUnavailable
from tabletopic.core.tls_stores import store_type, trusted_pem

_ATTEMPTS = 3


class SchemaNotFound(LookupError):
    pass


class RegistryUnavailable(SystemUnavailable):
    """The registry did not answer, or refused us: the sink waits and reads the records again."""


@dataclass(frozen=True)
class FetchedSchema:
    id: int
    schema: Any  # the parsed JSON for Avro and JSON Schema; for Protobuf, the base64 descriptor
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)
    schema_type: str = "AVRO"


class RegistryClient:
    def __init__(self, urls: list[str], timeout_s: float = 5.0, auth: str | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        if not urls:
            raise ValueError("schema.registry.url is required")
        self._urls = [u.rstrip("/") for u in urls]
        self._timeout = timeout_s
        self._context = context  # None: the system's trust, for https:// URLs
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if auth:
            self._headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
        self._by_id: dict[int, FetchedSchema] = {}
        self._by_version: dict[tuple[str, int], FetchedSchema] = {}

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> RegistryClient:
        urls, auth = [], props.get("basic.auth.user.info") or None
        for url in (u.strip() for u in props.get("schema.registry.url", "").split(",") if u.strip()):
            parsed = urllib.parse.urlsplit(url)
            if parsed.username is not None:  # basic.auth.credentials.source=URL: http://user:pass@host
                auth = auth or f"{urllib.parse.unquote(parsed.username)}:{urllib.parse.unquote(parsed.password or '')}"
                url = parsed._replace(netloc=parsed.netloc.rpartition("@")[2]).geturl()
            urls.append(url)
        return cls(urls, float(props.get("schema.registry.request.timeout.ms", "5000")) / 1000, auth,
                   _tls(props))

    def by_id(self, schema_id: int, schema_type: str = "AVRO") -> FetchedSchema:
        """The schema with this id, which must be of ``schema_type`` (else SchemaNotFound: a bad record)."""
        found = self._by_id.get(schema_id)
        if found is None:
            found = self._by_id[schema_id] = self._fetch(f"/schemas/ids/{schema_id}", schema_id)
        return _of_type(found, schema_type)

    def by_version(self, subject: str, version: int, schema_type: str = "AVRO") -> FetchedSchema:
        found = self._by_version.get((subject, version))
        if found is None:
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
            found = self._by_version[(subject, version)] = self._fetch(path, None)
        return _of_type(found, schema_type)

    def latest(self, subject: str, schema_type: str) -> FetchedSchema:
        """The subject's latest version now (not cached: a new version may come at any time)."""
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
        found = self._fetch(path, None)
        self._by_id.setdefault(found.id, found)
        return _of_type(found, schema_type)

    def _fetch(self, path: str, schema_id: int | None) -> FetchedSchema:
        body = self._get(path)
        if body.get("schemaType") == "PROTOBUF":
            # Asked again for its serialized descriptor, which needs no .proto compiler here. Only then:
            # the format is Protobuf's, and other schemas are read as they are, from any registry.
            body = self._get(f"{path}?format=serialized")
        return _fetched(schema_id if schema_id is not None else int(body["id"]), body)

    def _get(self, path: str) -> dict[str, Any]:
        last: Exception | None = None
        for attempt in range(_ATTEMPTS):
            for base in self._urls:
                request = urllib.request.Request(base + path, headers=self._headers)
                try:
                    with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as response:
                        body = json.loads(response.read())
                        if not isinstance(body, dict):
                            raise RegistryUnavailable(f"{base}{path} answered with {body!r}")
                        return body
                except urllib.error.HTTPError as exc:
                    if exc.code == 404:
                        raise SchemaNotFound(_message(exc)) from None
                    if exc.code in (401, 403):
                        raise RegistryUnavailable(f"the Schema Registry at {base} refused access ({exc.code}); "
                                                  "check basic.auth.user.info") from None
                    last = exc
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    last = exc
            time.sleep(0.2 * (attempt + 1))
        raise RegistryUnavailable(f"the Schema Registry at {', '.join(self._urls)} is not reachable ({last}); "
                                  "check schema.registry.url and that the registry is up")


def _fetched(schema_id: int, body: dict[str, Any]) -> FetchedSchema:
    kind = str(body.get("schemaType") or "AVRO")
    refs = tuple((str(r["name"]), str(r["subject"]), int(r["version"])) for r in body.get("references") or [])
    text = str(body["schema"])
    return FetchedSchema(schema_id, text if kind == "PROTOBUF" else json.loads(text), refs, kind)


def _of_type(found: FetchedSchema, schema_type: str) -> FetchedSchema:
    if found.schema_type != schema_type:
        raise SchemaNotFound(f"schema id {found.id} is a {found.schema_type} schema, not {schema_type}; "
                             "is the converter the one its producer's serializer matches?")
    return found


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("message", exc.reason))
    except (ValueError, AttributeError):
        return str(exc.reason)


def _tls(props: Mapping[str, str]) -> ssl.SSLContext | None:
    """Trust for an https:// registry, from Confluent's client keys (a file, or PEM text)."""
    location = props.get("schema.registry.ssl.truststore.location")
    inline = props.get("schema.registry.ssl.truststore.certificates")
    if not location and not inline:
        return None
    context = ssl.create_default_context()
    # A listed certificate is trusted as it is, also a server's own one (the built-in registry's).
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.check_hostname = props.get("schema.registry.ssl.endpoint.identification.algorithm", "https") == "https"
    if location:
        kind = (props.get("schema.registry.ssl.truststore.type") or store_type(location)).upper()
        inline = trusted_pem("schema.registry.ssl.truststore", Path(location), kind,
                             props.get("schema.registry.ssl.truststore.password"))
    context.load_verify_locations(cadata=inline)
    return context
