"""A Hive Metastore on 127.0.0.1, for ``tabletopic demo --lake=hive`` and the tests: Hive 2.3 from the jars of
the pyspark wheel, on Derby (in its own directory) or PostgreSQL, stopped by its PID.

Its configuration and logs live in a directory of its own. A SIGKILLed holder's lock on a table is
given up after a minute without heartbeats (``hive.txn.timeout``; Hive's default is five), by the
housekeeping that the compactor's initiator starts.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from xml.sax.saxutils import escape

from tabletopic.demo.broker import free_port
from tabletopic.write.jvm_classpath import pyspark_jars_dir

JARS = pyspark_jars_dir()
SOURCE = Path(__file__).parent / "java" / "MetastoreMain.java"
POSTGRES_DRIVER = Path("/usr/share/java/postgresql.jar")


class HiveMetastore:
    """``jdbc``: the backing database's JDBC URL, user and password (Derby in the directory when None)."""

    def __init__(self, warehouse: str, jdbc: tuple[str, str, str] | None = None) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="tabletopic-hms-", dir="/tmp"))
        self.warehouse = warehouse
        self.jdbc = jdbc
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def catalog_props(self) -> dict[str, str]:
        """Iceberg's HiveCatalog on this metastore: ``iceberg.catalog.*`` without the prefix."""
        return {"type": "hive", "uri": self.uri, "warehouse": self.warehouse}

    def _configure(self) -> None:
        if self.jdbc is None:
            url, driver, user, password = f"jdbc:derby:;databaseName={self.root}/db;create=true", \
                "org.apache.derby.jdbc.EmbeddedDriver", "APP", "mine"
        else:
            url, user, password = self.jdbc
            driver = "org.postgresql.Driver"
        props = {"javax.jdo.option.ConnectionURL": url, "javax.jdo.option.ConnectionDriverName": driver,
                 "javax.jdo.option.ConnectionUserName": user, "javax.jdo.option.ConnectionPassword": password,
                 "datanucleus.schema.autoCreateAll": "true", "hive.metastore.schema.verification": "false",
                 "hive.metastore.warehouse.dir": self.warehouse, "hive.metastore.port": str(self.port),
                 # A lock whose holder died (a SIGKILL mid-commit) blocks the table's commits until this many
                 # seconds without a heartbeat have passed: 300 by default, a minute here.
                 "hive.txn.timeout": "60",
                 # Hive 2.3 gives such a lock up only in its housekeeping, which runs only where the compactor's
                 # initiator is on and the transaction manager is the database's: without them, the lock
                 # stayed for good. It looks every 10 s here.
                 "hive.compactor.initiator.on": "true",
                 "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
                 "hive.support.concurrency": "true",
                 "hive.timedout.txn.reaper.start": "5s", "hive.timedout.txn.reaper.interval": "10s"}
        (self.root / "conf").mkdir()
        (self.root / "conf" / "hive-site.xml").write_text(
            "<configuration>" + "".join(f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
                                        for k, v in props.items()) + "</configuration>")
        (self.root / "conf" / "log4j2.properties").write_text(
            "status = error\nappender.file.type = File\nappender.file.name = file\n"
            f"appender.file.fileName = {self.root}/metastore.log\nappender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = %d %p %c: %m%n\nrootLogger.level = warn\n"
            "rootLogger.appenderRef.file.ref = file\n")
        built = subprocess.run(["javac", "-nowarn", "-cp", f"{JARS}/*", "-d", str(self.root / "classes"),
                                str(SOURCE)], capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"javac {SOURCE.name}: {built.stdout}{built.stderr}")

    def start(self, timeout_s: float = 120) -> HiveMetastore:
        if not (self.root / "conf").exists():
            self._configure()
        classpath = [str(self.root / "conf"), str(self.root / "classes"), f"{JARS}/*",
                     *([str(POSTGRES_DRIVER)] if self.jdbc is not None else [])]
        log = open(self.root / "stdout.log", "ab")  # noqa: SIM115 - handed to the child
        # Without the context selector, Hive's log4j2 wants the LMAX disruptor, which pyspark lacks.
        self.proc = subprocess.Popen(
            ["java", "-Xmx384m", "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector."
             "ClassLoaderContextSelector", f"-Dlog4j.configurationFile={self.root}/conf/log4j2.properties",
             "-cp", ":".join(classpath), "MetastoreMain", "-p", str(self.port)],
            cwd=self.root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=os.environ.copy())
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the metastore exited {self.proc.returncode}: {self.output()[-3000:]}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the metastore did not listen in {timeout_s:.0f} s: {self.output()[-3000:]}")

    def output(self) -> str:
        return "".join(p.read_text(errors="replace") for p in (self.root / "stdout.log", self.root / "metastore.log")
                       if p.exists())

    def pause(self) -> None:
        """Stop the metastore, keeping its database: a catalog outage."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        self.pause()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> HiveMetastore:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
