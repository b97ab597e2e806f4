"""The checkpoint manifest: which job changes keep a Spark checkpoint's state usable."""

from adapters.spark.manifest import compare, job_manifest, refusal
from domain.rules import DedupRule, RuleSet

V1 = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600)})


def changes(new: RuleSet, old: RuleSet = V1, old_schema="struct<a>", new_schema="struct<a>"):
    return compare(job_manifest(old, old_schema), job_manifest(new, new_schema))


def test_same_rules_have_no_changes():
    assert changes(V1).changes == []


def test_windows_and_rules_added_or_removed_are_compatible():
    longer = RuleSet({"APP": DedupRule("APP", 45), "MOBILE": DedupRule("MOBILE", 60)})
    found = {c.setting: c.compatible for c in changes(longer).changes}
    assert found == {"rules.APP.window": True, "rules.APP.lateness": True, "rules.MOBILE": True,
                     "rules.WEB": True}


def test_a_changed_key_or_state_schema_is_incompatible_and_named():
    rekeyed = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600, ("uniqueValue", "type"))})
    incompatible = changes(rekeyed, new_schema="struct<a,b>").incompatible
    assert [c.describe() for c in incompatible] == [
        "stateful operator window-dedup state_schema changed from struct<a> to struct<a,b>",
        "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type"]


def test_the_refusal_is_one_line_naming_the_change_and_the_remedy():
    rekeyed = RuleSet({"WEB": DedupRule("WEB", 600, ("uniqueValue", "type"))})
    message = refusal("ckpt", changes(rekeyed).incompatible)
    assert "\n" not in message
    assert "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type" in message
    assert "dedup state migrate --from ckpt --to NEW_CHECKPOINT" in message
