"""Which failed rounds count toward failing the connector: the same refusal by Iceberg, round after round."""

from __future__ import annotations

from tabletopic.commit.repeated_refusals import RepeatedRefusals
from tabletopic.write.java_errors import JavaErrorKind
from tabletopic.write.table_committer import CommitFailed, CommitFenced

REFUSED, VALIDATION, CONFLICT_KIND = JavaErrorKind.REFUSED, JavaErrorKind.VALIDATION, JavaErrorKind.CONFLICT
DVS = "commit to table db.t failed: java.lang.IllegalArgumentException: Must use DVs for position deletes in V3: /w/{}"


def refused(n: int) -> dict[str, CommitFailed]:
    return {"db.t": CommitFailed(DVS.format(n), REFUSED)}


def test_only_the_same_refusal_round_after_round_counts() -> None:
    refusals = RepeatedRefusals(3)
    assert refusals.observe(refused(1), []) is None
    assert refusals.observe(refused(2), ["db.u"]) is None
    # An outage between them starts the count again: it is retried for as long as it lasts.
    outage = CommitFailed("cannot read table db.t: java.net.ConnectException: Connection refused")
    assert refusals.observe({"db.t": outage}, []) is None
    assert refusals.observe(refused(3), []) is None
    assert refusals.observe(refused(4), []) is None
    other = CommitFailed("commit to table db.t failed: ValidationException: Found conflicting files", VALIDATION)
    assert refusals.observe({"db.t": other}, []) is None  # another cause: a new count
    assert refusals.observe(refused(5), []) is None
    assert refusals.observe({}, ["db.t"]) is None  # committed: a new count
    for n in range(6, 8):
        assert refusals.observe(refused(n), []) is None
    given_up = refusals.observe(refused(8), [])
    assert given_up is not None and str(given_up).startswith(DVS.format(8))


def test_the_kind_decides_not_the_words() -> None:
    """An outage whose message names a refusing exception (a path, a cause's text) is still an outage."""
    refusals = RepeatedRefusals(2)
    misleading = CommitFailed("cannot read table db.t: java.io.IOException: /w/IllegalArgumentException.txt: timed out")
    fence = CommitFenced("IllegalStateException: the table's offsets moved")
    for _ in range(5):
        assert refusals.observe({"db.t": misleading}, []) is None
        assert refusals.observe({"db.t": fence}, []) is None


CONFLICT = CommitFailed("commit to table db.t failed: CommitFailedException: Cannot commit: metadata changed",
                        CONFLICT_KIND)


def test_conflicts_are_retried_without_end_unless_the_java_key_bounds_them() -> None:
    unbounded = RepeatedRefusals(3)
    assert all(unbounded.observe({"db.t": CONFLICT}, []) is None for _ in range(20))
    bounded = RepeatedRefusals(3, conflicts=2)
    assert bounded.observe({"db.t": CONFLICT}, []) is None
    assert bounded.observe({}, ["db.t"]) is None  # committed in between: a new count
    assert bounded.observe({"db.t": CONFLICT}, []) is None
    kept = CommitFailed("commit to table db.t kept conflicting with concurrent commits", CONFLICT_KIND)
    failed = bounded.observe({"db.t": kept}, [])
    assert failed is not None and "iceberg.control.commit.max-consecutive-failures" in str(failed)


def test_a_conflict_does_not_count_as_a_refusal() -> None:
    refusals = RepeatedRefusals(2, conflicts=5)
    assert refusals.observe(refused(1), []) is None
    assert refusals.observe({"db.t": CONFLICT}, []) is None  # breaks the refusals' streak
    assert refusals.observe(refused(1), []) is None
    given_up = refusals.observe(refused(1), [])
    assert given_up is not None and "tabletopic.commit.max-consecutive-refusals" in str(given_up)
