"""The composition root: typed settings wired by keyword, providers a test can swap."""

from __future__ import annotations

import json
import os

import pytest
from dependency_injector import providers

from adapters.memory import InMemoryStateStore
from adapters.testing import FlakyStateStore
from app import UsageError, container_for, load_settings

T = 1_689_019_596


def write_events(path, *keys_and_times) -> None:
    path.write_text(
        "".join(
            json.dumps({"id": f"e{i}", "uniqueValue": key, "type": "APP", "timestamp": t}) + "\n"
            for i, (key, t) in enumerate(keys_and_times)
        )
    )


def test_a_test_swaps_the_state_store_provider_and_sees_what_the_engine_claimed(tmp_path):
    write_events(tmp_path / "in.jsonl", ("a", T), ("a", T + 5), ("b", T + 6))
    container = container_for(
        load_settings(
            engine="memory",
            source=f"file:{tmp_path / 'in.jsonl'}",
            sink=f"file:{tmp_path / 'out.jsonl'}",
            dlq=f"file:{tmp_path / 'dlq.jsonl'}",
        )
    )
    store = FlakyStateStore(InMemoryStateStore(), failures=1)  # one transient failure, retried by the policy
    container.state_store.override(providers.Object(store))
    totals = container.engine().run()
    assert (totals.out, totals.duplicates) == (2, 1)
    assert store.calls == 2 and len(store.inner) == 2  # the swapped store judged the batch, after one retry
    assert container.core().state is store


def test_exactly_once_refuses_a_store_that_does_not_survive_a_crash_even_behind_a_migration(tmp_path):
    settings = load_settings(
        engine="kafka",
        source="kafka://127.0.0.1:9/in",
        sink="kafka://127.0.0.1:9/out",
        dlq="kafka://127.0.0.1:9/dlq",
        kafka={"delivery": "exactly-once"},
        migration={"state_from": "memory"},
    )
    with pytest.raises(UsageError, match="exactly-once needs a state that survives a crash"):
        container_for(settings).engine()


def test_a_config_file_is_read_without_writing_the_process_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("DEDUP_CONFIG", raising=False)
    config = tmp_path / "dedup.yaml"
    config.write_text("rules:\n  APP:\n    window: 45s\n")
    settings = load_settings(str(config))
    assert container_for(settings).rules().rules["APP"].window == 45
    assert "DEDUP_CONFIG" not in os.environ
    assert load_settings().effective_rules()["APP"].window == 30  # the next load does not see the last file


def test_every_engine_the_container_builds_is_driven_alike_through_the_engine_port(tmp_path):
    from domain import Engine

    write_events(tmp_path / "in.jsonl", ("a", T), ("a", T + 5))
    files = {
        "source": f"file:{tmp_path / 'in.jsonl'}",
        "sink": f"file:{tmp_path / 'out.jsonl'}",
        "dlq": f"file:{tmp_path / 'dlq.jsonl'}",
    }
    memory = container_for(load_settings(engine="memory", **files)).engine()
    spark = container_for(
        load_settings(
            engine="spark",
            source=f"file:{tmp_path}/",
            sink=f"file:{tmp_path}/o/",
            dlq=f"file:{tmp_path}/d/",
            spark={"checkpoint": str(tmp_path / "c")},
        )
    ).engine()
    assert isinstance(memory, Engine) and isinstance(spark, Engine)  # the kafka engine: tests/adapters/kafka
    seen = []
    memory.on_batch = seen.append
    assert memory.run().out == 1 and seen[-1].out == 1


@pytest.mark.parametrize(
    "given, engine, kept",
    [
        (None, "spark", "checkpoint"),
        ("checkpoint", "spark", "checkpoint"),
        ("memory", "spark", "checkpoint"),
        (None, "memory", "memory"),
        (None, "kafka", "memory"),
    ],
)
def test_the_state_setting_names_the_engines_own_state(given, engine, kept, caplog):
    settings = load_settings(engine=engine, **({} if given is None else {"state": given}))
    assert settings.state == kept
    deprecated = [r.message for r in caplog.records if "deprecated" in r.message]
    assert deprecated == (
        [
            (
                "state=memory with the spark engine is deprecated: its state is kept in the "
                "checkpoint, write state=checkpoint (DEDUP_STATE=checkpoint)"
            )
        ]
        if given == "memory"
        else []
    )


@pytest.mark.parametrize("engine", ["memory", "kafka"])
def test_the_checkpoint_state_is_refused_by_the_engines_that_keep_no_checkpoint(engine):
    from app import SettingsError

    with pytest.raises(SettingsError, match=r"state \(DEDUP_STATE\): 'checkpoint' is the spark engine's state"):
        load_settings(engine=engine, state="checkpoint")


def test_the_spark_engine_names_its_state_checkpoint_and_takes_memory_with_a_deprecation(tmp_path, caplog):
    from adapters.spark import build_spark_engine
    from adapters.spark.shared import SparkSetupError
    from domain import Policies, RuleSet

    files = {
        "source": f"jsonl:{tmp_path}",
        "sink": str(tmp_path / "o"),
        "dead_letters": str(tmp_path / "d"),
        "checkpoint": str(tmp_path / "c"),
    }
    build_spark_engine(RuleSet(), Policies(), state="checkpoint", **files)
    assert not [r for r in caplog.records if "deprecated" in r.message]
    build_spark_engine(RuleSet(), Policies(), state="memory", **files)
    assert [r.message for r in caplog.records if "deprecated" in r.message] == [
        (
            "state='memory' for the Spark engine is deprecated: its state is kept in the checkpoint, write "
            "state='checkpoint'"
        )
    ]
    with pytest.raises(SparkSetupError, match=r"in its checkpoint .'checkpoint'. or in Redis"):
        build_spark_engine(RuleSet(), Policies(), state="memroy", **files)
