"""How many calls a start and a micro-batch make from Python to the JVM.

The plan is built over py4j at every start and each micro-batch's routing runs through
pyspark, so each round trip is paid at every start and in every batch's latency. PySpark's
DataFrame debugging (``spark.python.sql.dataFrameDebugging.enabled``) wraps every pyspark
function call in four more round trips; the engine's session turns it off.
"""

from __future__ import annotations

import pytest
from py4j import clientserver, java_gateway

pytestmark = pytest.mark.spark

EVENTS = [{"id": f"e{i}", "uniqueValue": f"u{i % 3}", "type": "APP", "timestamp": 1_700_000_000 + i} for i in range(6)]


@pytest.mark.guard  # counts round trips: a start's and a batch's cost is mostly their number
def test_a_start_and_two_micro_batches_make_about_ten_thousand_round_trips(files, monkeypatch):
    calls = []
    for connection in (clientserver.ClientServerConnection, java_gateway.GatewayConnection):
        send = connection.send_command

        def counted(self, command, *args, _send=send, **kwargs):
            calls.append(1)
            return _send(self, command, *args, **kwargs)

        monkeypatch.setattr(connection, "send_command", counted)
    files.add(*EVENTS[:3])
    files.add(*EVENTS[3:])
    result = files.run()
    assert result.out_ids == ["e0", "e1", "e2"]
    # 10,763 on 2026-12-04; 24,241 with pyspark's DataFrame debugging on
    assert len(calls) < 14_000, f"{len(calls)} calls to the JVM"
