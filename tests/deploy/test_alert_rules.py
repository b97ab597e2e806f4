"""The alerts of deploy/prometheus/alerts.yml, unit-tested by ``promtool test rules``.

deploy/prometheus/alerts_test.yml feeds each alert series and states what it must do: fire on
its condition, stay silent on a healthy service. Here promtool runs it, every alert must have
both kinds of case, and a broken expectation or a broken alert makes promtool fail.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.deploy import checkers as c

PROMETHEUS = c.DEPLOY / "prometheus"
ALERTS_TEST = PROMETHEUS / "alerts_test.yml"


def copy_with(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """The alerts and their tests copied to ``tmp_path``, ``old`` replaced once by ``new`` in ``name``."""
    for f in ("alerts.yml", "alerts_test.yml"):
        shutil.copy(PROMETHEUS / f, tmp_path / f)
    text = (tmp_path / name).read_text()
    assert old in text, old
    (tmp_path / name).write_text(text.replace(old, new, 1))
    return tmp_path / "alerts_test.yml"


def test_every_alert_fires_on_its_condition_and_stays_silent_on_a_healthy_service():
    assert c.promtool_test_problems(ALERTS_TEST) == []


def test_every_alert_has_a_firing_and_a_silent_case():
    rules, tests = c.load_yaml(PROMETHEUS / "alerts.yml"), c.load_yaml(ALERTS_TEST)
    assert tests["rule_files"] == ["alerts.yml"]
    assert c.alert_test_coverage_problems(rules, tests) == []


def test_the_alert_tests_fail_on_a_broken_expectation(tmp_path):
    broken = copy_with(tmp_path, "alerts_test.yml", "Dead letters are 2% of", "Dead letters are 3% of")
    assert c.promtool_test_problems(broken) == [
        "DedupDeadLettersRising fires when all reasons together exceed 1% of the input: DedupDeadLettersRising at 20m"
    ]


# Each alert as it would be written against unlabelled series: it matches nothing once the
# series are labelled, so its firing case fails.
UNLABELLED = [
    (
        "sum without (reason) (rate(dedup_dead_lettered_total[10m]))",
        "rate(dedup_dead_lettered_total[10m])",
        "DedupDeadLettersRising at 20m",
    ),
    (
        "sum without (rule) (rate(dedup_late_total[10m]))",
        "rate(dedup_late_total[10m])",
        "DedupLateRecordsRising at 20m",
    ),
    (
        "and on (instance, job) max by (instance, job) (dedup_kafka_lag) > 0",
        "and dedup_kafka_lag > 0",
        "DedupQueryStalled at 16m",
    ),
]


@pytest.mark.parametrize("labelled,unlabelled,fails", UNLABELLED, ids=[f[2].split()[0] for f in UNLABELLED])
def test_the_alert_tests_catch_an_expression_that_ignores_the_labels(tmp_path, labelled, unlabelled, fails):
    broken = copy_with(tmp_path, "alerts.yml", labelled, unlabelled)
    assert [p.rpartition(": ")[2] for p in c.promtool_test_problems(broken)] == [fails]


def test_the_alert_tests_catch_a_silent_case_that_fires(tmp_path):
    broken = copy_with(tmp_path, "alerts.yml", "> 0.01", "> 0.001")  # 0.5% dead letters now fire
    assert c.promtool_test_problems(broken) == [
        "DedupDeadLettersRising stays silent at 0.5% of the input: DedupDeadLettersRising at 30m"
    ]


def test_a_rule_file_that_is_not_there_fails_every_firing_case(tmp_path):
    # promtool only warns about it: the firing cases are what fail
    broken = copy_with(tmp_path, "alerts_test.yml", "  - alerts.yml", "  - missing.yml")
    warning, *failed = c.promtool_test_problems(broken)
    assert warning == f"WARNING: no file match pattern {tmp_path / 'missing.yml'}"
    assert sorted(p.rpartition(": ")[2].split()[0] for p in failed) == sorted(
        c.alert_names(c.load_yaml(PROMETHEUS / "alerts.yml"))
    )


def test_promtool_names_a_test_file_that_does_not_load(tmp_path):
    broken = copy_with(tmp_path, "alerts_test.yml", "interval: 1m", "interval: 1 minute")
    problems = c.promtool_test_problems(broken)
    assert problems and "1 minute" in " ".join(problems), problems


def test_the_coverage_check_fails_on_an_alert_without_a_firing_or_a_silent_case():
    rules = {
        "groups": [
            {
                "rules": [
                    {"alert": "A", "expr": "up == 0"},
                    {"alert": "B", "expr": "up == 0"},
                    {"record": "r", "expr": "up"},
                ]
            }
        ]
    }
    tests = {
        "tests": [
            {
                "alert_rule_test": [
                    {"alertname": "A", "eval_time": "5m", "exp_alerts": [{"exp_labels": {}}]},
                    {"alertname": "B", "eval_time": "5m", "exp_alerts": []},
                    {"alertname": "C", "eval_time": "5m"},
                ]
            }
        ]
    }
    assert c.alert_test_coverage_problems(rules, tests) == [
        "alert A: no silent case",
        "alert B: no firing case",
        "test of C: no such alert",
    ]
