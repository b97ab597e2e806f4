"""Adapters: the engines, state stores, sources and sinks that implement the domain's ports.

Heavy libraries (pyspark, confluent_kafka, redis) are imported only inside the adapter
package that needs them, so choosing the in-memory engine never loads them. This door
gives the two standard-library adapters of ``_system`` (the wall clock and metrics kept in
memory); each technology's package has its own.
"""

from adapters._system import OBSERVATIONS_KEPT, InMemoryMetrics, SystemClock

__all__ = ["OBSERVATIONS_KEPT", "InMemoryMetrics", "SystemClock"]
