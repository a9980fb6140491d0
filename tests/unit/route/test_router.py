"""Routing as the Iceberg sink routes: static, route-regex, dynamic, and what dynamic routing leaves out."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tabletopic.config.connector import parse_connector
from tabletopic.config.worker import parse_worker
from tabletopic.convert.records import SinkRecords
from tabletopic.route.router import Router, RoutingSettings

WORKER = parse_worker({"bootstrap.servers": "127.0.0.1:9"})


def router(**props: str) -> Router:
    return Router(RoutingSettings.of(parse_connector({"name": "r", "topics": "t", "iceberg.catalog.type": "hadoop",
                                                      "iceberg.catalog.warehouse": "file:///tmp/w", **props}, WORKER)))


def records(**columns: list) -> SinkRecords:
    value = pa.table(columns)
    n = value.num_rows
    return SinkRecords("t", 0, value, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64),
                       np.arange(10, 10 + n, dtype=np.int64))


DYNAMIC = {"iceberg.tables.dynamic-enabled": "true", "iceberg.tables.route-field": "db"}


def test_static_routing_sends_every_record_to_every_table() -> None:
    routed = router(**{"iceberg.tables": "a.x,a.y"}).route(records(id=[1, 2]))
    assert sorted(routed.by_table) == ["a.x", "a.y"] and len(routed.by_table["a.y"]) == 2


def test_route_regex_is_a_whole_match_and_a_record_matching_none_goes_nowhere() -> None:
    routed = router(**{"iceberg.tables": "a.x,a.y", "iceberg.tables.route-field": "kind",
                       "iceberg.table.a.x.route-regex": "ord.*", "iceberg.table.a.y.route-regex": "pay"}).route(
        records(kind=["order", "payment", "pay", None]))
    assert list(routed.by_table["a.x"].rows) == [10]
    assert list(routed.by_table["a.y"].rows) == [12]  # "payment" is no whole match of "pay"
    assert not routed.failures and not routed.unrouted


def test_dynamic_routing_lower_cases_the_value_into_a_table_name() -> None:
    routed = router(**DYNAMIC).route(records(db=["Sales.Orders", "sales.orders", "hr.people"]))
    assert {t: list(r.rows) for t, r in routed.by_table.items()} == {"sales.orders": [10, 11], "hr.people": [12]}


def test_a_null_or_absent_route_value_is_left_out_as_the_java_sink_does() -> None:
    routed = router(**DYNAMIC).route(records(db=["a.b", None]))
    assert list(routed.by_table["a.b"].rows) == [10] and routed.unrouted == [11] and not routed.failures
    absent = router(**DYNAMIC).route(records(other=[1, 2]))
    assert absent.unrouted == [10, 11] and not absent.by_table and not absent.failures


def test_with_unroutable_fail_they_are_failed_records_for_errors_tolerance() -> None:
    failing = router(**DYNAMIC, **{"tabletopic.routing.unroutable": "fail"})
    routed = failing.route(records(db=["a.b", None]))
    assert [f.index for f in routed.failures] == [11] and "is null" in routed.failures[0].reason
    assert not routed.unrouted
    assert [f.index for f in failing.route(records(other=[1])).failures] == [10]


def test_a_tombstone_without_a_route_is_dropped_either_way() -> None:
    for unroutable in ("skip", "fail"):
        routed = router(**DYNAMIC, **{"tabletopic.routing.unroutable": unroutable}).route(
            records(db=[None]), tombstones=True)
        assert not routed.by_table and not routed.failures and not routed.unrouted


def test_a_value_that_names_no_table_fails_whatever_the_setting() -> None:
    routed = router(**DYNAMIC).route(records(db=["", "ns."]))
    assert [f.index for f in routed.failures] == [10, 11]
