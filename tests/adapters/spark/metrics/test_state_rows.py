"""StateRowCount (the operator's count of its keys): a replayed partition replaces its count."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.spark


def task_count(spark, batch_time_ms: int, partition: int, *changes: int):
    """The accumulator copy one task would send: its changes to one (micro-batch, partition)."""
    count = spark._jvm.streamdedup.stream.StateRowCount()
    for change in changes:
        count.add(batch_time_ms, partition, change)
    return count


def test_a_partition_judged_again_for_the_same_micro_batch_replaces_its_count(spark):
    driver = spark._jvm.streamdedup.stream.StateRowCount()
    driver.merge(task_count(spark, 1_000, 0, 1, 1, 1, -1))
    driver.merge(task_count(spark, 1_000, 1, 1, 1, 1))
    assert driver.value() == 5
    driver.merge(task_count(spark, 1_000, 0, 1, 1, 1, -1))  # replayed, or read again by a retried write
    assert driver.value() == 5
    driver.merge(task_count(spark, 2_000, 0, -1, -1))
    assert driver.value() == 3


def test_old_micro_batches_are_folded_into_one_settled_count(spark):
    driver = spark._jvm.streamdedup.stream.StateRowCount()
    for batch in range(200):
        driver.merge(task_count(spark, batch, batch % 2, 1, 1, -1))
    assert driver.value() == 200
    driver.merge(task_count(spark, 199, 1, -1))  # the latest batch's +1 is still replaceable
    assert driver.value() == 198
    driver.merge(task_count(spark, 0, 0, 5))  # long folded: a late task of batch 0 adds
    assert driver.value() == 203
    copy = driver.copy()
    assert copy.value() == 203 and not copy.isZero()
    copy.reset()
    assert copy.isZero() and copy.value() == 0 and driver.value() == 203
