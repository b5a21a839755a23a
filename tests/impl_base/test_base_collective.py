"""Framing helpers shared by both collective implementations: int64 range, negated pairs."""

import pytest

from tiercheck.impl.collective import (
    INT64_MAX,
    INT64_MIN,
    Int64RangeError,
    as_int64_list,
    negated_pairs,
    split_negated,
    sync_point_id,
)


def test_negated_pairs_roundtrip_gives_min_and_max():
    per_rank = [[5, -3, INT64_MAX], [2, 7, INT64_MIN + 1], [9, 0, 0]]
    frames = [negated_pairs(v) for v in per_rank]
    reduced = [min(col) for col in zip(*frames)]  # what one MIN all-reduce computes
    mins, maxs = split_negated(reduced)
    assert mins == [2, -3, INT64_MIN + 1]
    assert maxs == [9, 7, INT64_MAX]


def test_negated_pairs_refuses_int64_min():
    with pytest.raises(Int64RangeError, match=r"digest\[1\] = INT64_MIN cannot be negated"):
        negated_pairs([3, INT64_MIN], what="digest")


def test_values_must_fit_int64():
    assert as_int64_list([INT64_MIN, INT64_MAX]) == [INT64_MIN, INT64_MAX]
    with pytest.raises(Int64RangeError, match="does not fit"):
        as_int64_list([INT64_MAX + 1])
    with pytest.raises(Int64RangeError, match="not an integer"):
        as_int64_list([1.5])
    with pytest.raises(ValueError, match="even"):
        split_negated([1, 2, 3])


def test_sync_point_ids_are_positive_and_distinguish_tag_op_and_length():
    ids = {sync_point_id("drain", "min", 3), sync_point_id("drain", "max", 3),
           sync_point_id("drain", "min", 4), sync_point_id("writing_check", "min", 3)}
    assert len(ids) == 4
    assert all(0 < i < 2**62 for i in ids)
