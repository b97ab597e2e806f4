"""Spark's own metering of its analyzer and optimizer rules (``RuleExecutor``), read back.

Spark plans every micro-batch again, and each rule runs over the plan each time, whether it
changes it or not. The metering is the JVM's, over every query since its last reset: what the
session leaves out (``UNUSED_OPTIMIZER_RULES``) was chosen from it and is held to it by
tests/adapters/spark/runtime/test_optimizer_rules.py; bench/spark_batch_phases.py --rules prints
it per micro-batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROW = re.compile(r"(\S+)\s+(\d+) / (\d+)\s+(\d+) / (\d+)\s*$")


@dataclass(frozen=True)
class RuleRuns:
    """One rule's runs since the last reset: how many changed the plan (``effective``), and their times."""

    effective: int
    runs: int
    effective_ns: int
    total_ns: int


def reset_rule_metering(spark) -> None:
    """Start the JVM's rule metering afresh."""
    spark.sparkContext._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.resetMetrics()


def rule_metering(spark) -> dict[str, RuleRuns]:
    """Every rule run since the last reset, by its class name (``RuleExecutor.dumpTimeSpent``'s table)."""
    dump = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.dumpTimeSpent()
    metering = {}
    for line in dump.splitlines():
        row = _ROW.match(line.strip())
        if row:
            name, effective_ns, total_ns, effective, runs = row.groups()
            metering[name] = RuleRuns(int(effective), int(runs), int(effective_ns), int(total_ns))
    return metering
