"""Which partitions feed which table, and so which partitions each table's snapshots record.

Static and dynamic routing can send any partition's records to any table, so every table records
every partition of the connector: a table that got none of a partition's rows in a round still
moves past them, or a restart would read them again for it. In Table Topic mode a topic's records go
to its own table and to no other, so a table records its topic's partitions alone, and its snapshot
summaries stay the same size however many topics the connector reads (the rule is in
``docs/design/exactly-once.md``).
"""

from __future__ import annotations

from collections.abc import Mapping

from tabletopic.config.connector import ConnectorConfig
from tabletopic.core.topic_partition import TopicPartition
from tabletopic.route.router import topic_table


class TableFeeds:
    def __init__(self, table_topic_namespace: str | None, offset_reset: str = "earliest") -> None:
        """``offset_reset`` is the connector's ``auto.offset.reset``: where a partition nothing records is read."""
        self._namespace = table_topic_namespace
        self._offset_reset = offset_reset
        self._tables: dict[str, str] = {}  # topic -> its table: asked for every partition, every round

    @classmethod
    def of(cls, config: ConnectorConfig, offset_reset: str) -> TableFeeds:
        return cls(config.table_topic_namespace, offset_reset)

    @property
    def per_table(self) -> bool:
        """True when each partition feeds one table it names: tables record only their own partitions."""
        return self._namespace is not None

    @property
    def namespace(self) -> str | None:
        """Table Topic mode's namespace: every table of the connector lies in it."""
        return self._namespace

    @property
    def starts_of_unrecorded(self) -> bool:
        """Whether the round starts of partitions no table records must be kept in other tables.

        Only a partition without a group offset needs them: read anew it starts at ``auto.offset.reset``,
        and from ``earliest`` that is at or below any round start, so they are needed only otherwise.
        """
        return self.per_table and self._offset_reset != "earliest"

    def table_of(self, tp: TopicPartition) -> str | None:
        """The one table ``tp`` feeds, or None when routing may send it to any."""
        if self._namespace is None:
            return None
        table = self._tables.get(tp[0])
        if table is None:
            table = self._tables[tp[0]] = topic_table(self._namespace, tp[0])
        return table

    def feeds(self, table: str, tp: TopicPartition) -> bool:
        return self._namespace is None or self.table_of(tp) == table

    def split(self, offsets: Mapping[TopicPartition, int]) -> dict[str, dict[TopicPartition, int]]:
        """``offsets`` by the one table each partition feeds (Table Topic mode only)."""
        out: dict[str, dict[TopicPartition, int]] = {}
        for tp, offset in offsets.items():
            table = self.table_of(tp)
            assert table is not None, "only Table Topic mode feeds one table per partition"
            out.setdefault(table, {})[tp] = offset
        return out
