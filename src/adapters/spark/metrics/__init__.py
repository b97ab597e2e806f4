"""The Spark engine's metrics: the accounting observed in the plan and read by a
``StreamingQueryListener`` with the progress gauges (``listener.ProgressListener``), and the
state-row gauge (``state_rows.StateRowGauge``)."""
