"""Which partitions each table records: all of them, or in Table Topic mode its topic's alone."""

from tabletopic.route.table_feeds import TableFeeds


def test_static_and_dynamic_routing_feed_every_table_from_every_partition() -> None:
    feeds = TableFeeds(None)
    assert not feeds.per_table and feeds.table_of(("orders", 0)) is None
    assert feeds.feeds("db.a", ("orders", 0)) and feeds.feeds("db.b", ("clicks", 3))


def test_in_table_topic_mode_a_partition_feeds_its_own_topics_table_alone() -> None:
    feeds = TableFeeds("tt")
    assert feeds.per_table and feeds.namespace == "tt"
    assert feeds.table_of(("Events.Orders-v2", 1)) == "tt.events_orders_v2"
    assert feeds.feeds("tt.events_orders_v2", ("Events.Orders-v2", 0))
    assert not feeds.feeds("tt.events_orders_v2", ("events.clicks", 0))


def test_round_starts_of_unrecorded_partitions_are_kept_only_when_reading_anew_skips_records() -> None:
    # From earliest, a partition nothing records is read from at or below any round start.
    assert not TableFeeds("tt").starts_of_unrecorded
    assert not TableFeeds("tt", "earliest").starts_of_unrecorded
    assert TableFeeds("tt", "latest").starts_of_unrecorded
    assert not TableFeeds(None, "latest").starts_of_unrecorded  # every table records every partition


def test_a_rounds_offsets_split_by_the_one_table_each_partition_feeds() -> None:
    feeds = TableFeeds("tt")
    offsets = {("a", 0): 5, ("a", 1): 7, ("B.c", 0): 3}
    assert feeds.split(offsets) == {"tt.a": {("a", 0): 5, ("a", 1): 7}, "tt.b_c": {("B.c", 0): 3}}
    assert feeds.split({}) == {}
