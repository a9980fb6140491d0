"""``org.apache.kafka.connect.transforms.RegexRouter`` and ``TimestampRouter``: a new topic for the record.

The topic a transform gives a record is what later transforms and predicates see
(``TopicNameMatches``, ``InsertField``'s ``topic.field``); the record's source topic, partition and
offset stay with it, and are what the table records for resume. Table Topic mode names a table after
its source topic, so these transforms are refused there.

* RegexRouter: where ``regex`` (a Java regular expression) matches the whole topic, its first match is
  replaced by ``replacement`` (``$1``, ``${name}``), as ``Matcher.replaceFirst``; else the topic stays.
* TimestampRouter: ``topic.format`` with ``${topic}`` and ``${timestamp}`` (the record's timestamp in
  ``timestamp.format``, a SimpleDateFormat in UTC; ``yyyyMMdd`` by default).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tabletopic.convert.records import SinkRecords
from tabletopic_plugins.java_regex import check_replacement, compile_java, replace_first
from tabletopic_plugins.transforms.connect_record import required, text
from tabletopic_plugins.transforms.simple_date_format import SimpleDateFormat


class RegexRouter:
    keys = frozenset(("regex", "replacement"))
    changes_topic = True
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.regex = compile_java(required(props, "regex"))
        self.replacement = required(props, "replacement")
        try:  # a bad group reference fails every record Connect routes; here it is found before
            check_replacement(self.regex, self.replacement)
        except ValueError as exc:
            raise ValueError(f"replacement {self.replacement!r}: {exc}") from None

    def apply(self, records: SinkRecords) -> SinkRecords:
        topic = records.record_topic
        if self.regex.fullmatch(topic) is None:
            return records
        return records.with_topic(replace_first(self.regex, self.replacement, topic))


class TimestampRouter:
    keys = frozenset(("topic.format", "timestamp.format"))
    changes_topic = True
    takes_tombstones = True

    def configure(self, props: Mapping[str, str]) -> None:
        self.topic_format = text(props, "topic.format", "${topic}-${timestamp}") or ""
        self.timestamps = SimpleDateFormat(text(props, "timestamp.format", "yyyyMMdd") or "")

    def apply(self, records: SinkRecords) -> list[SinkRecords]:
        stamps = self.timestamps.format(np.asarray(records.timestamps, dtype=np.int64))
        with_topic = self.topic_format.replace("${topic}", records.record_topic)
        pieces = with_topic.split("${timestamp}")
        if len(pieces) == 1:
            return [records.with_topic(with_topic)]
        topics = pa.array(np.full(len(records), pieces[0], dtype=object), pa.string())
        for piece in pieces[1:]:
            topics = pc.binary_join_element_wise(topics, stamps, pa.array(np.full(len(records), piece, dtype=object),
                                                                          pa.string()), "")
        out = []
        for topic in pc.unique(topics).to_pylist():
            mask = np.asarray(pc.equal(topics, topic).to_numpy(zero_copy_only=False), dtype=bool)
            out.append((records if mask.all() else records.take(mask)).with_topic(topic))
        return out
