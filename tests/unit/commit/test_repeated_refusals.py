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
