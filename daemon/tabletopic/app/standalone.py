"""Standalone mode, as ``connect-standalone``: connectors from the command line's files, kept in memory.

Connectors created over the REST API run beside them until the process stops, as in
Kafka Connect's standalone mode.  The process itself is :class:`tabletopic.app.daemon.Daemon`.
"""

from __future__ import annotations

from tabletopic.app.daemon import Daemon
from tabletopic.config.connector import ConnectorConfig
from tabletopic.config.worker import WorkerConfig
from tabletopic.connectors.config_store import MemoryConfigStore
from tabletopic.connectors.runtime import ConnectorRuntime
from tabletopic.write.spark_session import SparkRuntime


class Standalone(Daemon):
    def __init__(self, worker: WorkerConfig, connectors: list[ConnectorConfig],
                 spark: SparkRuntime | None = None) -> None:
        super().__init__(worker, MemoryConfigStore({c.name: c.written for c in connectors}), spark)

    @property
    def connectors(self) -> list[ConnectorRuntime]:
        """The connectors running (or failed) in this process, in the order they were started."""
        return [r for r in self.herder.runtimes.values() if r.parts is not None]
