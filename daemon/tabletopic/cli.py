"""The ``tabletopic`` command, shaped like Kafka's ``connect-standalone`` and ``connect-distributed``.

    tabletopic standalone WORKER.properties [CONNECTOR.properties ...]
    tabletopic distributed WORKER.properties
    tabletopic validate CONNECTOR [--worker WORKER.properties]
    tabletopic maintain CONNECTOR [--worker WORKER.properties] [--table T] [--dry-run]
    tabletopic offsets CONNECTOR [--table T] [--by-table] [--set TOPIC:PARTITION=OFFSET ...] [--reset] [--url URL]
    tabletopic status [CONNECTOR] [--worker WORKER.properties] [--table T] [--url URL]
    tabletopic verify CONNECTOR [--worker WORKER.properties] [--table T]
    tabletopic demo
    tabletopic keys
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tabletopic import __version__
from tabletopic.config.connector import ConnectorConfig, parse_connector
from tabletopic.config.definition import ConfigError, Problem
from tabletopic.config.files import load_config_file
from tabletopic.config.key_reference import key_reference
from tabletopic.config.worker import WorkerConfig, parse_worker
from tabletopic.core import exit_codes


def _load(worker_path: str | None, connector_paths: Sequence[str]) -> tuple[WorkerConfig, list[ConnectorConfig]]:
    worker = parse_worker(load_config_file(worker_path) if worker_path else {})
    connectors = [parse_connector(load_config_file(p), worker) for p in connector_paths]
    names = [c.name for c in connectors]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ConfigError([Problem("name", n, "two connectors have this name") for n in sorted(duplicates)])
    return worker, connectors


def _logging(worker: WorkerConfig) -> None:
    from tabletopic.observe.logging_setup import configure_logging
    configure_logging(worker.log_level, worker.log_format, worker.scrubber)
    import structlog
    # A connector's warnings are logged when it starts (connectors/herder.py), from a file or over REST.
    for warning in worker.warnings:
        structlog.get_logger("tabletopic.config").warning(warning)


def _hold_stop_signals() -> list[signal.Signals]:
    """Keep a SIGTERM or SIGINT that comes while the modules load and the daemon is built (seconds, with
    Spark's): by default it would kill the process, without a word in its log. The daemon handles what
    was kept once its own handlers are in (:meth:`Daemon.install_signal_handlers`). A second one exits at
    once, as a second signal to a running daemon does."""
    pending: list[signal.Signals] = []

    def hold(signum: int, _frame: object) -> None:
        if pending:
            os._exit(exit_codes.FAILED)
        pending.append(signal.Signals(signum))

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, hold)
    return pending


def _run(daemon_factory: Callable[[], Any], pending: list[signal.Signals]) -> int:
    from tabletopic.consume.faust_aiokafka import library_versions, missing_internals
    missing = missing_internals()
    if missing:
        # A Faust or aiokafka release that renamed what the consumer relies on: no restart can help.
        print(f"tabletopic: {library_versions()} lack {', '.join(missing)}, which this build uses; install "
              "the versions pinned in constraints.txt", file=sys.stderr)
        return exit_codes.CONFIG

    async def main() -> int:
        daemon = daemon_factory()
        # The objects of start-up (modules, Faust's app, py4j) live as long as the process: frozen, no
        # collection of the old generation scans them again.
        gc.freeze()
        daemon.install_signal_handlers(pending)
        return int(await daemon.run())

    tune_collector()
    return asyncio.run(main())


def tune_collector() -> None:
    """Collect the young generation every 50,000 allocations of tracked objects, not 700.

    aiokafka's decoder makes a tracked object of every fetched record, and Arrow's and the converters'
    batches add their own, so at the interpreter's default a 10,000-record fetch set off a dozen
    collections, and those promoted into the older generations scanned every long-lived object again.
    Measured on aiokafka's C reader: 1.96 µs a record decoded at the default, 0.16 µs at this
    threshold (docs/performance.md). It is the process's, so only the command sets it; a daemon built
    in another program (a test, a bench) leaves that program's collector alone.
    """
    gc.set_threshold(50_000, 20, 100)


def cmd_standalone(args: argparse.Namespace) -> int:
    pending = _hold_stop_signals()
    try:
        worker, connectors = _load(args.worker, args.connectors)
    except ConfigError as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    _logging(worker)
    from tabletopic.app.standalone import Standalone
    return _run(lambda: Standalone(worker, connectors), pending)


def cmd_distributed(args: argparse.Namespace) -> int:
    pending = _hold_stop_signals()
    from tabletopic.config.worker import distributed_problems
    try:
        worker = parse_worker(load_config_file(args.worker))
        problems = distributed_problems(worker)
        if problems:
            raise ConfigError(problems, "worker configuration")
    except ConfigError as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    _logging(worker)
    from tabletopic.distributed.worker import distributed_daemon
    return _run(lambda: distributed_daemon(worker), pending)


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        worker = parse_worker(load_config_file(args.worker) if args.worker else {})
        config = parse_connector(load_config_file(args.connector), worker)
    except ConfigError as exc:
        print(str(exc))
        return 1
    for warning in config.warnings:
        print(f"warning: {warning}")
    topics = config.topics or (config.topics_regex.pattern if config.topics_regex else "")
    print(f"connector {config.name!r} is valid: topics={topics} "
          f"tables={config.tables or _dynamic_tables(config)}")
    print(f"iceberg.catalog={config.catalog_name}: {config.catalog.describe()}")
    return 0


def _dynamic_tables(config: ConnectorConfig) -> str:
    if config.table_topic_namespace is not None:
        return f"one per topic in namespace {config.table_topic_namespace} (Table Topic mode)"
    return f"dynamic via {config.route_field}"


def cmd_maintain(args: argparse.Namespace) -> int:
    try:
        worker = parse_worker(load_config_file(args.worker) if args.worker else {})
        config = parse_connector(load_config_file(args.connector), worker)
    except ConfigError as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    from tabletopic.maintain.run_once import maintain_once
    try:
        return maintain_once(worker, config, args.table, args.dry_run)
    except ValueError as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG


def _rest(args: argparse.Namespace) -> Any:
    from tabletopic.ops.rest_client import RestClient
    return RestClient(args.url, args.user, args.cacert)


def _offset_changes(args: argparse.Namespace) -> dict[tuple[str, int], int | None] | None:
    """--set TOPIC:PARTITION=OFFSET (OFFSET may be 'null' to forget one) and --reset, as the REST API's."""
    changes: dict[tuple[str, int], int | None] = {}
    for item in args.set or []:
        where, _, offset = item.rpartition("=")
        topic, _, partition = where.rpartition(":")
        if not topic or not partition.isdigit() or not (offset.isdigit() or offset == "null"):
            raise ValueError(f"--set {item!r}: write TOPIC:PARTITION=OFFSET, or TOPIC:PARTITION=null")
        changes[(topic, int(partition))] = None if offset == "null" else int(offset)
    return changes


def cmd_offsets(args: argparse.Namespace) -> int:
    import json

    from tabletopic.ops.rest_client import RestError
    try:
        changes = _offset_changes(args)
    except ValueError as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    if args.url:
        client = _rest(args)
        try:
            if args.reset:
                print(client.call("DELETE", f"/connectors/{args.connector}/offsets")["message"])
            elif changes:
                body = {"offsets": [{"partition": {"kafka_topic": t, "kafka_partition": p},
                                     "offset": None if o is None else {"kafka_offset": o}}
                                    for (t, p), o in sorted(changes.items())]}
                print(client.call("PATCH", f"/connectors/{args.connector}/offsets", body)["message"])
            else:
                print(json.dumps(client.call("GET", f"/connectors/{args.connector}/offsets"), indent=2))
        except RestError as exc:
            print(f"tabletopic: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        worker = parse_worker(load_config_file(args.worker) if args.worker else {})
        config = parse_connector(load_config_file(args.connector), worker)
    except (ConfigError, ValueError) as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    if args.reset or changes:
        from tabletopic.connectors.offsets import OffsetsChangeRefused, change_offsets_locally
        from tabletopic.kafka.clients import KafkaClients
        clients = config.clients_of(KafkaClients(worker.bootstrap_servers, worker.raw))
        try:
            positions = change_offsets_locally(worker.spark_conf, clients, config, None if args.reset else changes)
        except OffsetsChangeRefused as exc:
            print(f"tabletopic: {exc}", file=sys.stderr)
            return 1
        print(json.dumps({"offsets": [{"partition": {"kafka_topic": t, "kafka_partition": p},
                                       "offset": {"kafka_offset": o}} for (t, p), o in sorted(positions.items())]},
                         indent=2))
        return 0
    from tabletopic.maintain.run_once import tables_of
    from tabletopic.ops.table_offsets import RecordingTables, connect_document, read_table_offsets
    try:
        by_table = read_table_offsets(RecordingTables.of(config), tables_of(config, args.table))
    except (ConfigError, ValueError) as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG
    if args.by_table:
        for table, recorded in by_table.items():
            offsets = " ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(recorded.offsets.items()))
            print(f"{table} (from the {recorded.source}, coordinator epoch {recorded.epoch}): {offsets or '-'}")
    else:
        print(json.dumps(connect_document(by_table), indent=2))
    return 0


def _connector_tables(args: argparse.Namespace) -> tuple[WorkerConfig, ConnectorConfig, list[str]] | int:
    """The worker and connector files an operator's command names, and the tables it covers (``--table`` or
    all of the connector's); the exit code to return when they do not parse."""
    from tabletopic.maintain.run_once import tables_of
    try:
        worker = parse_worker(load_config_file(args.worker) if args.worker else {})
        config = parse_connector(load_config_file(args.connector), worker)
        return worker, config, tables_of(config, args.table)
    except (ConfigError, ValueError) as exc:
        print(f"tabletopic: {exc}", file=sys.stderr)
        return exit_codes.CONFIG


def cmd_status(args: argparse.Namespace) -> int:
    if args.url:
        from tabletopic.ops.rest_client import RestError
        from tabletopic.ops.rest_client import status_lines as rest_status_lines
        try:
            for line in rest_status_lines(_rest(args), args.connector):
                print(line)
        except RestError as exc:
            print(f"tabletopic: {exc}", file=sys.stderr)
            return 1
        return 0
    if not args.connector:
        print("tabletopic: name the connector's file, or give --url of a running daemon", file=sys.stderr)
        return exit_codes.CONFIG
    from tabletopic.kafka.clients import KafkaClients
    from tabletopic.ops.connector_status import status_lines
    from tabletopic.ops.table_offsets import RecordingTables
    loaded = _connector_tables(args)
    if isinstance(loaded, int):
        return loaded
    worker, config, tables = loaded
    clients = config.clients_of(KafkaClients(worker.bootstrap_servers, worker.raw))
    for line in status_lines(RecordingTables.of(config), clients, tables):
        print(line)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when every file the tables' snapshots name is there at its size, 1 when one is not."""
    from tabletopic.ops.table_integrity import check_table
    from tabletopic.write.pyiceberg_catalog import CatalogNotSupported, open_table
    loaded = _connector_tables(args)
    if isinstance(loaded, int):
        return loaded
    _, config, tables = loaded
    intact = True
    for name in tables:
        try:
            report = check_table(open_table(config, name), name)
        except CatalogNotSupported as exc:
            print(f"tabletopic: {exc}", file=sys.stderr)
            return exit_codes.CONFIG
        except Exception as exc:  # the table cannot be opened: say which, and go on with the others
            print(f"table {name}: cannot be read: {exc}")
            intact = False
            continue
        intact &= report.intact
        for line in report.describe():
            print(line)
    return 0 if intact else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from tabletopic.demo.run_demo import run_demo
    return run_demo(records=args.records, intervals=args.intervals, keep=args.keep, lake=args.lake)


def cmd_keys(_: argparse.Namespace) -> int:
    print(key_reference())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tabletopic", description="Kafka topics to Apache Iceberg tables, "
                                     "exactly once, with Kafka Connect's Iceberg sink configuration.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("standalone", help="run connectors, like connect-standalone")
    p.add_argument("worker", help="worker .properties (or .json)")
    p.add_argument("connectors", nargs="*",
                   help="connector .properties or Connect REST JSON (none: add them over REST)")
    p.set_defaults(func=cmd_standalone)
    p = sub.add_parser("distributed", help="join a cluster of workers sharing connectors, like connect-distributed")
    p.add_argument("worker", help="worker .properties with group.id, config.storage.topic and status.storage.topic")
    p.set_defaults(func=cmd_distributed)
    p = sub.add_parser("validate", help="check a connector configuration and list every problem")
    p.add_argument("connector")
    p.add_argument("--worker", help="worker file, for converter defaults")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("maintain", help="compact, expire snapshots, remove orphans and rewrite manifests once")
    p.add_argument("connector", help="the connector's file: its catalog and tables")
    p.add_argument("--worker", help="worker file, for spark.* settings")
    p.add_argument("--table", help="only this table (needed when the connector routes dynamically)")
    p.add_argument("--dry-run", action="store_true", help="print what would be done, reading metadata only")
    p.set_defaults(func=cmd_maintain)

    def rest_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--url", help="a running daemon's REST API, e.g. http://127.0.0.1:8083: ask it instead")
        p.add_argument("--user", help="USER:PASSWORD for a REST API with Basic authentication")
        p.add_argument("--cacert", help="CA certificates (PEM) for a REST API on https")

    p = sub.add_parser("offsets", help="the offsets the connector's tables hold (Kafka Connect's JSON shape); "
                       "--set and --reset change them, with the connector stopped")
    p.add_argument("connector", help="the connector's file, or with --url its name")
    p.add_argument("--worker", help="worker file: Kafka and Spark settings, to change offsets without --url")
    p.add_argument("--table", help="only this table (needed when the connector routes dynamically)")
    p.add_argument("--by-table", action="store_true", help="each table's offsets, and where they were found")
    p.add_argument("--set", action="append", metavar="TOPIC:PARTITION=OFFSET",
                   help="set one partition's offset (null forgets it); repeatable")
    p.add_argument("--reset", action="store_true", help="forget every offset (DELETE /connectors/{c}/offsets)")
    rest_options(p)
    p.set_defaults(func=cmd_offsets)
    p = sub.add_parser("status", help="offsets in the tables beside the group's, lag, last commit, freshness; "
                       "with --url, the daemon's connectors, tasks and states")
    p.add_argument("connector", nargs="?", help="the connector's file, or with --url its name (none: all)")
    p.add_argument("--worker", help="worker file: bootstrap.servers and client security")
    p.add_argument("--table", help="only this table (needed when the connector routes dynamically)")
    rest_options(p)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("verify", help="check that every file the tables' current snapshots name exists, at "
                       "its recorded size (no JVM); exit 1 naming each missing one")
    p.add_argument("connector", help="the connector's file: its catalog and tables")
    p.add_argument("--worker", help="worker file")
    p.add_argument("--table", help="only this table (needed when the connector routes dynamically)")
    p.set_defaults(func=cmd_verify)
    p = sub.add_parser("demo", help="bundled broker + sample clickstream + local warehouse, then query")
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--intervals", type=int, default=3, help="commit intervals to run")
    p.add_argument("--keep", action="store_true", help="keep the demo warehouse directory")
    p.add_argument("--lake", nargs="?", const="rest", choices=("rest", "hive"),
                   help="rest: write to S3 behind an Iceberg REST catalog (SeaweedFS on loopback); hive: to local "
                        "files behind a Hive Metastore (Hive 2.3 from the pyspark wheel, on Derby); instead of a "
                        "hadoop catalog on local files")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("keys", help="print the configuration key reference (Markdown)")
    p.set_defaults(func=cmd_keys)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
