"""Adapters: the engines, state stores, sources and sinks that implement the domain's ports.

Heavy libraries (pyspark, confluent_kafka, redis) are imported only inside the adapter
package that needs them, so choosing the in-memory engine never loads them.
"""
