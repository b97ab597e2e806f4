"""Settings read from the environment (``app._settings``)."""

from __future__ import annotations

import json

from app import load_settings

ROCKSDB_BUDGET = "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"


def test_a_spark_setting_in_a_variable_of_its_own_keeps_its_spelling_beside_those_of_the_json(monkeypatch):
    """Spark's keys are case-sensitive: one lower-cased would be a setting Spark ignores, silently."""
    monkeypatch.setenv(f"DEDUP_SPARK__CONF__{ROCKSDB_BUDGET}", "4096")
    monkeypatch.setenv("DEDUP_SPARK__CONF", json.dumps({"spark.sql.shuffle.partitions": "8", "spark.a.bC": "1"}))
    assert load_settings().spark.conf == {
        ROCKSDB_BUDGET: "4096",
        "spark.sql.shuffle.partitions": "8",
        "spark.a.bC": "1",
    }


def test_a_rule_named_in_a_variable_is_upper_cased_in_the_migrations_old_key_fields_as_in_the_rules(monkeypatch):
    monkeypatch.setenv("DEDUP_RULES__WEB__KEY_FIELDS", '["uniqueValue", "type"]')
    monkeypatch.setenv("DEDUP_MIGRATION__OLD_KEY_FIELDS__WEB", '["uniqueValue"]')
    settings = load_settings()
    assert settings.migration.old_key_fields == {"WEB": ["uniqueValue"]}
    assert set(settings.migration.old_key_fields) <= set(settings.rules)
