"""Every key of a connector configuration: its name, type, default and documentation, in one table.

A connector file written for ``org.apache.iceberg.connect.IcebergSinkConnector`` works as it is; keys
that only tabletopic has live under ``tabletopic.``.  The key reference (docs/configuration.md) is
generated from this table.
"""

from __future__ import annotations

from tabletopic.config.definition import Key, KeyType
from tabletopic.config.input_limits import DEFAULT_MAX_VALUE_BYTES
from tabletopic.config.partition_by import parse_partition_by

CONNECTOR_CLASSES = (
    "org.apache.iceberg.connect.IcebergSinkConnector",
    "io.tabular.iceberg.connect.IcebergSinkConnector",
    "tabletopic.IcebergSinkConnector",
    "IcebergSinkConnector",  # Connect's simple name and alias of whichever is installed
    "IcebergSink",
)
CATALOG_PREFIX = "iceberg.catalog."
HADOOP_PREFIX = "iceberg.hadoop."
TABLE_PREFIX = "iceberg.table."
AUTO_CREATE_PREFIX = "iceberg.tables.auto-create-props."
WRITE_PREFIX = "iceberg.tables.write-props."
KAFKA_PREFIX = "iceberg.kafka."
CONSUMER_OVERRIDE_PREFIX = "consumer.override."
PRODUCER_OVERRIDE_PREFIX = "producer.override."
ADMIN_OVERRIDE_PREFIX = "admin.override."
HEADER_CONVERTER_PREFIX = "header.converter."
# Keys Connect and the Iceberg sink's connector set on their own, not the user.
FRAMEWORK_KEYS = ("task.id", "iceberg.coordinator.transactional.suffix", "task.class", "tasks.max.enforce")
TABLE_KEYS = ("route-regex", "id-columns", "partition-by", "commit-branch", "upsert-mode-enabled", "cdc-field",
              "external-compaction")
CONVERTER_GROUP = "tabletopic.converters"
# Converters that read schema ids: they need schema.registry.url, or the worker's built-in registry.
REGISTRY_CONVERTERS = {"io.confluent.connect.avro.AvroConverter", "io.confluent.connect.protobuf.ProtobufConverter",
                       "io.confluent.connect.json.JsonSchemaConverter"}
TRANSFORM_GROUP = "tabletopic.transforms"
PREDICATE_GROUP = "tabletopic.predicates"


def partition_by_problem(value: str) -> str | None:
    try:
        parse_partition_by(value)
    except ValueError as exc:
        return str(exc)
    return None


def _keys(*keys: Key) -> dict[str, Key]:
    return {k.name: k for k in keys}


CONNECTOR_KEYS: dict[str, Key] = _keys(
    Key("name", KeyType.STRING, None, "Unique connector name; also names the consumer group (connect-<name>).",
        required=True),
    Key("connector.class", KeyType.STRING, CONNECTOR_CLASSES[0],
        "Accepted for compatibility; must name an Iceberg sink connector class.", allowed=CONNECTOR_CLASSES),
    Key("tasks.max", KeyType.INT, 1, "Accepted for compatibility. Parallelism comes from partitions and daemons.",
        minimum=1),
    Key("topics", KeyType.LIST, None, "Comma-separated topics to consume. Set this or topics.regex."),
    Key("topics.regex", KeyType.REGEX, None, "Regular expression of topics to consume. Set this or topics."),
    Key("key.converter", KeyType.STRING, None, "Converter class for record keys; defaults to the worker's."),
    Key("value.converter", KeyType.STRING, None, "Converter class for record values; defaults to the worker's."),
    Key("transforms", KeyType.LIST, [], "Comma-separated aliases of single message transforms, applied in order; "
        "each is configured by transforms.<alias>.type (a class name, simple name or alias, as in Connect) and "
        "transforms.<alias>.*, and applies only to the records its transforms.<alias>.predicate matches "
        "(none: to every record; transforms.<alias>.negate=true: to those it does not match). docs/transforms.md "
        "lists them."),
    Key("predicates", KeyType.LIST, [], "Comma-separated aliases of predicates for transforms.<alias>.predicate; "
        "each is configured by predicates.<alias>.type and predicates.<alias>.*."),
    Key("errors.tolerance", KeyType.STRING, "none",
        "none: a record that cannot be converted, transformed or routed stops the connector before its offset "
        "is committed. all: such records are skipped (and sent to the dead-letter topic if one is set).",
        allowed=("none", "all")),
    Key("errors.deadletterqueue.topic.name", KeyType.STRING, None,
        "Topic that receives records failed under errors.tolerance=all, unchanged."),
    Key("errors.deadletterqueue.context.headers.enable", KeyType.BOOLEAN, False,
        "Add __connect.errors.* headers naming the failure to dead-letter records."),
    Key("errors.log.enable", KeyType.BOOLEAN, False, "Log each failed record's topic, partition and offset."),
    Key("errors.log.include.messages", KeyType.BOOLEAN, False, "Include the failed record's key and value in the log."),
    Key("errors.deadletterqueue.topic.replication.factor", KeyType.INT, 3,
        "Replication factor of the dead-letter topic, which is created (one partition, as Connect does) when it "
        "is missing; -1 takes the broker's default.", minimum=-1),
    Key("errors.retry.timeout", KeyType.LONG, 0,
        "How long an outage of a system a record's conversion needs (the Schema Registry), or of the catalog or "
        "storage, is retried before the connector fails; -1 without end. 0, Connect's default: bounded by "
        "tabletopic.catalog.max-consecutive-failures alone. Unlike Connect, a record is never skipped or "
        "dead-lettered for an outage: when the time is up the connector fails, and its records are read again "
        "when it restarts.", minimum=-1),
    Key("errors.retry.delay.max.ms", KeyType.LONG, 60_000,
        "The longest wait between two tries of a system that is out (the backoff doubles from 1 s up to it).",
        minimum=0),
    Key("header.converter", KeyType.STRING, "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "How Connect reads header values for transforms. Here transforms and predicates act on whole headers or "
        "on their names (HasHeaderKey, DropHeaders, InsertHeader, HeaderFrom), no table holds a header, and "
        "dead-lettered records keep their headers as they came, so any header converter makes the same tables."),
    Key("config.action.reload", KeyType.STRING, "restart",
        "What Connect does when a config provider says a value changed. The providers here (file, env, dir, as "
        "Connect's own) never say so, in Connect either: values are read when the connector starts, so "
        "restart and none behave alike.", allowed=("restart", "none")),
    Key("tabletopic.input.max-value-bytes", KeyType.LONG, DEFAULT_MAX_VALUE_BYTES,
        "A record whose key or value is larger than this fails (errors.tolerance: stopped, or skipped and "
        "dead-lettered) before any converter parses it. JSON values are also bounded in depth, by the "
        "converter's max.nesting.depth (value.converter.max.nesting.depth, default 1000, as Jackson bounds "
        "Connect's JsonConverter).", minimum=1024),
    Key("iceberg.tables", KeyType.LIST, None, "Comma-separated destination tables (namespace.table)."),
    Key("iceberg.tables.dynamic-enabled", KeyType.BOOLEAN, False,
        "Route each record to the table named by its iceberg.tables.route-field value."),
    Key("tabletopic.table-topic.enabled", KeyType.BOOLEAN, False,
        "Table Topic mode (as AutoMQ's automq.table.topic.enable): every topic that topics or topics.regex "
        "matches is written to its own table, named after the topic in tabletopic.table-topic.namespace "
        "(lower-cased; characters other than letters, digits and _ become _). Tables are created and "
        "evolved from the records; iceberg.table.<namespace>.<table>.* set each one's id columns and "
        "partitioning. Not with iceberg.tables or routing."),
    Key("tabletopic.table-topic.namespace", KeyType.STRING, "default",
        "Namespace of Table Topic mode's tables (as AutoMQ's automq.table.topic.namespace)."),
    Key("iceberg.tables.route-field", KeyType.STRING, None,
        "Record field used for routing: the table name (dynamic) or the value matched by "
        "iceberg.table.<t>.route-regex (static). Dots reach into structs."),
    Key("iceberg.tables.default-id-columns", KeyType.STRING, None,
        "Default identifier columns, comma-separated (upsert keys; set as the table's identifier fields)."),
    Key("iceberg.tables.default-partition-by", KeyType.STRING, None,
        "Default partition spec of auto-created tables, e.g. day(ts),bucket(id, 16).",
        validator=partition_by_problem),
    Key("iceberg.tables.default-commit-branch", KeyType.STRING, None, "Default branch to commit to (main if unset)."),
    Key("iceberg.tables.auto-create-enabled", KeyType.BOOLEAN, False,
        "Create missing tables (format v2) with the schema of the first records routed to them."),
    Key("iceberg.tables.evolve-schema-enabled", KeyType.BOOLEAN, False,
        "Add new record fields to the table schema and widen types in place."),
    Key("iceberg.tables.schema-force-optional", KeyType.BOOLEAN, False,
        "Make every column optional when creating or evolving tables."),
    Key("iceberg.tables.schema-case-insensitive", KeyType.BOOLEAN, False,
        "Match record fields to table columns ignoring case."),
    Key("tabletopic.routing.unroutable", KeyType.STRING, "skip",
        "A record dynamic routing cannot send to a table: its route field is null or absent, or it names a table "
        "that does not exist while auto-create is off. skip, as the Iceberg sink does: it is left out, counted "
        "in tabletopic_skipped_records_total and logged once per table name. fail: it fails as a bad record, and "
        "errors.tolerance decides (with all it goes to the dead-letter topic). A table that iceberg.tables names "
        "must exist (or be auto-created) either way.",
        allowed=("skip", "fail")),
    Key("tabletopic.values.strict", KeyType.BOOLEAN, False,
        "false: a value goes into a column of another type by the Iceberg sink's (Java) rules, which change "
        "some values: a fraction into an int or long column is cut, a number past the column's range wraps "
        "(a long) or stops at the range's end (a double), and a string other than true (in any case) into a "
        "boolean column is false. true: those records fail instead (errors.tolerance decides). docs/tables.md "
        "lists every conversion."),
    Key("iceberg.tables.upsert-mode-enabled", KeyType.BOOLEAN, False,
        "Upsert on the id columns: each record replaces the row with its key."),
    Key("iceberg.tables.cdc-field", KeyType.STRING, None,
        "Record field holding the change operation (I/U/D, or Debezium's c/r/u/d)."),
    Key("iceberg.control.topic", KeyType.STRING, "control-iceberg",
        "Control topic shared by the workers and the coordinator of this connector."),
    Key("iceberg.control.group-id-prefix", KeyType.STRING, "cg-control-",
        "Accepted for compatibility; members read the control topic without a consumer group."),
    Key("iceberg.control.commit.interval-ms", KeyType.INT, 300_000,
        "Time between commit rounds, from the start of one to the next: each round makes one snapshot per "
        "table that has new data.", minimum=1),
    Key("iceberg.control.commit.timeout-ms", KeyType.INT, 30_000,
        "How long the coordinator waits for every partition's answer; it then commits what arrived, and "
        "late answers wait for the next round. Also bounds one table commit.", minimum=1),
    Key("iceberg.control.commit.threads", KeyType.INT, 8,
        "Tables committed in parallel in a round. A commit mostly waits (on storage, the catalog, and 10 ms "
        "polls inside Iceberg), so more threads than cores pay off with many tables: at 1,000 tables on two "
        "cores 8 made a round 4 s shorter than 2, and 16 no shorter than 8. Each thread holds a catalog "
        "connection while it commits. Tables met for the first time are loaded or created, and schemas evolved, "
        "as many at once, on a pool of their own.",
        minimum=1),
    Key("iceberg.control.commit.max-consecutive-failures", KeyType.INT, None,
        "As the Iceberg sink's (its main branch): a table whose commit fails with a conflict (Iceberg's "
        "CommitFailedException, once Iceberg's own retries are spent) this many rounds in a row fails the "
        "connector. Unset, as in the released Iceberg sinks (1.10, 1.11), which have no such key: a conflicted "
        "commit is tried again the next round for as long as it takes. Other commit failures are not counted "
        "here: a refusal by Iceberg is tabletopic.commit.max-consecutive-refusals', and a catalog or storage "
        "outage is retried as long as it lasts.", minimum=1),
    Key("tabletopic.commit.max-consecutive-refusals", KeyType.INT, 3,
        "A table's commit that Iceberg refuses for the same cause this many rounds in a row (a ValidationException, "
        "an IllegalArgumentException such as a v3 table's \"Must use DVs\", ...) fails the connector, with that "
        "cause as its trace. A catalog or storage outage is not counted: it is retried as long as it lasts.",
        minimum=1),
    Key("tabletopic.commit.stall-intervals", KeyType.INT, 3,
        "/ready answers 503 (and tabletopic_commit_stalled_seconds rises) once no round has committed, or this "
        "worker's answer has had no verdict, for this many intervals plus the commit timeout.", minimum=1),
    Key("tabletopic.catalog.max-consecutive-failures", KeyType.INT, 10,
        "A catalog or storage failure while opening, creating or evolving a table, or a Schema Registry that "
        "does not answer, is retried with backoff "
        "(1 s doubling up to errors.retry.delay.max.ms); records are read again, never dead-lettered. After this "
        "many failures in a row (or errors.retry.timeout) the connector stops (exit 1) so that a supervisor "
        "restarts it.", minimum=1),
    Key("iceberg.catalog", KeyType.STRING, "iceberg", "Name of the Iceberg catalog (the Spark catalog name)."),
    Key("iceberg.connect.group-id", KeyType.STRING, None, "Consumer group of the source topics (connect-<name>)."),
    Key("iceberg.hadoop-conf-dir", KeyType.STRING, None,
        "A directory whose core-site.xml, hdfs-site.xml and hive-site.xml configure the catalog's Hadoop "
        "configuration, as in the Iceberg sink; iceberg.hadoop.* and iceberg.catalog.hadoop.* win over them."),
    Key("iceberg.coordinator.transactional.prefix", KeyType.STRING, None,
        "The prefix of the Iceberg sink's transactional ids, for ACLs. No producer here is transactional: "
        "nothing needs it, and no ACL on transactional ids is needed."),
    Key("iceberg.coordinator-executor-keep-alive-timeout-ms", KeyType.LONG, 120_000,
        "How long the Iceberg sink keeps idle commit threads. The committer's threads here live as long as the "
        "connector; nothing is kept past it.", minimum=0),
    Key("tabletopic.buffer.flush-bytes", KeyType.LONG, 64 * 1024 * 1024,
        "When a table's buffered records exceed this many bytes they are written to data files before the "
        "round (and committed in it), bounding the daemon's memory.", minimum=1024),
    Key("tabletopic.write.parallelism", KeyType.INT, 4,
        "Writes a round runs at once, each taking a share of the round's tables (by bytes). With a local "
        "master, a table's rows that fit one Spark task are written on the driver with no job; the rest of a "
        "share go in one job. So with many tables a round pays a job's fixed cost at most this many times, not "
        "once per table, and one write's hand-off of rows overlaps another's writing. The writes run on a pool of "
        "this many threads of their own.", minimum=1),
    Key("tabletopic.write.parquet-encoder", KeyType.STRING, "auto",
        "Who encodes data and equality-delete files. arrow: Arrow's C++ Parquet writer in the daemon's "
        "process, for files it can write as Iceberg's writer does (not encrypted, no uuid, fixed or time "
        "column, no Parquet setting beyond codec, level and sizes; data files of unpartitioned tables only); "
        "the JVM then places each file and reads its metrics from the footer. Iceberg's writer writes the "
        "rest. "
        "iceberg: Iceberg's writer in Spark's JVM for every table. auto: arrow with a local master, iceberg "
        "with a cluster's (its executors encode). A table's settings are read when the sink loads it.",
        allowed=("auto", "arrow", "iceberg")),
    Key("tabletopic.tables.max-cached", KeyType.INT, 2000,
        "Tables kept loaded (an Iceberg table object and its schema); past this many, the least recently "
        "used is dropped and loaded again from the catalog when next written. A connector that writes more "
        "tables than this in a round loads some of them every round: keep it above that.", minimum=1),
    Key("tabletopic.tables.idle-release-ms", KeyType.LONG, 600_000,
        "A loaded table that no round has written or committed for this long is released (its Iceberg table "
        "object, metadata and schema), as if dropped from tabletopic.tables.max-cached: a topic gone quiet "
        "costs no memory, and its next rows load the table again from the catalog. 0 keeps tables loaded "
        "until the bound drops them.", minimum=0),
    Key("tabletopic.buffer.max-bytes", KeyType.LONG, 512 * 1024 * 1024,
        "Arrow bytes of the rows held for all tables, buffered or being written, with the records fetched and "
        "not yet taken. Past it the connector pauses its partitions (no rebalance) and hands its rows to the "
        "coordinator for an early commit, and resumes once they are drained.", minimum=1024),
    Key("tabletopic.offsets.refresh-rounds", KeyType.INT, 10,
        "A table that gets no records still has its offsets committed (a snapshot without files) once this "
        "many rounds have passed, which bounds the replay after a restart.", minimum=1,
        aliases=("tabletopic.offsets.refresh-barriers",)),
    Key("tabletopic.maintenance.enabled", KeyType.STRING, "auto",
        "Table maintenance by the connector's coordinator (equality deletes turned into position deletes, "
        "compaction folding deletes, snapshot expiry, "
        "orphan removal, manifest rewrite): auto runs it when upsert or CDC is on, true always, false never.",
        allowed=("auto", "true", "false")),
    Key("tabletopic.maintenance.interval-ms", KeyType.LONG, 600_000,
        "How long after its last look ended each table is looked at again; a look reads only metadata, "
        "and acts when a trigger below is met.",
        minimum=0),
    Key("tabletopic.maintenance.equality-deletes.convert", KeyType.STRING, "commit",
        "Turn the table's equality deletes into position deletes: only the key columns of the data files they "
        "apply to are read, no data file is rewritten, and readers then skip deleted rows by position instead of "
        "comparing every row with every key. commit: each commit carries position deletes in place of its "
        "equality deletes, found in the table as it is then (while the data files whose key bounds may hold "
        "a deleted key hold at most equality-deletes.commit-max-rows rows, and not while maintenance compacts "
        "it), so readers never meet them; the next round converts what is left. look: at each look, after "
        "compaction; round: after every commit round too (each conversion reads the key columns of the data "
        "files the new deletes apply to, which in a table keyed across partitions is all of them); off: "
        "equality deletes stay until compaction folds them.",
        allowed=("commit", "look", "round", "off")),
    Key("tabletopic.maintenance.equality-deletes.commit-max-rows", KeyType.LONG, 5_000_000,
        "With equality-deletes.convert=commit, the most rows a commit reads to find the rows its deletes remove: "
        "it reads the key columns of the data files whose key bounds may hold a deleted key, on the commit's "
        "path, about 0.1 s per 200,000 rows on one core. When those files hold more, the commit carries "
        "equality deletes, which the next round converts.", minimum=0),
    Key("tabletopic.maintenance.compaction.min-input-files", KeyType.INT, 10,
        "Compact a partition once it holds this many small data files: files under a quarter of the target "
        "file size (write.target-file-size-bytes; 128 MiB at Iceberg's default of 512 MiB). Compaction "
        "rewrites those files only, so a file it wrote is not rewritten again at the next look once it has "
        "grown past the quarter (delete files still make a data file rewritten: see delete-files).", minimum=2),
    Key("tabletopic.maintenance.compaction.cheap-rewrite-bytes", KeyType.LONG, 64 * 1024 * 1024,
        "Compact every partition holding two or more small data files, whatever min-input-files says, while "
        "those files hold at most this many bytes in all: rewriting that little costs less than every reader "
        "opening each file. A small table then keeps one data file per partition after each look. Each such "
        "look spends a few seconds of Spark on the table however small it is (3 to 5 s for 10 MiB on two "
        "cores), so a connector with hundreds of small tables may want it lower. 0 turns it off.", minimum=0),
    Key("tabletopic.maintenance.compaction.delete-files", KeyType.INT, 8,
        "Compact once this many delete files apply to a data file: the rewrite applies them, and delete files "
        "that no longer apply to any data file are dropped. On a v3 table, where a data file carries one "
        "deletion vector at most, this many vectors in a partition compact every data file carrying one.",
        minimum=1),
    Key("tabletopic.maintenance.compaction.max-group-bytes", KeyType.LONG, 256 * 1024 * 1024,
        "Input bytes of one rewrite job. Each group commits on its own, so a shutdown loses at most one group's "
        "work and a round waits behind at most one group's tasks.", minimum=1024 * 1024),
    Key("tabletopic.maintenance.snapshots.older-than-ms", KeyType.LONG, 3_600_000,
        "Expire snapshots older than this (AutoMQ's expire.snapshot.older.than.hours). The newest snapshot "
        "holding each connector's offsets is always kept.", minimum=0),
    Key("tabletopic.maintenance.snapshots.retain-last", KeyType.INT, 10,
        "Snapshots always kept, however old (AutoMQ's expire.snapshot.retain.last).", minimum=1),
    Key("tabletopic.maintenance.snapshots.max-count", KeyType.INT, 200,
        "A commit to a table's main branch that leaves more snapshots than this expires the oldest once it has "
        "landed, however young, down to half of this (retain-last does not apply to it). Every snapshot adds "
        "about 1.2 KB to the metadata.json each commit rewrites, so this bounds it at any commit interval: "
        "200 keeps about 17 minutes of history at a 5 s interval, 100 s at 1 s. While the connector maintains "
        "the table, commits expire none: its steps read the snapshot they loaded. Applies in auto mode to append "
        "tables too; 0 turns it off.", minimum=0),
    Key("tabletopic.maintenance.orphans.older-than-ms", KeyType.LONG, 3 * 86_400_000,
        "Remove files that no snapshot references once they are this old. Written files that wait for their "
        "commit longer than half of this are never committed (their records are read again), so a file on its "
        "way to a snapshot is never removed.", minimum=3_600_000),
    Key("tabletopic.maintenance.orphans.interval-ms", KeyType.LONG, 86_400_000,
        "How often orphan removal lists the table's storage (the costliest step).", minimum=0),
    Key("tabletopic.maintenance.manifests.max-count", KeyType.INT, 50,
        "Rewrite the manifests once the current snapshot has more than this many.", minimum=2),
    Key(CATALOG_PREFIX + "*", KeyType.PREFIX, None,
        "Catalog properties passed to Iceberg (type or catalog-impl, warehouse, uri, io-impl, ...). At least one "
        "is required, as the Iceberg sink requires it."),
    Key(TABLE_PREFIX + "<table>.route-regex", KeyType.PREFIX, None,
        "Static routing: records whose route field matches go to <table>."),
    Key(TABLE_PREFIX + "<table>.id-columns", KeyType.PREFIX, None, "Identifier columns of <table>."),
    Key(TABLE_PREFIX + "<table>.partition-by", KeyType.PREFIX, None, "Partition spec of <table> when auto-created."),
    Key(TABLE_PREFIX + "<table>.commit-branch", KeyType.PREFIX, None, "Branch <table> is committed to."),
    Key(TABLE_PREFIX + "<table>.upsert-mode-enabled", KeyType.PREFIX, None,
        "Upsert mode for <table> alone (true or false); iceberg.tables.upsert-mode-enabled otherwise."),
    Key(TABLE_PREFIX + "<table>.cdc-field", KeyType.PREFIX, None,
        "The change operation's field for <table> alone; iceberg.tables.cdc-field otherwise. An empty value "
        "turns CDC off for <table>."),
    Key(TABLE_PREFIX + "<table>.external-compaction", KeyType.PREFIX, None,
        "true: another engine compacts <table> (Spark's rewrite_data_files on a schedule, S3 Tables, Glue's "
        "optimizer). Its commits then carry equality deletes and never position deletes, which would make that "
        "engine's rewrites fail; the connector does not compact it, removes the delete files the other engine's "
        "rewrites left dangling, and turns equality deletes into position deletes only at its looks "
        "(tabletopic.maintenance.interval-ms), unless equality-deletes.convert=off. Default false."),
    Key(AUTO_CREATE_PREFIX + "*", KeyType.PREFIX, None, "Table properties set on auto-created tables."),
    Key(WRITE_PREFIX + "*", KeyType.PREFIX, None, "Write properties (e.g. write.parquet.compression-codec)."),
    Key(HADOOP_PREFIX + "*", KeyType.PREFIX, None, "Hadoop configuration for the catalog (hadoop.* catalog props)."),
    Key(KAFKA_PREFIX + "*", KeyType.PREFIX, None,
        "As the Iceberg sink's: properties of the control topic's clients (its producer, reader and admin "
        "client), over the worker's. Used: bootstrap.servers, security.*, ssl.* and sasl.*. The source topics' "
        "consumer takes consumer.override.* instead."),
    Key(CONSUMER_OVERRIDE_PREFIX + "*", KeyType.PREFIX, None,
        "This connector's consumer properties; they win over the worker's. Used: security.*, ssl.*, sasl.*, "
        "fetch.min.bytes, fetch.max.wait.ms, max.poll.records, isolation.level, auto.offset.reset and "
        "metadata.max.age.ms; any other is told and ignored."),
    Key(PRODUCER_OVERRIDE_PREFIX + "*", KeyType.PREFIX, None,
        "This connector's producer properties (the dead-letter topic's producer); they win over the worker's. "
        "Used: security.*, ssl.* and sasl.*; any other is told and ignored."),
    Key(ADMIN_OVERRIDE_PREFIX + "*", KeyType.PREFIX, None,
        "This connector's admin client properties (creating the dead-letter topic, listing topics for "
        "topics.regex, reading its group's offsets); they win over the worker's. Used: security.*, ssl.* and "
        "sasl.*; any other is told and ignored."),
    Key(HEADER_CONVERTER_PREFIX + "*", KeyType.PREFIX, None, "The header converter's own settings (see "
        "header.converter)."),
)
