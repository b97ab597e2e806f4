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
	.venv/bin/python -m pytest -m "not kafka and not redis and not spark and not cluster and not slow" \
		tests/domain tests/app tests/adapters tests/bench \
		tests/project/test_architecture.py tests/project/test_checks.py tests/project/test_docs_plots.py
