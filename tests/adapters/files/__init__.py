"""Tests of ``adapters.files``."""
