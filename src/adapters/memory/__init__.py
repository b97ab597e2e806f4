"""The in-memory engine and state store: exact semantics, no external service (``engine``,
``state_store``, ``errors``)."""
