"""Which failed rounds count toward failing the connector: the same refusal by Iceberg, round after round."""

from __future__ import annotations

from tabletopic.commit.repeated_refusals import RepeatedRefusals


def test_only_the_same_refusal_round_after_round_counts() -> None:
    refusals = RepeatedRefusals(3)
    dvs = "commit to table db.t failed: IllegalArgumentException: Must use DVs for position deletes in V3: /w/{}"
    assert refusals.observe({"db.t": dvs.format(1)}, []) is None
    assert refusals.observe({"db.t": dvs.format(2)}, ["db.u"]) is None
    # An outage between them starts the count again: it is retried for as long as it lasts.
    assert refusals.observe({"db.t": "cannot read table db.t: ConnectException: Connection refused"}, []) is None
    assert refusals.observe({"db.t": dvs.format(3)}, []) is None
    assert refusals.observe({"db.t": dvs.format(4)}, []) is None
    other = "commit to table db.t failed: ValidationException: Found conflicting files"
    assert refusals.observe({"db.t": other}, []) is None  # another cause: a new count
    assert refusals.observe({"db.t": dvs.format(5)}, []) is None
    assert refusals.observe({}, ["db.t"]) is None  # committed: a new count
    for n in range(6, 8):
        assert refusals.observe({"db.t": dvs.format(n)}, []) is None
    refused = refusals.observe({"db.t": dvs.format(8)}, [])
    assert refused is not None and str(refused).startswith(dvs.format(8))


CONFLICT = "commit to table db.t failed: CommitFailedException: Cannot commit: metadata changed under it"


def test_conflicts_are_retried_without_end_unless_the_java_key_bounds_them() -> None:
    unbounded = RepeatedRefusals(3)
    assert all(unbounded.observe({"db.t": CONFLICT}, []) is None for _ in range(20))
    bounded = RepeatedRefusals(3, conflicts=2)
    assert bounded.observe({"db.t": CONFLICT}, []) is None
    assert bounded.observe({}, ["db.t"]) is None  # committed in between: a new count
    assert bounded.observe({"db.t": CONFLICT}, []) is None
    failed = bounded.observe({"db.t": "commit to table db.t kept conflicting with concurrent commits"}, [])
    assert failed is not None and "iceberg.control.commit.max-consecutive-failures" in str(failed)


def test_a_conflict_does_not_count_as_a_refusal() -> None:
    refusals = RepeatedRefusals(2, conflicts=5)
    dvs = "commit to table db.t failed: IllegalArgumentException: Must use DVs"
    assert refusals.observe({"db.t": dvs}, []) is None
    assert refusals.observe({"db.t": CONFLICT}, []) is None  # breaks the refusals' streak
    assert refusals.observe({"db.t": dvs}, []) is None
    refused = refusals.observe({"db.t": dvs}, [])
    assert refused is not None and "tabletopic.commit.max-consecutive-refusals" in str(refused)
