"""``tabletopic distributed worker.properties``: a worker of a cluster, as ``connect-distributed`` starts one.

Workers sharing a ``group.id`` share ``config.storage.topic`` and
``status.storage.topic``.  A REST call to any of them writes the config topic, which
every worker applies; each worker runs every connector, and the connector's consumer
group spreads its partitions over them, as several standalone daemons would.  A new
worker joins by starting with the same worker file.
"""

from __future__ import annotations

from tabletopic.app.daemon import Daemon
from tabletopic.config.worker import WorkerConfig
from tabletopic.distributed.config_topic import ConfigTopicStore
from tabletopic.distributed.status_topic import StatusTopic
from tabletopic.kafka.clients import KafkaClients
from tabletopic.write.spark_session import SparkRuntime


def distributed_daemon(worker: WorkerConfig, spark: SparkRuntime | None = None) -> Daemon:
    assert worker.config_topic and worker.status_topic, "checked by distributed_problems"
    clients = KafkaClients(worker.bootstrap_servers, worker.raw)
    store = ConfigTopicStore(clients, worker.config_topic, worker.config_replication)
    status_topic = worker.status_topic
    return Daemon(worker, store, spark,
                  board=lambda worker_id: StatusTopic(clients, status_topic, worker.status_replication, worker_id),
                  mode="distributed")
