"""SetSchemaMetadata$Key and $Value: the rows never change; a schemaless value fails, as in Connect."""

from __future__ import annotations

import pytest

from tabletopic.config.connector_keys import TRANSFORM_GROUP
from tabletopic.config.plugin_names import available_plugins
from tests.unit.plugins.transforms.smt import batch, failed, run, tombstones, values

SET = "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"


def test_the_settings() -> None:
    plugin = available_plugins(TRANSFORM_GROUP)[SET].load()
    with pytest.raises(ValueError, match="Neither schema name nor version configured"):
        plugin().configure({})
    with pytest.raises(ValueError, match="Not a number of type INT"):
        plugin().configure({"schema.version": "x"})


def test_rows_stay_and_a_schemaless_value_fails() -> None:
    assert values(run(SET, {"schema.name": "foo", "schema.version": "42"}, batch([{"a": 1}]))) == [{"a": 1}]
    assert failed(run(SET, {"schema.name": "foo"}, batch([{"a": 1}], schemaless=True))) == {
        0: "transform 't': Schema required for [updating schema metadata]"}
    assert values(run(SET, {"schema.name": "foo"}, tombstones(1))) == [None]
