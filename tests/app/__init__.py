"""Tests of ``app``: the command line, the container, the settings, the state commands."""
