"""Metrics for Prometheus: the catalog of what every engine reports, and its exposition."""
