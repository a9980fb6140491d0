"""Seek generations: which fetched batches continue their partition."""

from __future__ import annotations

from tabletopic.consume.continuity import STALE, Decision, decide


def test_a_batch_that_continues_the_partition_is_taken_whatever_its_generation() -> None:
    for generation in (STALE, 0, 1, 2):
        assert decide(100, 100, generation, 2, False, None, None) is Decision.TAKE


def test_nothing_is_taken_while_a_seek_is_queued() -> None:
    assert decide(100, 100, 2, 2, True, None, None) is Decision.SKIP


def test_a_batch_fetched_before_a_seek_back_is_left_for_the_fetch_after_it() -> None:
    # Rows 0..99 were rejected and the partition sought back to 100 (generation 3): an older fetch
    # that starts at 150 must not make the sink skip 100..149.
    assert decide(100, 150, 2, 3, False, None, None) is Decision.SKIP


def test_a_gap_in_the_current_generation_that_no_seek_explains_is_read_again() -> None:
    assert decide(100, 150, 3, 3, False, None, 3) is Decision.RESEEK
    assert decide(100, 150, STALE, 3, False, None, None) is Decision.RESEEK


def test_a_gap_is_trusted_only_in_the_first_batch_after_a_seek_to_exactly_there() -> None:
    assert decide(100, 150, 3, 3, False, 100, 2) is Decision.TAKE  # compaction left 100..149 empty
    assert decide(100, 150, 3, 3, False, 100, 3) is Decision.RESEEK  # not the first batch since
    assert decide(100, 150, 3, 3, False, 90, 2) is Decision.RESEEK  # the seek went elsewhere
