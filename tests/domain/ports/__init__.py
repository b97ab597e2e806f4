"""One abstract contract suite per port of ``domain``; each adapter's test file in ``tests/adapters`` subclasses it."""
