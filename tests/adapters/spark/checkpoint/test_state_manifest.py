"""The checkpoint manifest: which job changes keep a Spark checkpoint's state usable, and
which source and outputs it belongs to."""

import shlex

import pytest

from adapters.spark.checkpoint import Manifest, compare, foreign, foreign_refusal, job_manifest, refusal
from domain import DedupRule, RuleSet

V1 = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600)})


def changes(new: RuleSet, old: RuleSet = V1, old_schema="struct<a>", new_schema="struct<a>"):
    return compare(job_manifest(old, old_schema), job_manifest(new, new_schema))


def test_same_rules_have_no_changes():
    assert changes(V1).changes == []


def test_windows_and_rules_added_or_removed_are_compatible():
    longer = RuleSet({"APP": DedupRule("APP", 45), "MOBILE": DedupRule("MOBILE", 60)})
    found = {c.setting: c.compatible for c in changes(longer).changes}
    assert found == {"rules.APP.window": True, "rules.APP.lateness": True, "rules.MOBILE": True, "rules.WEB": True}


def test_a_changed_key_or_state_schema_is_incompatible_and_named():
    rekeyed = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600, ("uniqueValue", "type"))})
    incompatible = changes(rekeyed, new_schema="struct<a,b>").incompatible
    assert [c.describe() for c in incompatible] == [
        "stateful operator window-dedup state_schema changed from struct<a> to struct<a,b>",
        "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type",
    ]


@pytest.mark.parametrize(
    ("old", "new", "resumed"),
    [
        (4, 5, True),
        (4, 6, True),
        (5, 6, True),
        (4, 7, True),
        (5, 7, True),
        (6, 7, True),
        (5, 4, False),
        (6, 5, False),
        (7, 6, False),
        (3, 6, False),
        (3, 4, False),
        (2, 6, False),
    ],
)
def test_only_a_format_the_job_reads_as_it_is_is_resumed_in_place(old, new, resumed):
    """State formats 5 to 7 keep format 4's keys and honour their timers, formats 6 and 7 read format
    5's queues as format 5 did, and format 7 reads format 6's queues beside its own lists: such a
    checkpoint is resumed as it is; an older format needs a migration, and a newer one is never
    resumed by an older job."""
    checkpoint, job = job_manifest(V1, "struct<a>"), job_manifest(V1, "struct<a>")
    checkpoint.operators["window-dedup"]["state_format"] = old
    job.operators["window-dedup"]["state_format"] = new
    found = compare(checkpoint, job).changes
    assert [(c.setting, c.old, c.new, c.compatible) for c in found] == [
        ("stateful operator window-dedup state_format", old, new, resumed)
    ]


def test_the_refusal_is_one_line_naming_the_change_and_the_remedy():
    rekeyed = RuleSet({"WEB": DedupRule("WEB", 600, ("uniqueValue", "type"))})
    message = refusal("/data/ckpt", changes(rekeyed).incompatible, "/data/ckpt-migrated", "/etc/dedup v2.yaml")
    assert "\n" not in message
    assert "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type" in message
    assert (
        "run `dedup state migrate --from spark:/data/ckpt --to spark:/data/ckpt-migrated "
        "--config '/etc/dedup v2.yaml'` and start this job with spark.checkpoint=/data/ckpt-migrated"
    ) in message
    command = message.split("`")[1]
    assert shlex.split(command)[-1] == "/etc/dedup v2.yaml"  # quoted for a shell


KAFKA = {"kafka": ["k1:9092", "k2:9092"], "topics": ["events"]}


def endpoints(**roles) -> Manifest:
    return job_manifest(V1, endpoints=roles)


@pytest.mark.parametrize(
    "old, new, same",
    [
        ({"path": "file:/in/a"}, {"path": "file:/in/a"}, True),
        ({"path": "file:/in/a"}, {"path": "file:/in/b"}, False),
        (KAFKA, {"kafka": ["k2:9092", "k3:9092"], "topics": ["events"]}, True),  # another broker of the cluster
        (KAFKA, {"kafka": ["k1:9092"], "topics": ["events", "more"]}, True),  # a topic added
        (KAFKA, {"kafka": ["k1:9092"], "topics": ["other"]}, False),
        (KAFKA, {"kafka": ["elsewhere:9092"], "topics": ["events"]}, False),
        (KAFKA, {"path": "file:/in/a"}, False),
    ],
)
def test_a_checkpoint_belongs_to_the_source_and_outputs_it_was_created_for(old, new, same):
    assert (foreign(endpoints(source=old), endpoints(source=new)) == []) == same


def test_a_checkpoint_that_records_no_endpoints_belongs_to_any_job():
    assert foreign(job_manifest(V1), endpoints(source=KAFKA)) == []
    assert foreign(endpoints(source=KAFKA), endpoints(sink={"path": "file:/out"})) == []


def test_the_refusal_of_another_jobs_checkpoint_names_both_endpoints_and_the_remedy():
    mismatches = foreign(
        endpoints(source={"path": "file:/in/a"}, dlq=KAFKA),
        endpoints(source={"path": "file:/in/b"}, dlq={"kafka": ["k9:9092"], "topics": ["dlq"]}),
    )
    assert foreign_refusal("/data/ckpt", mismatches) == (
        "checkpoint /data/ckpt belongs to another job: its source is /in/a, this job's is /in/b; its dlq is "
        "kafka://k1:9092,k2:9092/events, this job's is kafka://k9:9092/dlq. Use another spark.checkpoint "
        "(DEDUP_SPARK__CHECKPOINT) for this job, or the same --source and --dlq as that job. "
        "The checkpoint was not modified"
    )


def test_the_manifest_keeps_its_endpoints_through_a_migration_record():
    manifest = endpoints(source=KAFKA)
    assert Manifest.from_json(manifest.with_migration({"retired": True}).as_json()).endpoints == {"source": KAFKA}
