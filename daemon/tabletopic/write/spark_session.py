"""The one long-lived SparkSession per process, and the Iceberg catalogs registered on it.

A JVM can hold one SparkContext, so every connector in a process shares this
session; each connector registers its own Iceberg catalog under its
``iceberg.catalog`` name.  Spark loads catalogs lazily from its SQL conf, so a
catalog registered after start-up is picked up on first use.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import structlog
from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JError
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from tabletopic.core import scratch_files
from tabletopic.observe.logging_setup import relay_lines
from tabletopic.write.jvm_class_archive import ArchiveStart, ClassArchives, archive_key
from tabletopic.write.jvm_classpath import (
    JavaNotFoundError,
    JvmClasspath,
    build_classpath,
    default_cache_dir,
    find_java,
    pyspark_jars_dir,
)

log = structlog.get_logger(__name__)

# Defaults that suit a long-running sink on a small machine; `spark.*` worker keys override them.
DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.master": "local[2]",
    "spark.app.name": "tabletopic",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    # As Connect's own default heap (-Xmx1G). Given 2g, G1 grew the heap past what it needed: the
    # same 2M-record backlog ran as fast at 1g, and 1,000 tables' peak RSS fell from 2.1 to 1.7 GiB.
    "spark.driver.memory": "1g",
    # Each flush is its own small job; Spark's defaults plan for bigger ones.
    "spark.default.parallelism": "2",
    # Arrow batches go to the tasks as bytes and are decoded there, in parallel. Under this size
    # Spark instead turns every row into an object on the driver, copies it into the plan and ships
    # it inside the task: 3/4 of the JVM's time in a write, measured (docs/performance.md).
    "spark.sql.execution.arrow.localRelationThreshold": "0",
    "spark.sql.adaptive.enabled": "false",
    # Kept short so that a second daemon on the same host does not wait on a port.
    "spark.port.maxRetries": "64",
    "spark.ui.showConsoleProgress": "false",
    # Maintenance jobs run in their own pool: the sink's writes share the cores with them task by task
    # instead of queueing behind a whole rewrite.
    "spark.scheduler.mode": "FAIR",
}
# Options that make the JVM's class data sharing the user's own: then it is left to them.
_OWN_ARCHIVE_FLAGS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "AutoCreateSharedArchive")
# Creating a table in a hadoop catalog logs a missing version hint, with its stack trace.
_QUIET_JVM_LOGGERS = ("org.apache.iceberg.hadoop.HadoopTableOperations",)
# Each write ships its rows to the tasks as Arrow batches (localRelationThreshold=0), which Spark
# warns about once a task passes 1,000 KiB: that is the design, not a mistake.
# Hadoop's native library would only speed up codecs that Iceberg's Parquet writer does not use.
_EXPECTED_JVM_WARNINGS = ("contains a task of very large size", "Unable to load native-hadoop library")
# In local mode nothing needs to reach the driver from another host, so it binds to loopback.
LOCAL_MODE_CONF: dict[str, str] = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
# Spark asks what the host name resolves to before it reads spark.driver.host, and warns when that is
# loopback; in local mode loopback is what the driver binds to.
_EXPECTED_LOCAL_MODE_WARNINGS = ("resolves to a loopback address", "Set SPARK_LOCAL_IP if you need")


class JavaStatics:
    """A Java class's constructor and static members, each member looked up through py4j once: a
    class asks the JVM what a name is at every use, one more call per static call."""

    def __init__(self, cls: JavaClass) -> None:
        self._cls = cls
        self._members: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        member = self._members.get(name)
        if member is None:
            member = self._members[name] = getattr(self._cls, name)
        return member

    def __call__(self, *args: Any) -> Any:
        return self._cls(*args)


class SparkRuntime:
    """Owns the SparkSession; thread-safe for the py4j calls the sink makes."""

    def __init__(self, conf: Mapping[str, str] | None = None, classpath: JvmClasspath | None = None,
                 lake: bool = False, extra_jars: Sequence[Path] = (), class_archive: bool = True) -> None:
        """``lake`` puts the S3 and REST/Glue catalog jars on the classpath, fetching them if not cached;
        ``extra_jars`` adds more (a JDBC driver, say). ``class_archive``: the JVM maps the classes an
        earlier start archived (see :mod:`tabletopic.write.jvm_class_archive`)."""
        self._conf = {**DEFAULT_SPARK_CONF, **(conf or {})}
        self._lake = lake
        self._class_archive = class_archive
        self._extra_jars = [str(p) for p in extra_jars]
        if self.local:
            self._conf = {**LOCAL_MODE_CONF, **self._conf}
        self._classpath = classpath
        self._session: SparkSession | None = None
        self._lock = threading.Lock()
        self._catalogs: dict[str, dict[str, str]] = {}
        self._classes: dict[str, JavaStatics] = {}
        self._catalog_users: dict[str, int] = {}  # connectors using each name: its properties change only at 0

    @property
    def session(self) -> SparkSession:
        with self._lock:
            if self._session is None:
                self._session = self._start()
            return self._session

    @property
    def jvm(self) -> Any:
        return _jvm_of(self.session)

    @property
    def local(self) -> bool:
        """Whether Spark runs in this process's JVM (``local`` master): its driver is its executors."""
        return self._conf["spark.master"].startswith("local")

    @property
    def lake(self) -> bool:
        return self._lake

    @property
    def started(self) -> bool:
        return self._session is not None

    def require(self, lake: bool, extra_jars: Sequence[Path] = ()) -> str | None:
        """Ask for jars before the JVM starts. Once it runs it cannot take more: what it lacks, or None."""
        with self._lock:
            missing = [str(p) for p in extra_jars if str(p) not in self._extra_jars]
            if self._session is None:
                self._lake |= lake
                self._extra_jars += missing
                return None
            lacking = ["the S3, REST and Glue jars"] if lake and not self._lake else []
            return ", ".join(lacking + missing) or None

    def jvm_exit(self) -> int | None:
        """The driver JVM's exit code once it has died (the OOM killer, say); None while it runs or before it starts."""
        if self._session is None:
            return None
        proc = getattr(SparkContext._gateway, "proc", None)
        return None if proc is None else proc.poll()

    def ping(self) -> None:
        """A trivial call through the gateway; raises if the JVM does not answer. Takes no lock: it must
        answer while other threads use the session."""
        session = self._session
        if session is not None:
            _jvm_of(session).java.lang.System.nanoTime()

    def heap_bytes(self) -> dict[str, int] | None:
        """The driver JVM's heap: used, committed and max bytes; None before it starts."""
        session = self._session
        if session is None:
            return None
        try:
            runtime = _jvm_of(session).java.lang.Runtime.getRuntime()
            total, free = int(runtime.totalMemory()), int(runtime.freeMemory())
            return {"used": total - free, "committed": total, "max": int(runtime.maxMemory())}
        except Py4JError:  # the JVM is gone: a scrape shows no heap rather than failing
            return None

    def jvm_pid(self) -> int | None:
        proc = getattr(SparkContext._gateway, "proc", None)
        return None if proc is None else int(proc.pid)

    def _start(self) -> SparkSession:
        classpath = self._classpath or build_classpath(lake=self._lake)
        conf = dict(self._conf)
        if self.local and classpath.boot_jar is not None:
            # Hadoop's local file system with modes set by a system call: without Hadoop's native library
            # it starts a chmod process for every file and directory it makes (java/boot/.../LocalFiles.java).
            # Hadoop loads it by name before spark.jars are there: it goes on the driver's own classpath,
            # which in local mode is every executor's.
            conf.setdefault("spark.hadoop.fs.file.impl", "tabletopic.LocalFiles")
            conf["spark.driver.extraClassPath"] = os.pathsep.join(
                [str(classpath.boot_jar), *filter(None, [conf.get("spark.driver.extraClassPath")])])
        existing = conf.get("spark.jars")
        conf["spark.jars"] = ",".join([str(p) for p in classpath.jars] + self._extra_jars
                                      + ([existing] if existing else []))
        # A JVM this process already runs (a second runtime in one process) was started with its own.
        archive = self._archive_start(conf) if SparkContext._active_spark_context is None else ArchiveStart(())
        if archive.options:
            conf["spark.driver.extraJavaOptions"] = " ".join(
                filter(None, [conf.get("spark.driver.extraJavaOptions"), *archive.options]))
        spark_conf = SparkConf(loadDefaults=False)
        for key, value in conf.items():
            spark_conf.set(key, value)
        if SparkContext._active_spark_context is None:
            # The driver JVM gets a session of its own: a SIGTERM or Ctrl-C sent to our process group
            # must reach us first, so the final commit can still use the JVM. It exits when we do,
            # because pyspark's gateway server watches its stdin.
            # Its output (log4j text) is piped into our log, so that every line has the daemon's format.
            gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True, "stdout": subprocess.PIPE,
                                                               "stderr": subprocess.STDOUT})
            relay_lines(gateway.proc.stdout, "spark",
                        _EXPECTED_JVM_WARNINGS + (_EXPECTED_LOCAL_MODE_WARNINGS if self.local else ()))
            archive.launched(int(gateway.proc.pid))
            SparkContext(conf=spark_conf, gateway=gateway)
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel(conf.get("spark.log.level", "WARN"))
        log4j = _jvm_of(session).org.apache.logging.log4j  # each dotted part is a py4j call: resolved once
        configurator, error = log4j.core.config.Configurator, log4j.Level.ERROR
        for name in _QUIET_JVM_LOGGERS:  # warnings with a stack trace about nothing wrong
            configurator.setLevel(name, error)
        log.info("spark session started", master=conf["spark.master"], version=session.version,
                 class_archive="mapped" if archive.use else "written at exit" if archive.part else "none")
        return session

    def _archive_start(self, conf: Mapping[str, str]) -> ArchiveStart:
        options = conf.get("spark.driver.extraJavaOptions", "")
        if not self._class_archive or any(flag in options for flag in _OWN_ARCHIVE_FLAGS):
            return ArchiveStart(())
        try:
            java, _javac = find_java(need_javac=False)
        except JavaNotFoundError:
            return ArchiveStart(())  # spark-submit says what is missing, as it would without an archive
        # The driver's classpath: pyspark's jars, then the extra class path; spark.jars load later, but the
        # archive holds their classes too.
        classpath = [str(pyspark_jars_dir()), pyspark.__version__,
                     *filter(None, conf.get("spark.driver.extraClassPath", "").split(os.pathsep)),
                     *filter(None, conf.get("spark.jars", "").split(","))]
        return ClassArchives(default_cache_dir() / "class-archives", java).start(archive_key(java, classpath, options))

    def register_catalog(self, name: str, properties: Mapping[str, str]) -> None:
        """Register an Iceberg catalog named ``name`` for one more user (see :meth:`release_catalog`).

        Connectors in use that share a name must share its properties; once none uses it, a
        reconfigured connector may give it new ones.
        """
        props = dict(properties)
        with self._lock:
            known = self._catalogs.get(name)
            users = self._catalog_users.get(name, 0)
            if known is not None and known != props and users > 0:
                raise ValueError(
                    f"iceberg.catalog={name!r} is already registered with other iceberg.catalog.* properties; "
                    "connectors in one process that share a catalog name must share its properties"
                )
            stale = known is not None and known != props
            self._catalogs[name] = props
            self._catalog_users[name] = users + 1
        session = self.session
        if stale:
            for key in list(known or {}):
                session.conf.unset(f"spark.sql.catalog.{name}.{key}")
        session.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
        for key, value in props.items():
            session.conf.set(f"spark.sql.catalog.{name}.{key}", value)
        if stale:
            # Spark keeps each catalog it loaded; forget them all so this one is built from the new
            # properties (the others are built again from theirs on next use).
            session._jsparkSession.sessionState().catalogManager().reset()

    def release_catalog(self, name: str) -> None:
        with self._lock:
            self._catalog_users[name] = max(0, self._catalog_users.get(name, 0) - 1)

    def java_class(self, name: str) -> JavaStatics:
        """The Java class ``name`` (fully qualified), for static calls and constructors.

        py4j resolves ``jvm.org.apache.X`` one dotted part at a time, a call to the JVM each: five calls
        before the one that was meant, on paths that run once per table.
        """
        found = self._classes.get(name)
        if found is None:
            gateway = self.session.sparkContext._gateway
            assert gateway is not None  # the session has started, so its context has a gateway
            client = gateway._gateway_client
            found = self._classes[name] = JavaStatics(JavaClass(name, client))
        return found

    def activate(self) -> SparkSession:
        """Make our session the active one for the calling thread's JVM twin.

        py4j pins each Python thread to a JVM thread, and Spark reads its SQL conf
        (catalogs, time zone) from the thread's active session: a thread that never
        set one would see Spark's defaults instead of our catalogs.
        """
        session = self.session
        self.java_class("org.apache.spark.sql.SparkSession").setActiveSession(session._jsparkSession)
        return session

    def join_job_group(self, group: str, description: str, pool: str) -> None:
        """Run the calling thread's next Spark jobs in job ``group`` and fair-scheduler ``pool``, so that
        :meth:`cancel_job_group` can stop them from another thread."""
        context = self.activate().sparkContext
        context.setJobGroup(group, description, interruptOnCancel=True)
        context.setLocalProperty("spark.scheduler.pool", pool)

    def cancel_job_group(self, group: str) -> None:
        self.session.sparkContext.cancelJobGroup(group)

    def iceberg_catalog(self, name: str) -> Any:
        """The Java ``org.apache.iceberg.catalog.Catalog`` behind Spark catalog ``name``."""
        manager = self.activate()._jsparkSession.sessionState().catalogManager()
        return manager.catalog(name).icebergCatalog()

    def dataframe_from_arrow(self, table: pa.Table) -> DataFrame:
        """Hand an Arrow table to the JVM without going through pandas.

        This is the route pyspark itself takes for Arrow-enabled ``createDataFrame``:
        an Arrow IPC stream in a temp file, one record batch per Spark partition.
        """
        session = self.activate()
        if table.num_rows and table.column(0).num_chunks > _MAX_TASKS:
            # Each chunk would become a Spark task and at least one file: merge the small
            # chunks that buffering leaves behind (one per fetch) before splitting evenly.
            table = table.combine_chunks()
        with arrow_file(table, _batch_rows(table)) as (path, schema):
            utils = self.java_class("org.apache.spark.sql.api.python.PythonSQLUtils")
            batches = utils.readArrowStreamFromFile(path)
            jdf = utils.toDataFrame(batches, schema, session._jsparkSession)
        return DataFrame(jdf, session)

    def stop(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None


@contextlib.contextmanager
def arrow_file(table: pa.Table, batch_rows: int | None = None) -> Iterator[tuple[str, str]]:
    """``table`` as an Arrow IPC stream in a temp file, for the JVM to read, and its Spark type as JSON;
    the file is removed on leaving."""
    schema = from_arrow_schema(table.schema, prefer_timestamp_ntz=True)  # a zone-less timestamp stays one
    fd, path = tempfile.mkstemp(prefix=scratch_files.prefix("arrow"), suffix=".arrow")
    try:
        with os.fdopen(fd, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=batch_rows):
                writer.write_batch(batch)
        yield path, schema.json()
    finally:
        os.unlink(path)


def _batch_rows(table: pa.Table) -> int:
    # Split only big flushes: each batch becomes a Spark task and at least one file
    # per table partition, and small files cost every reader later.
    return max(MIN_ROWS_PER_TASK, -(-table.num_rows // _MAX_TASKS))


MIN_ROWS_PER_TASK = 100_000
_MAX_TASKS = 4


def _jvm_of(session: SparkSession) -> Any:
    """The py4j view of a started session's JVM; pyspark types it optional, for a context not started yet."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    return jvm
