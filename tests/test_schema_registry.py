"""The built-in Schema Registry, driven by confluent-kafka's own client and serializers."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.service import SchemaRegistryService
from tabletopic_plugins.converters.avro_converter import AvroConverter
from tests.support import unique


def _record(name: str, *fields: dict[str, Any]) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "fields": list(fields)}), "AVRO")


def _field(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


OPTIONAL_NOTE = _field("note", ["null", "string"], default=None)


@pytest.fixture
def registry(bootstrap: str) -> Iterator[SchemaRegistryService]:
    service = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([bootstrap], {}), unique("_schemas"), "BACKWARD")
    service.start()
    yield service
    service.stop()


def _client(service: SchemaRegistryService) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": service.url})


def _refused(client: SchemaRegistryClient, subject: str, schema: Schema) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema(subject, schema)
    assert info.value.http_status_code == 409
    return info.value


def test_compatibility_levels(registry: SchemaRegistryService) -> None:
    client = _client(registry)
    v1 = _record("Order", _field("id", "long"), _field("amount", "int"))
    widened = _record("Order", _field("id", "long"), _field("amount", "long"))
    with_note = _record("Order", _field("id", "long"), _field("amount", "long"), OPTIONAL_NOTE)
    required_new = _record("Order", _field("id", "long"), _field("amount", "long"), _field("sku", "string"))
    dropped_amount = _record("Order", _field("id", "long"))

    assert client.get_compatibility() == "BACKWARD"
    first = client.register_schema("orders-value", v1)
    assert client.register_schema("orders-value", v1) == first  # the same schema is not a new version
    assert client.register_schema("orders-value", widened) != first  # int -> long reads old data
    client.register_schema("orders-value", with_note)
    error = _refused(client, "orders-value", required_new)
    assert "sku" in error.error_message and "default" in error.error_message
    assert client.get_versions("orders-value") == [1, 2, 3]

    # FORWARD: old readers must read new data. Dropping a field without a default breaks them.
    client.set_compatibility("fwd-value", "FORWARD")
    client.register_schema("fwd-value", v1)
    _refused(client, "fwd-value", widened)  # an old int reader cannot read a long
    client.register_schema("fwd-value", _record("Order", _field("id", "long"), _field("amount", "int"),
                                                 _field("extra", "string")))
    client.set_compatibility("fwd2-value", "FORWARD")
    client.register_schema("fwd2-value", v1)
    _refused(client, "fwd2-value", dropped_amount)

    # FULL needs both; an optional field with a default is the change that passes.
    client.set_compatibility("full-value", "FULL")
    client.register_schema("full-value", widened)
    client.register_schema("full-value", with_note)
    _refused(client, "full-value", _record("Order", _field("id", "long"), _field("amount", "double"), OPTIONAL_NOTE))

    # Transitive levels check every live version, the plain ones only the latest.
    a = _record("T", _field("x", "string"))
    b = _record("T", _field("x", "string"), _field("y", "int", default=0))
    c = _record("T", _field("x", "string"), _field("y", "string", default=""))  # y: int -> string
    for level, accepted in (("BACKWARD", False), ("NONE", True)):
        subject = f"plain-{level}"
        client.set_compatibility(subject, level)
        client.register_schema(subject, a)
        client.register_schema(subject, b)
        if accepted:
            client.register_schema(subject, c)
        else:
            _refused(client, subject, c)
    client.set_compatibility("trans-value", "BACKWARD_TRANSITIVE")
    client.register_schema("trans-value", a)
    client.register_schema("trans-value", _record("T", _field("x", "string"), _field("z", "long", default=1)))
    d = _record("T", _field("x", "string"), _field("z", "long", default=1), _field("w", "int"))
    _refused(client, "trans-value", d)
    assert client.test_compatibility("trans-value", a) and not client.test_compatibility("trans-value", d)

    with pytest.raises(SchemaRegistryError) as info:
        client.set_compatibility("x-value", "SIDEWAYS")
    assert info.value.error_code == 42203


def test_soft_and_hard_deletes(registry: SchemaRegistryService) -> None:
    client = _client(registry)
    v1 = _record("D", _field("a", "string"))
    v2 = _record("D", _field("a", "string"), OPTIONAL_NOTE)
    first, second = client.register_schema("d-value", v1), client.register_schema("d-value", v2)
    with pytest.raises(SchemaRegistryError) as info:
        client.delete_subject("d-value", permanent=True)
    assert info.value.error_code == 40405  # a hard delete must follow a soft one
    assert client.delete_version("d-value", 1) == 1
    assert client.get_versions("d-value") == [2]
    assert client.get_schema(first).schema_str  # a soft-deleted version's id still resolves
    assert client.delete_subject("d-value") == [2]
    assert "d-value" not in client.get_subjects()
    with pytest.raises(SchemaRegistryError) as info:
        client.get_versions("d-value")
    assert info.value.error_code == 40401
    assert sorted(client.delete_subject("d-value", permanent=True)) == [1, 2]
    fresh = SchemaRegistryClient({"url": registry.url})  # no cache
    for schema_id in (first, second):
        with pytest.raises(SchemaRegistryError) as info:
            fresh.get_schema(schema_id)
        assert info.value.error_code == 40403
    assert client.register_schema("d-value", v1) > 0  # the subject can start again


def test_references_and_the_avro_converter(registry: SchemaRegistryService) -> None:
    client = _client(registry)
    address = {"type": "record", "name": "Address", "namespace": "acme",
               "fields": [_field("city", "string"), _field("zip", ["null", "string"], default=None)]}
    client.register_schema("acme.Address", Schema(json.dumps(address), "AVRO"))
    customer = Schema(json.dumps({"type": "record", "name": "Customer", "namespace": "acme", "fields": [
        _field("id", "long"), _field("home", "acme.Address"), _field("past", {"type": "array", "items": "Address"})]}),
        "AVRO", [SchemaReference("acme.Address", "acme.Address", 1)])
    unresolved = Schema(customer.schema_str, "AVRO")
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("customers-value", unresolved)
    assert info.value.error_code == 42201 and "acme.Address" in info.value.error_message
    customer_id = client.register_schema("customers-value", customer)
    assert client.get_schema(customer_id).references[0].subject == "acme.Address"

    serialize = AvroSerializer(client, customer, conf={"auto.register.schemas": False,
                                                                  "use.latest.version": True})
    deserialize = AvroDeserializer(client)
    context = SerializationContext("customers", MessageField.VALUE)
    values = [{"id": i, "home": {"city": f"c{i}", "zip": None if i % 2 else f"z{i}"},
               "past": [{"city": "old", "zip": None}] * i} for i in range(3)]
    payloads = [serialize(v, context) for v in values]
    assert [deserialize(p, context) for p in payloads] == values  # confluent's reader agrees with the bytes

    converter = AvroConverter()
    converter.configure({"schema.registry.url": registry.url}, is_key=False)
    result = converter.convert("customers", [*payloads, b"\x00\x00\x00\x7f\xffxx", b"plain"])
    assert [f.index for f in result.failures] == [3, 4]
    assert "not in the Schema Registry" in result.failures[0].reason
    assert "magic byte" in result.failures[1].reason
    assert result.parts[0].table.to_pylist() == values


def test_schemas_survive_a_restart_and_two_registries_share_one_topic(bootstrap: str) -> None:
    topic = unique("_schemas")
    one = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([bootstrap], {}), topic, "BACKWARD")
    two = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([bootstrap], {}), topic, "BACKWARD")
    one.start()
    two.start()
    try:
        # Both register at the same time, into one subject and into their own: nothing is lost or shared wrongly.
        ids: dict[str, int] = {}

        def register(service: SchemaRegistryService, tag: str) -> None:
            client = _client(service)
            for i in range(8):
                schema = _record("S", _field("a", "string"), _field(f"{tag}{i}", ["null", "long"], default=None))
                ids[f"shared/{tag}{i}"] = client.register_schema("shared-value", schema)
                ids[f"own/{tag}{i}"] = client.register_schema(f"{tag}-value", schema)

        threads = [threading.Thread(target=register, args=(s, t)) for s, t in ((one, "p"), (two, "q"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(ids) == 32
        a, b = _client(one), _client(two)
        shared = [a.get_version("shared-value", v).schema_id for v in a.get_versions("shared-value")]
        assert len(shared) == 16 and shared == [b.get_version("shared-value", v).schema_id
                                                  for v in b.get_versions("shared-value")]
        assert sorted(shared) == sorted(ids[k] for k in ids if k.startswith("shared/"))
        for key, schema_id in ids.items():  # the same schema got the same id everywhere
            assert a.get_schema(schema_id).schema_str == b.get_schema(schema_id).schema_str, key
        a.set_compatibility("p-value", "FULL")
    finally:
        one.stop()
        two.stop()
    again = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([bootstrap], {}), topic, "BACKWARD")
    again.start()
    try:
        client = _client(again)
        assert client.get_versions("shared-value") == list(range(1, 17))
        assert client.get_compatibility("p-value") == "FULL"
        for schema_id in ids.values():
            assert client.get_schema(schema_id).schema_str
    finally:
        again.stop()


def test_protobuf_and_json_schemas_are_served_with_references_and_their_own_rules(
        registry: SchemaRegistryService) -> None:
    client = _client(registry)
    with urllib.request.urlopen(f"{registry.url}/schemas/types") as answer:
        assert sorted(json.loads(answer.read())) == ["AVRO", "JSON", "PROTOBUF"]

    # Protobuf: an import through a reference, .proto text and its serialized descriptor are one schema.
    money = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    money_id = client.register_schema("money.proto", Schema(money, "PROTOBUF"))
    ref = SchemaReference("common/money.proto", "money.proto", 1)
    order = ('syntax = "proto3";\npackage shop;\nimport "common/money.proto";\n'
             'message Order { int64 id = 1; common.Money total = 2; }\n')
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("orders-value", Schema(order, "PROTOBUF"))
    assert info.value.error_code == 42201 and "common/money.proto" in info.value.error_message
    order_id = client.register_schema("orders-value", Schema(order, "PROTOBUF", [ref]))
    assert order_id != money_id
    serialized = client.get_schema(order_id, fmt="serialized")
    assert serialized.schema_str != order and serialized.schema_type == "PROTOBUF"
    again = client.register_schema("orders-value", Schema(serialized.schema_str, "PROTOBUF", [ref]))
    assert again == order_id and client.get_versions("orders-value") == [1]
    added = order.replace("common.Money total = 2;", "common.Money total = 2; string note = 3;")
    assert client.register_schema("orders-value", Schema(added, "PROTOBUF", [ref])) != order_id
    retyped = added.replace("string note = 3;", "int64 note = 3;")
    refused = _refused(client, "orders-value", Schema(retyped, "PROTOBUF", [ref]))
    assert "FIELD_SCALAR_KIND_CHANGED" in refused.error_message

    # JSON Schema: a $ref to another subject; a closed object may gain an optional property, not lose one.
    address = {"type": "object", "properties": {"city": {"type": "string"}}}
    client.register_schema("address.json", Schema(json.dumps(address), "JSON"))
    jref = SchemaReference("address.json", "address.json", 1)
    user = {"type": "object", "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}}}
    user_id = client.register_schema("users-value", Schema(json.dumps(user), "JSON", [jref]))
    assert client.get_schema(user_id).schema_type == "JSON"
    user["properties"]["age"] = {"type": "integer"}
    client.register_schema("users-value", Schema(json.dumps(user), "JSON", [jref]))
    del user["properties"]["name"]
    refused = _refused(client, "users-value", Schema(json.dumps(user), "JSON", [jref]))
    assert "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in refused.error_message
    # A schema of another type may not follow them.
    refused = _refused(client, "users-value", _record("User", _field("name", "string")))
    assert "JSON" in refused.error_message


def test_bare_protobuf_is_read_with_the_subjects_latest_schema(registry: SchemaRegistryService) -> None:
    from google.protobuf import message_factory

    from tabletopic.registry.protobuf_schema import parse
    from tabletopic_plugins.converters.protobuf_converter import ProtobufConverter

    client = _client(registry)
    v1 = 'syntax = "proto3";\npackage raw;\nmessage Ping { int64 id = 1; }\nmessage Other { string x = 1; }\n'
    v2 = v1.replace("int64 id = 1;", "int64 id = 1; string note = 2;")

    def body(proto: str, **fields: Any) -> bytes:
        cls = message_factory.GetMessageClass(parse(proto, []).pool().FindMessageTypeByName("raw.Ping"))
        return cls(**fields).SerializeToString()

    converter = ProtobufConverter()
    converter.configure({"schema.registry.url": registry.url, "use.latest.version": "true",
                         "latest.cache.ms": "0"}, is_key=False)
    missing = converter.convert("pings", [body(v1, id=1)])
    assert "subject pings-value has no schema" in missing.failures[0].reason

    first = client.register_schema("pings-value", Schema(v1, "PROTOBUF"))
    framed = b"\x00" + first.to_bytes(4, "big") + b"\x00" + body(v1, id=2)
    got = converter.convert("pings", [body(v1, id=1), framed, b""])  # b"": every field at its default
    # The bare bodies are read with the latest schema, which is the framed one's too: one batch, in order.
    assert not got.failures and len(got.parts) == 1
    assert got.parts[0].table.to_pylist() == [{"id": 1}, {"id": 2}, {"id": 0}]
    client.register_schema("pings-value", Schema(v2, "PROTOBUF"))
    later = converter.convert("pings", [body(v2, id=3, note="n")])
    assert later.parts[0].table.to_pylist() == [{"id": 3, "note": "n"}]

    named = ProtobufConverter()
    named.configure({"schema.registry.url": registry.url, "use.latest.version": "true",
                     "message.name": "raw.Nope"}, is_key=False)
    assert "raw.Nope" in named.convert("pings", [body(v1, id=1)]).failures[0].reason
