"""The short profile of bench/fuzz.py: every converter and envelope, against the built-in Schema Registry
on the test broker. Every input must end as a row, a failure with its reason, or a tombstone; a crash ends
the test run itself, which fails it as loudly."""

from __future__ import annotations

import importlib.util
import sys
import zlib
from collections.abc import Iterator
from types import ModuleType

import pytest

from tabletopic.demo.broker import EmbeddedBroker
from tabletopic.kafka.clients import KafkaClients
from tabletopic.registry.service import SchemaRegistryService
from tests.support import ROOT, unique

INPUTS_PER_CASE = 1200


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fuzz", ROOT / "bench" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


FUZZ = _harness()
CASE_NAMES = [c.name for c in FUZZ.cases(FUZZ.Registered("http://127.0.0.1:9", 1, 2, 3), None)]


@pytest.fixture(scope="module")
def registered(broker: EmbeddedBroker) -> Iterator[object]:
    service = SchemaRegistryService("http://127.0.0.1:0", KafkaClients([broker.bootstrap_servers], {}),
                                    unique("_fuzz_schemas"), "NONE")
    service.start()
    try:
        yield FUZZ.register_all(service.url)
    finally:
        service.stop()


@pytest.mark.parametrize("name", CASE_NAMES)
def test_every_input_ends_as_a_row_a_failure_or_a_tombstone(name: str, registered: object) -> None:
    case = next(c for c in FUZZ.cases(registered, FUZZ.message_class()) if c.name == name)
    tally = FUZZ.run_case(case, seed=zlib.crc32(name.encode()), inputs=INPUTS_PER_CASE)
    assert not tally.neither, tally.neither[:5]
    assert sum(tally.inputs.values()) == INPUTS_PER_CASE
    # The harness reached every kind of input, and valid ones did become rows; only ByteArray takes anything.
    assert {k.split(":")[0] for k in tally.inputs} == {"valid", "structured", "mutated"}
    assert tally.rows >= tally.inputs["valid"] * 0.9
    assert (tally.failures == 0) == (name == "bytearray")
