"""``topics.regex``: which topics match it, at start and as topics are created later.

Faust does not subscribe by pattern (its conductor subscribes to the names its topics list),
so the consumer subscribes to names, and this watch lists the cluster's topics every
``every_s`` to add those created since. Internal topics (``__consumer_offsets``, ...) never
match, as with Kafka's pattern subscriptions.
"""

from __future__ import annotations

import re

from tabletopic.kafka.clients import KafkaClients


class TopicWatch:
    def __init__(self, clients: KafkaClients, regex: re.Pattern[str], every_s: float) -> None:
        self.clients, self.regex, self.every_s = clients, regex, every_s

    async def matching(self) -> set[str]:
        admin = self.clients.admin()
        await admin.start()
        try:
            names = await admin.list_topics()
        finally:
            await admin.close()
        return {n for n in names if not n.startswith("__") and self.regex.fullmatch(n)}
