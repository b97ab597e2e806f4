"""The application: settings, the composition root, the `dedup` CLI and the spark-submit entrypoint."""
