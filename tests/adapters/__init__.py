"""Tests of ``adapters``, a folder per adapter package (``tests/adapters/spark`` mirrors its sub-packages)."""
