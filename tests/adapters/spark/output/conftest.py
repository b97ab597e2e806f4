"""The two ways a micro-batch reaches the executor writer, for the tests that run through both."""

from __future__ import annotations

import pytest

from adapters.spark.output import SINK_SETTING


@pytest.fixture(params=["foreach-batch", "jvm"])
def sink(request, kafka_spark):
    """Each batch written through ``foreachBatch`` or the JVM streaming sink (``SINK_SETTING``:
    ``streamdedup.output.KafkaSink``, no call into Python on a batch's path)."""
    kafka_spark.conf.set(SINK_SETTING, request.param)
    yield request.param
    kafka_spark.conf.unset(SINK_SETTING)
