"""A topic and a partition: the key of every position, range and offset the sink keeps."""

from __future__ import annotations

TopicPartition = tuple[str, int]
