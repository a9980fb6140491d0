"""Keys of a connector configuration that nothing reads: each is told, with the key it may misspell.

Connect and the Iceberg sink ignore a key they do not know without a word, so ``errors.tolerence=all``
leaves ``errors.tolerance`` at ``none`` and nobody learns why. Here every such key gets a warning that
names it and, where one is close, the known key it likely misspells. The warnings go wherever the
configuration is read: the log, ``tabletopic validate``, and the REST create and validate answers.

Inside the families, the keys that are read are listed, and the others told too: a Kafka client
override this sink does not apply (``consumer.override.client.id``), a transform's setting its class
does not read (in plugin_specs.py), a transform or predicate alias that ``transforms`` or ``predicates``
does not list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tabletopic.config.connector_keys import (
    ADMIN_OVERRIDE_PREFIX,
    AUTO_CREATE_PREFIX,
    CATALOG_PREFIX,
    CONNECTOR_KEYS,
    CONSUMER_OVERRIDE_PREFIX,
    FRAMEWORK_KEYS,
    HADOOP_PREFIX,
    HEADER_CONVERTER_PREFIX,
    KAFKA_PREFIX,
    PRODUCER_OVERRIDE_PREFIX,
    TABLE_KEYS,
    TABLE_PREFIX,
    WRITE_PREFIX,
)
from tabletopic.config.definition import KeyType, aliases, unknown_key

SECURITY = ("security.", "ssl.", "sasl.")
# What each family of Kafka client overrides is read for: the rest is told and ignored.
READ_OVERRIDES = {
    CONSUMER_OVERRIDE_PREFIX: ("fetch.min.bytes", "fetch.max.wait.ms", "max.poll.records", "isolation.level",
                               "auto.offset.reset", "metadata.max.age.ms", "group.id"),
    PRODUCER_OVERRIDE_PREFIX: (),
    ADMIN_OVERRIDE_PREFIX: (),
    KAFKA_PREFIX: ("bootstrap.servers",),
}
_FREE_FAMILIES = (CATALOG_PREFIX, HADOOP_PREFIX, AUTO_CREATE_PREFIX, WRITE_PREFIX, HEADER_CONVERTER_PREFIX,
                  "key.converter.", "value.converter.")  # passed on whole to what reads them
_KNOWN = [k for k, key in CONNECTOR_KEYS.items() if key.type is not KeyType.PREFIX]
_ALIASES = aliases(CONNECTOR_KEYS)


def unknown_warnings(props: Mapping[str, str], transforms: Iterable[str], predicates: Iterable[str]) -> list[str]:
    """A warning for every key of ``props`` no part of the sink reads."""
    transforms, predicates = set(transforms), set(predicates)
    out = []
    for key in props:
        if key in CONNECTOR_KEYS or key in _ALIASES or key in FRAMEWORK_KEYS or key.startswith(_FREE_FAMILIES):
            continue
        family = next((p for p in READ_OVERRIDES if key.startswith(p)), None)
        if family is not None:
            name = key[len(family):]
            if not name.startswith(SECURITY) and name not in READ_OVERRIDES[family]:
                read = ", ".join(("security.*, ssl.*, sasl.*", *READ_OVERRIDES[family]))
                out.append(f"{key} is not applied: of {family}* this sink reads {read}")
            continue
        if key.startswith(TABLE_PREFIX):
            if key.rsplit(".", 1)[-1] not in TABLE_KEYS:
                out.append(unknown_key(key, [f"{key.rsplit('.', 1)[0]}.{k}" for k in TABLE_KEYS],
                                       f" (per-table keys are {', '.join(TABLE_KEYS)})"))
            continue
        family = "transforms" if key.startswith("transforms.") else "predicates" if key.startswith(
            "predicates.") else None
        if family is not None:
            alias = key[len(family) + 1:].split(".", 1)[0]
            if alias not in (transforms if family == "transforms" else predicates):
                out.append(f"{key} is ignored: {alias!r} is not listed in {family}")
            continue
        out.append(unknown_key(key, _KNOWN))
    return out
