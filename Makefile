# The two commands of the README. Both set up what they need first and are idempotent.
.PHONY: demo test setup services unit

demo: setup
	.venv/bin/dedup demo

test: services
	.venv/bin/python -m pytest

setup:
	@scripts/bootstrap

services:
	@scripts/bootstrap --services

unit: setup
	.venv/bin/python -m pytest tests/unit tests/contracts/test_state_store_memory.py tests/contracts/test_sinks_jsonl.py \
		tests/contracts/test_sources_jsonl.py tests/contracts/test_notifications_jsonl.py
