"""The deployment files under deploy/, checked statically (no Docker engine, no network).

Each check runs on the real files, and once on a deliberately broken sample to show it can fail.
What the application reads and exports is derived from the application itself
(``app._settings.Settings``, ``domain._accounting.Accounting`` through ``app._metrics_server``);
the metric names are those of the service's own registry (``adapters.metrics._catalog``).
"""

from __future__ import annotations

import json
import re

import pytest

from adapters.metrics import CATALOG
from adapters.spark.runtime import DEFAULT_CONF
from domain import Accounting
from tests.deploy import checkers as c

DOCKERFILE = c.DEPLOY / "Dockerfile"
COMPOSE = c.DEPLOY / "compose.yaml"
K8S = c.DEPLOY / "k8s"
PROMETHEUS = c.DEPLOY / "prometheus"
GRAFANA = c.DEPLOY / "grafana"
SPARK_KAFKA_POM = c.REPO / "deploy/local/jars/spark-kafka/pom.xml"
IMAGE_NAME = "streamdedup"
METRICS_PORT = 9108
SPARK_UI_PORT = 4040


@pytest.fixture(scope="module")
def dockerfile() -> c.Dockerfile:
    return c.parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def image_env(dockerfile) -> dict[str, str]:
    """The environment the image gives every container (the final stage's ENV)."""
    return c.stage_environment(dockerfile, dockerfile.final)


@pytest.fixture(scope="module")
def compose() -> dict:
    return c.load_yaml(COMPOSE)


@pytest.fixture(scope="module")
def k8s() -> list[tuple[str, dict]]:
    return c.k8s_documents(K8S)


@pytest.fixture(scope="module")
def sparkapp(k8s) -> dict:
    [app] = c.find_kind(k8s, "SparkApplication")
    return app


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return c.exported_metric_names()


def project_version() -> str:
    return re.search(r'^version\s*=\s*"([^"]+)"', (c.REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)


def the_image() -> str:
    return f"{IMAGE_NAME}:{project_version()}"


# ------------------------------------------------------------------------ the Dockerfile parser


def test_the_parser_joins_continuation_lines_and_skips_comments():
    parsed = c.parse_dockerfile(
        "# syntax=docker/dockerfile:1\nARG V=1\nFROM python:3.11 AS build\n"
        "RUN a \\\n  # a comment inside the continuation\n    && b\n"
        'CMD ["x", "y"]\n'
    )
    assert parsed.global_args == {"V": "1"}
    [stage] = parsed.stages
    assert (stage.name, stage.base) == ("build", "python:3.11")
    assert [(i.keyword, i.value, i.line) for i in stage.instructions] == [
        ("RUN", "a && b", 4),
        ("CMD", '["x", "y"]', 7),
    ]
    assert stage.last("CMD").exec_form == ["x", "y"]


@pytest.mark.parametrize(
    "text, error",
    [
        ("FROM a:1\nRUN x \\\n", "ends inside a continuation"),
        ("FROM a:1\nRUNN x\n", "unknown instruction 'RUNN'"),
        ("RUN x\nFROM a:1\n", "RUN before the first FROM"),
        ("# only a comment\n", "no FROM"),
    ],
)
def test_the_parser_rejects_broken_dockerfiles(text, error):
    with pytest.raises(c.DockerfileError, match=error):
        c.parse_dockerfile(text)


def test_the_dockerfile_parses_into_maven_build_and_runtime_stages(dockerfile):
    assert [s.name for s in dockerfile.stages] == ["jars", "build", "runtime"]


# ---------------------------------------------------------------------- the Dockerfile's content


def test_every_copy_source_exists_in_the_build_context(dockerfile):
    ignore = c.read_ignore_file(DOCKERFILE.with_name("Dockerfile.dockerignore"))
    assert c.dockerfile_source_problems(dockerfile, c.REPO, ignore) == []


def test_the_copy_check_fails_on_missing_ignored_and_unknown_stage_sources(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    broken = c.parse_dockerfile(
        "FROM a:1 AS one\nCOPY src /app/src\nCOPY nothing.txt /x\nCOPY --from=nowhere /a /b\nCOPY ../escape /y\n"
    )
    problems = c.dockerfile_source_problems(broken, tmp_path, ["src"])
    assert problems == [
        "line 2: src is excluded from the build context by the .dockerignore",
        f"line 3: nothing.txt does not exist in the build context {tmp_path}",
        "line 4: COPY --from=nowhere names no earlier stage",
        "line 5: ../escape is outside the build context",
    ]


def test_the_runtime_stage_is_pinned_non_root_with_a_healthcheck_and_exec_form_commands(dockerfile):
    assert c.dockerfile_runtime_problems(dockerfile) == []


def test_the_runtime_check_fails_without_user_expose_healthcheck_and_entrypoint():
    broken = c.parse_dockerfile("FROM python:3.11\nCMD spark-submit app.py\n")
    assert c.dockerfile_runtime_problems(broken) == [
        "the final stage runs as root: add a USER with a non-root numeric uid",
        "the final stage EXPOSEs no port",
        "the final stage has no HEALTHCHECK",
        "the final stage has no ENTRYPOINT",
    ]


def test_hadolint_finds_nothing_in_the_dockerfile():
    assert c.hadolint_problems(DOCKERFILE) == []


def test_hadolint_fails_on_an_unpinned_base_a_root_user_and_shell_form_commands(tmp_path):
    broken = (
        DOCKERFILE.read_text()
        .replace("FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime", "FROM python:latest AS runtime")
        .replace("USER 185:185", "USER root")
        .replace(
            'ENTRYPOINT ["/usr/bin/tini", "--", "/opt/streamdedup/entrypoint.sh"]',
            "ENTRYPOINT /usr/bin/tini -- /opt/streamdedup/entrypoint.sh",
        )
    )
    (tmp_path / "Dockerfile").write_text(broken)
    codes = {problem.split()[2] for problem in c.hadolint_problems(tmp_path / "Dockerfile")}
    assert {"DL3007", "DL3002", "DL3025"} <= codes, codes


def test_hadolint_fails_on_a_dockerfile_that_does_not_parse(tmp_path):
    (tmp_path / "Dockerfile").write_text(DOCKERFILE.read_text().replace("WORKDIR /var/lib", "WORKDIRR /var/lib"))
    [problem] = c.hadolint_problems(tmp_path / "Dockerfile")
    assert "DL1000" in problem or "unexpected" in problem


def test_the_kafka_connector_jars_are_fetched_by_maven_from_the_spark_kafka_pom(dockerfile):
    jars = dockerfile.stage("jars")
    [copy] = jars.all("COPY")
    sources, dest = c.copy_sources(copy)
    assert sources == [SPARK_KAFKA_POM.relative_to(c.REPO).as_posix()]
    [mvn] = [r for r in jars.all("RUN") if "mvn" in r.body]
    assert "dependency:copy-dependencies" in mvn.body and f"-f {dest}" in mvn.body
    runtime_copies = [c.copy_sources(i) for i in dockerfile.final.all("COPY") if i.flags.get("from") == "jars"]
    assert runtime_copies == [(["/out/jars/"], "/opt/streamdedup/cache/jars/spark-kafka/")]
    assert "-DoutputDirectory=/out/jars" in mvn.body


def test_one_spark_release_is_named_everywhere_it_is_pinned(sparkapp):
    """pyproject's PySpark, the Kafka connector the pom fetches, the SparkApplication's
    sparkVersion and the changelog's compatibility row name the same release (a move to a new
    Spark release changes them together: docs/guides/move-to-a-new-spark-release.md)."""
    pinned = re.search(r"pyspark\[sql\]==([\d.]+)", (c.REPO / "pyproject.toml").read_text()).group(1)
    connectors = [name for name in c.pom_jar_names(SPARK_KAFKA_POM) if name.startswith("spark-")]
    assert connectors and all(name.endswith(f"_2.13-{pinned}.jar") for name in connectors), connectors
    assert sparkapp["spec"]["sparkVersion"] == pinned
    version = re.search(r'^version = "([^"]+)"', (c.REPO / "pyproject.toml").read_text(), re.M).group(1)
    [row] = [line for line in (c.REPO / "CHANGELOG.md").read_text().splitlines() if line.startswith(f"| {version} |")]
    assert row.split("|")[3].strip() == pinned, row


def jar_dirs(dockerfile) -> list[str]:
    """The directories whose jars the default command puts on the classpath (``--jars D/*.jar,…``)."""
    cmd = dockerfile.final.last("CMD").exec_form
    return [glob.removesuffix("/*.jar") for glob in cmd[cmd.index("--jars") + 1].split(",")]


def test_the_default_command_is_spark_submit_of_the_entrypoint_module(dockerfile):
    cmd = dockerfile.final.last("CMD").exec_form
    assert cmd[0] == "spark-submit" and cmd[-1] == "/app/src/app/spark_submit.py"
    assert c.resolve_container_path(dockerfile, cmd[-1]) == c.REPO / "src/app/spark_submit.py"


def test_the_default_command_loads_the_connector_and_the_operator_from_the_engines_cache(dockerfile, image_env):
    cache = image_env["STREAMDEDUP_CACHE"]
    assert jar_dirs(dockerfile) == [f"{cache}/jars/spark-kafka", f"{cache}/jars/streamdedup-spark"]
    [(_, maven_dest)] = [c.copy_sources(i) for i in dockerfile.final.all("COPY") if i.flags.get("from") == "jars"]
    assert maven_dest.rstrip("/") == jar_dirs(dockerfile)[0]
    [operator] = [r for r in dockerfile.stage("build").all("RUN") if "operator_jar" in r.body]
    # the operator's Kafka writer compiles against the connector: the build stage has it before compiling
    build = dockerfile.stage("build").instructions
    [connector] = [i for i in build if i.keyword == "COPY" and i.flags.get("from") == "jars"]
    assert c.copy_sources(connector)[1].rstrip("/") == jar_dirs(dockerfile)[0]
    assert build.index(connector) < build.index(operator)
    assert c.stage_environment(dockerfile, dockerfile.stage("build"))["STREAMDEDUP_CACHE"] == cache
    assert any(
        c.copy_sources(i) == ([cache + "/"], cache + "/") and i.flags.get("from") == "build"
        for i in dockerfile.final.all("COPY")
    ), "the operator jar the build stage compiled is copied"


def test_the_entrypoint_and_healthcheck_scripts_come_from_the_repository(dockerfile):
    entrypoint = dockerfile.final.last("ENTRYPOINT").exec_form
    assert entrypoint[:2] == ["/usr/bin/tini", "--"], "tini as PID 1 forwards signals and reaps zombies"
    assert c.resolve_container_path(dockerfile, entrypoint[2]) == c.DEPLOY / "docker/entrypoint.sh"
    health = c.healthcheck_command(dockerfile.final.last("HEALTHCHECK"))
    assert health[0] == "python"
    assert c.resolve_container_path(dockerfile, health[1]) == c.DEPLOY / "docker/healthcheck.py"


def test_the_image_exposes_the_metrics_port_and_the_spark_ui(dockerfile, image_env):
    assert c.exposed_ports(dockerfile.final) == {METRICS_PORT, SPARK_UI_PORT}
    assert image_env["DEDUP_METRICS_PORT"] == str(METRICS_PORT)


def test_the_image_environment_names_only_settings_the_application_reads(image_env):
    assert c.env_name_problems(image_env, "Dockerfile ENV") == []
    assert c.settings_problems(image_env, "Dockerfile ENV", engine="spark") == []


def test_the_image_spark_home_is_the_pip_pyspark_of_the_image_python(dockerfile, image_env):
    version = dockerfile.global_args["PYTHON_VERSION"]
    assert dockerfile.final.base == f"python:{version}-slim-bookworm"
    assert image_env["SPARK_HOME"] == f"/opt/venv/lib/python{version}/site-packages/pyspark"
    assert image_env["PYSPARK_PYTHON"] == "/opt/venv/bin/python"


# --------------------------------------------------------------------- settings: names and values


def test_the_valid_env_names_come_from_the_settings_model():
    names = [
        "DEDUP_SOURCE",
        "DEDUP_RULES__WEB__WINDOW",
        "DEDUP_RULES__MOBILE",
        "DEDUP_SPARK__CHECKPOINT",
        "DEDUP_KAFKA__CONFIG",
        "DEDUP_SPARK__CONF__spark.sql.shuffle.partitions",
        "DEDUP_CONFIG",
    ]
    assert c.env_name_problems(names, "sample") == []


def test_the_env_name_check_fails_on_names_the_application_ignores():
    names = ["DEDUP_SPARK__CHECKPOINT_DIR", "DEDUP_RULES__WEB__WINDOWS", "DEDUP_METRICSPORT", "OTHER_VAR"]
    assert c.env_name_problems(names, "sample") == [
        "sample: DEDUP_SPARK__CHECKPOINT_DIR is not a setting the application reads",
        "sample: DEDUP_RULES__WEB__WINDOWS is not a setting the application reads",
        "sample: DEDUP_METRICSPORT is not a setting the application reads",
    ]


def test_the_config_key_check_fails_on_keys_the_application_ignores():
    config = {
        "engine": "spark",
        "spark": {"checkpoint_dir": "x", "trigger": "1 second"},
        "rules": {"WEB": {"windw": "10m"}},
        "metrics": 1,
    }
    assert c.config_key_problems(config, "sample") == [
        "sample: spark.checkpoint_dir is not a setting the application reads",
        "sample: rules.WEB.windw is not a setting the application reads",
        "sample: metrics is not a setting the application reads",
    ]


def test_the_settings_check_fails_on_a_bad_value_with_the_applications_message():
    assert c.settings_problems({"DEDUP_RULES__WEB__WINDOW": "0"}, "sample") == [
        ("sample: invalid setting rules.WEB.window (DEDUP_RULES__WEB__WINDOW): must be a positive duration (got '0')")
    ]


def test_the_shadowing_check_fails_on_a_config_key_an_env_var_overrides():
    config = {"metrics_port": 9100, "rules": {"WEB": {"window": "10m"}}}
    assert c.shadowed_config_problems(["DEDUP_METRICS_PORT", "DEDUP_RULES__WEB__WINDOW"], config, "sample") == [
        "sample: config key metrics_port is overridden by the environment variable DEDUP_METRICS_PORT",
        "sample: config key rules.web.window is overridden by the environment variable DEDUP_RULES__WEB__WINDOW",
    ]


# ----------------------------------------------------------------------------------- compose


def test_compose_runs_kafka_in_kraft_mode_redis_the_service_prometheus_and_grafana(compose):
    services = compose["services"]
    assert {"kafka", "redis", "dedup", "prometheus", "grafana"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    kafka_env = c.compose_env(services["kafka"])
    assert "controller" in kafka_env["KAFKA_PROCESS_ROLES"] and not any("ZOOKEEPER" in k for k in kafka_env)
    assert services["redis"]["image"].startswith("redis:")


def test_compose_builds_the_service_from_the_dockerfile_and_runs_its_default_command(compose):
    dedup = compose["services"]["dedup"]
    assert (COMPOSE.parent / dedup["build"]["context"]).resolve() == c.REPO
    assert (c.REPO / dedup["build"]["dockerfile"]).resolve() == DOCKERFILE
    assert dedup["image"] == the_image()
    assert "command" not in dedup and "entrypoint" not in dedup, "the image's spark-submit command runs"


def test_compose_follows_the_compose_specification():
    assert c.compose_schema_problems(COMPOSE) == []


def test_the_compose_schema_check_fails_on_an_unknown_key_and_a_wrong_type(tmp_path):
    broken = COMPOSE.read_text().replace("    restart:", "    restartt:", 1)
    (tmp_path / "compose.yaml").write_text(broken.replace("services:", "services: 3\nx:", 1))
    assert c.compose_schema_problems(tmp_path / "compose.yaml") != []
    (tmp_path / "compose.yaml").write_text(broken)
    [problem] = c.compose_schema_problems(tmp_path / "compose.yaml")
    assert "'restartt' was unexpected" in problem


def test_compose_ports_are_loopback_only_and_mounts_exist(compose):
    assert c.compose_problems(compose, COMPOSE.parent) == []


def test_the_compose_check_fails_on_public_ports_and_missing_mounts(tmp_path):
    broken = {
        "services": {
            "x": {
                "ports": ["9108:9108", "127.0.0.1:4040:4040"],
                "volumes": ["./nowhere:/etc/x:ro", "named:/data"],
                "build": {"context": ".", "dockerfile": "missing/Dockerfile"},
            }
        }
    }
    assert c.compose_problems(broken, tmp_path) == [
        "service x: port 9108 is published on all interfaces, not 127.0.0.1",
        "service x: mounted ./nowhere does not exist",
        f"service x: build file {tmp_path}/missing/Dockerfile does not exist",
    ]


def service_settings_env(image_env: dict, service: dict) -> dict[str, str]:
    """What a compose service's container sees: the image's ENV overlaid with the service's."""
    return {**image_env, **c.compose_env(service)}


def compose_settings(image_env: dict, service: dict) -> c.Settings:
    return c.load_deployed_settings(service_settings_env(image_env, service))


@pytest.mark.parametrize("name", ["dedup", "dedup-kafka"])
def test_compose_services_set_only_settings_the_application_reads_and_they_validate(compose, image_env, name):
    service = compose["services"][name]
    assert c.env_name_problems(c.compose_env(service), f"compose {name}") == []
    overrides = {} if service.get("command") else {"engine": "spark"}  # spark_submit.py forces it
    assert c.settings_problems(service_settings_env(image_env, service), f"compose {name}", **overrides) == []


@pytest.mark.parametrize("name", ["dedup", "dedup-kafka"])
def test_compose_services_publish_and_serve_metrics_on_the_same_port(compose, image_env, name):
    service = compose["services"][name]
    settings = c.load_deployed_settings(service_settings_env(image_env, service))
    assert settings.metrics_port == METRICS_PORT
    assert METRICS_PORT in {target for _, _, target in c.published_ports(service)}


@pytest.mark.parametrize("name", ["dedup", "dedup-kafka"])
def test_compose_services_read_and_write_topics_the_stack_creates(compose, name):
    topics = c.kafka_topics_created(compose["services"]["kafka-init"])
    brokers = {"kafka:9092"}
    assert c.kafka_uri_problems(c.compose_env(compose["services"][name]), brokers, topics, name) == []


def test_the_kafka_uri_check_fails_on_unknown_brokers_and_topics():
    env = {"DEDUP_SOURCE": "kafka://localhost:9092/events?group=g", "DEDUP_SINK": "kafka://kafka:9092/uniq"}
    assert c.kafka_uri_problems(env, {"kafka:9092"}, {"events", "unique"}, "x") == [
        "x: DEDUP_SOURCE points at localhost:9092, not a broker of the stack ['kafka:9092']",
        "x: DEDUP_SINK uses topic 'uniq', which is not created",
    ]


# ------------------------------------------------------------------------------ Prometheus


def compose_metrics_ports(compose: dict, image_env: dict) -> dict[str, int]:
    """Service name -> the port its /metrics is served on, from its effective settings."""
    ports = {}
    for name, service in compose["services"].items():
        if service.get("image", "").startswith(IMAGE_NAME + ":"):
            ports[name] = c.load_deployed_settings(service_settings_env(image_env, service)).metrics_port
    return ports


def test_prometheus_scrapes_each_service_on_its_metrics_port(compose, image_env):
    prometheus = c.load_yaml(PROMETHEUS / "prometheus.yml")
    assert c.scrape_problems(prometheus, compose_metrics_ports(compose, image_env)) == []
    assert {host for _, host, _ in c.scrape_targets(prometheus)} == {"dedup", "dedup-kafka"}


def test_the_scrape_check_fails_on_a_wrong_port_or_host():
    prometheus = {"scrape_configs": [{"job_name": "j", "static_configs": [{"targets": ["dedup:9100", "ghost:9108"]}]}]}
    assert c.scrape_problems(prometheus, {"dedup": 9108}) == [
        "job j: scrapes dedup:9100, but its metrics port is 9108",
        "job j: target ghost is not a service serving /metrics ['dedup']",
    ]


def test_promtool_passes_the_prometheus_config_and_its_alert_rules():
    assert c.promtool_problems("config", PROMETHEUS / "prometheus.yml") == []  # loads alerts.yml as well
    assert c.promtool_problems("rules", PROMETHEUS / "alerts.yml") == []


def test_promtool_fails_on_a_broken_config_and_broken_rules(tmp_path):
    config = (PROMETHEUS / "prometheus.yml").read_text()
    (tmp_path / "prometheus.yml").write_text(config.replace("alerts.yml", "missing.yml"))
    assert "missing.yml" in " ".join(c.promtool_problems("config", tmp_path / "prometheus.yml"))
    rules = (PROMETHEUS / "alerts.yml").read_text()
    (tmp_path / "alerts.yml").write_text(rules.replace("rate(", "ratee(", 1))
    [problem] = c.promtool_problems("rules", tmp_path / "alerts.yml")
    assert 'unknown function with name "ratee"' in problem


def test_prometheus_loads_the_alert_rules_from_its_mounted_directory(compose):
    prometheus = c.load_yaml(PROMETHEUS / "prometheus.yml")
    assert [(PROMETHEUS / f).is_file() for f in prometheus["rule_files"]] == [True]
    service = compose["services"]["prometheus"]
    assert "./prometheus:/etc/prometheus:ro" in service["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in service["command"]


def test_every_count_of_the_accounting_and_every_catalog_metric_is_exported(exported):
    counters = {f"dedup_{'records_in' if n == 'in' else n}_total" for n in Accounting().as_dict()}
    assert counters == {
        "dedup_records_in_total",
        "dedup_out_total",
        "dedup_duplicates_total",
        "dedup_dead_lettered_total",
        "dedup_skipped_total",
        "dedup_late_total",
        "dedup_invalid_total",
        "dedup_passed_through_total",
        "dedup_invalidations_total",
        "dedup_rejected_notifications_total",
    }
    assert counters <= exported
    assert {m.exported for m in CATALOG.values() if m.kind != "histogram"} <= exported
    assert {"dedup_batch_duration_seconds_bucket", "process_cpu_seconds_total"} <= exported


def trigger_ms(trigger: str) -> int:
    """Spark's trigger interval ("5 seconds", "500 ms", "1 minute") in milliseconds."""
    number, unit = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", trigger.lower()).groups()
    factors = {
        "ms": 1,
        "millisecond": 1,
        "milliseconds": 1,
        "s": 1000,
        "second": 1000,
        "seconds": 1000,
        "m": 60_000,
        "minute": 60_000,
        "minutes": 60_000,
    }
    return int(float(number) * factors[unit or "ms"])


def alert_expr(name: str) -> str:
    rules = c.load_yaml(PROMETHEUS / "alerts.yml")
    [expr] = [r["expr"] for g in rules["groups"] for r in g["rules"] if r.get("alert") == name]
    return expr


def test_the_batch_duration_alert_and_panel_fire_above_the_trigger_the_deployments_configure(
    compose, image_env, sparkapp, k8s, dashboard
):
    seconds = re.search(r">\s*(\d+)\s*$", alert_expr("DedupBatchSlowerThanTrigger")).group(1)
    threshold = int(seconds) * 1000
    triggers = {
        "compose": compose_settings(image_env, compose["services"]["dedup"]).spark.trigger,
        "kubernetes": driver_settings(sparkapp, k8s, image_env).spark.trigger,
    }
    assert {name: trigger_ms(t) for name, t in triggers.items()} == {"compose": threshold, "kubernetes": threshold}
    [panel] = [p for p in c.dashboard_panels(dashboard) if p["title"] == "Batch duration"]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1]["value"] * 1000 == threshold


def test_the_operations_guide_names_only_exported_metrics(exported):
    histograms = {m.exported for m in CATALOG.values() if m.kind == "histogram"}  # by their own name too
    for doc in (c.DEPLOY / "README.md", K8S / "SIZING.md", *sorted((c.DEPLOY.parent / "docs").rglob("*.md"))):
        named = set(re.findall(r"\bdedup_[a-z_]+\b", doc.read_text()))
        assert named - exported - histograms == set(), doc


REQUIRED_ALERTS = {
    "DedupDown",
    "DedupQueryStalled",
    "DedupDeadLettersRising",
    "DedupLateRecordsRising",
    "DedupConsumerLagGrowing",
    "DedupBatchSlowerThanTrigger",
    "DedupLatencyAboveObjective",
    "DedupStateGrowingUnbounded",
    "DedupBatchesFailing",
}


def test_alerts_name_exported_metrics_and_each_has_a_runbook_in_the_operations_guide(exported):
    rules = c.load_yaml(PROMETHEUS / "alerts.yml")
    assert set(c.alert_names(rules)) == REQUIRED_ALERTS
    assert c.alert_problems(rules, exported, (c.DEPLOY / "README.md").read_text()) == []


def test_the_alert_check_fails_on_unknown_metrics_and_missing_runbooks(exported):
    rules = {
        "groups": [
            {
                "rules": [
                    {
                        "alert": "A",
                        "expr": "rate(dedup_duplicate_total[5m]) > 0",
                        "labels": {"severity": "warning"},
                        "annotations": {"summary": "s", "runbook": "deploy/README.md#a"},
                    },
                    {"alert": "B", "expr": "ratee(dedup_out_total[1m]) > 0", "annotations": {"runbook": "x#nowhere"}},
                ]
            }
        ]
    }
    assert c.alert_problems(rules, exported, "## A\n") == [
        "alert A: dedup_duplicate_total is not a metric the service exports",
        "alert B: no severity label",
        "alert B: no summary",
        "alert B: runbook #nowhere is not a heading of deploy/README.md",
    ]


def test_promql_names_skip_labels_ranges_groupings_numbers_and_strings():
    expr = (
        'sum by (job) (rate(dedup_out_total{job="x", le="1e6"}[5m] offset 1h)) / on(job) group_left '
        "clamp_min(deriv(rate(dedup_records_in_total[30m])[2h:5m]), 1e6) > bool 0.5 unless up == 0"
    )
    assert c.promql_names(expr) == (
        {"dedup_out_total", "dedup_records_in_total", "up"},
        {"sum", "rate", "clamp_min", "deriv"},
    )


# --------------------------------------------------------------------------------- Grafana


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads((GRAFANA / "dashboards/streamdedup.json").read_text())


def provisioned_datasources() -> list[dict]:
    return c.load_yaml(GRAFANA / "provisioning/datasources/prometheus.yaml")["datasources"]


def test_the_dashboard_queries_only_exported_metrics_through_the_provisioned_datasource(dashboard, exported):
    uids = {d["uid"] for d in provisioned_datasources()}
    assert c.dashboard_problems(dashboard, exported, uids) == []


def test_the_dashboards_promql_parses(dashboard):
    exprs = c.dashboard_exprs(dashboard)
    assert len(exprs) >= len(REQUIRED_PANELS)
    assert c.promql_syntax_problems(exprs) == []


def test_the_promql_check_fails_on_an_unknown_function_and_an_unclosed_bracket():
    assert c.promql_syntax_problems(
        {
            "panel 'ok' #1": "sum(rate(dedup_out_total[$__rate_interval]))",
            "panel 'p' #1": "ratee(dedup_out_total[5m])",
            "panel 'q' #2": "sum(rate(dedup_out_total[5m])",
        }
    ) == [
        "panel 'p' #1: could not parse expression: 1:1: parse error: unknown function with name \"ratee\"",
        "panel 'q' #2: could not parse expression: 1:30: parse error: unclosed left parenthesis",
    ]


def test_the_dashboard_check_fails_on_an_unknown_metric_and_datasource(exported):
    broken = {
        "panels": [
            {
                "title": "p",
                "type": "timeseries",
                "datasource": {"uid": "other"},
                "targets": [{"expr": "rate(dedup_duplicates_dropped_total[1m])"}],
            },
            {"title": "empty", "type": "timeseries"},
        ]
    }
    assert c.dashboard_problems(broken, exported, {"prometheus"}) == [
        "panel 'p': dedup_duplicates_dropped_total is not a metric the service exports",
        "panel 'p': datasource uid 'other' is not provisioned ['prometheus']",
        "panel 'empty': no query",
    ]


REQUIRED_PANELS = [
    "input rate",
    "output rate",
    "duplicates dropped",
    "dead letters",
    "late records",
    "state rows",
    "batch duration",
    "kafka lag",
]


def test_the_dashboard_has_the_operators_panels(dashboard):
    titles = [p["title"].lower() for p in c.dashboard_panels(dashboard)]
    assert [t for t in REQUIRED_PANELS if t not in titles] == []


def test_grafana_is_provisioned_with_the_prometheus_of_the_stack_and_the_dashboard_directory(compose):
    grafana = compose["services"]["grafana"]
    [datasource] = provisioned_datasources()
    prometheus_port = c.published_ports(compose["services"]["prometheus"])[0][2]
    assert datasource["url"] == f"http://prometheus:{prometheus_port}"
    [provider] = c.load_yaml(GRAFANA / "provisioning/dashboards/streamdedup.yaml")["providers"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    home = c.compose_env(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == provider["options"]["path"] + "/streamdedup.json"


# ------------------------------------------------------------------------------ Kubernetes


def test_every_manifest_parses_is_named_and_in_the_namespace(k8s):
    assert c.manifest_problems(k8s, "streamdedup") == []


def test_every_manifest_validates_against_the_kubernetes_api_schema(k8s):
    assert c.k8s_schema_problems(k8s) == []


def test_the_kubernetes_schema_check_fails_on_unknown_fields_and_wrong_types(tmp_path):
    service = (K8S / "service.yaml").read_text()
    (tmp_path / "a.yaml").write_text(service.replace("selector:", "selectr:"))
    (tmp_path / "b.yaml").write_text(service.replace("port: 9108", "port: metrics"))
    assert c.k8s_schema_problems(c.k8s_documents(tmp_path)) == [
        "a.yaml: Service/streamdedup-metrics: spec: Additional properties are not allowed ('selectr' was unexpected)",
        "b.yaml: Service/streamdedup-metrics: spec.ports.0.port: 'metrics' is not of type 'integer'",
    ]


def test_yamllint_passes_every_yaml_file_under_deploy():
    files = sorted(c.DEPLOY.rglob("*.yaml")) + sorted(c.DEPLOY.rglob("*.yml"))
    assert len(files) >= 12
    assert c.yamllint_problems(files) == []


def test_yamllint_fails_on_a_duplicate_key_and_broken_indentation(tmp_path):
    broken = (
        COMPOSE.read_text()
        .replace("services:\n", "services:\n  redis:\n    image: redis:7\n", 1)
        .replace("\n    image:", "\n     image:", 1)
    )
    (tmp_path / "compose.yaml").write_text(broken)
    problems = c.yamllint_problems([tmp_path / "compose.yaml"])
    assert any('duplication of key "redis"' in p for p in problems), problems
    assert any("indentation" in p or "syntax error" in p for p in problems), problems


def test_the_manifest_check_fails_on_an_unnamed_or_misplaced_document():
    docs = [
        ("a.yaml", {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x", "namespace": "default"}}),
        ("b.yaml", {"kind": "Secret", "metadata": {}}),
    ]
    assert c.manifest_problems(docs, "streamdedup") == [
        "a.yaml: ConfigMap/x is not in namespace streamdedup",
        "b.yaml: a document without apiVersion, kind or metadata.name",
    ]


def test_the_kustomization_lists_every_manifest():
    listed = c.load_yaml(K8S / "kustomization.yaml")["resources"]
    present = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present


def test_the_spark_application_uses_only_fields_of_the_operator_api(sparkapp):
    assert c.sparkapp_schema_problems(sparkapp) == []


def test_the_spark_application_schema_check_fails_on_unknown_fields():
    broken = {
        "spec": {
            "type": "Python",
            "imagee": "x",
            "driver": {"cores": 1, "livenessProbe": {}},
            "executor": {"instances": 1, "ports": []},
            "deps": {"jar": []},
        }
    }
    assert c.sparkapp_schema_problems(broken) == [
        "spec.deps.jar is not a SparkApplication field",
        "spec.driver.livenessProbe is not a SparkApplication field",
        "spec.imagee is not a SparkApplication field",
    ]


def test_the_spark_application_runs_the_images_entrypoint_module_with_its_jars(sparkapp, dockerfile):
    spec = sparkapp["spec"]
    assert (spec["type"], spec["mode"], spec["image"]) == ("Python", "cluster", the_image())
    cmd_app = dockerfile.final.last("CMD").exec_form[-1]
    assert spec["mainApplicationFile"] == "local://" + cmd_app
    classpath = ":".join(f"{d}/*" for d in jar_dirs(dockerfile))
    assert spec["sparkConf"]["spark.driver.extraClassPath"] == classpath
    assert spec["sparkConf"]["spark.executor.extraClassPath"] == classpath
    assert spec["sparkVersion"] == re.search(
        r"pyspark\[sql\]==([\d.]+)", (c.REPO / "pyproject.toml").read_text()
    ).group(1)


def driver_settings(sparkapp, k8s, image_env) -> c.Settings:
    env, _ = c.pod_env(sparkapp["spec"]["driver"], k8s)
    files = c.mounted_files(sparkapp["spec"]["driver"], sparkapp["spec"], k8s)
    return c.load_deployed_settings({**image_env, **env}, files, engine="spark")


def test_the_driver_env_names_settings_and_its_secrets_resolve(sparkapp, k8s):
    env, problems = c.pod_env(sparkapp["spec"]["driver"], k8s)
    assert problems == []
    assert c.env_name_problems(env, "driver env") == []
    assert json.loads(env["DEDUP_KAFKA__CONFIG"])["security.protocol"] == "SASL_SSL"


def test_the_env_reference_check_fails_on_a_missing_secret_key(k8s):
    pod = {
        "env": [
            {
                "name": "DEDUP_KAFKA__CONFIG",
                "valueFrom": {"secretKeyRef": {"name": "streamdedup-kafka", "key": "config.json"}},
            }
        ]
    }
    assert c.pod_env(pod, k8s)[1] == ["env DEDUP_KAFKA__CONFIG: Secret 'streamdedup-kafka' has no key 'config.json'"]


def test_the_config_map_holds_only_settings_and_validates_as_the_driver_sees_it(sparkapp, k8s, image_env):
    [config_map] = c.find_kind(k8s, "ConfigMap", "streamdedup-config")
    config = c.yaml.safe_load(config_map["data"]["dedup.yaml"])
    assert c.config_key_problems(config, "ConfigMap dedup.yaml") == []
    env, _ = c.pod_env(sparkapp["spec"]["driver"], k8s)
    files = c.mounted_files(sparkapp["spec"]["driver"], sparkapp["spec"], k8s)
    assert env["DEDUP_CONFIG"] in files, "DEDUP_CONFIG names the mounted ConfigMap file"
    assert c.settings_problems({**image_env, **env}, "driver", files, engine="spark") == []
    assert c.shadowed_config_problems({**image_env, **env}, config, "driver") == []


def test_the_config_map_validates_through_load_settings_with_the_file(k8s, tmp_path):
    [config_map] = c.find_kind(k8s, "ConfigMap", "streamdedup-config")
    path = tmp_path / "dedup.yaml"
    path.write_text(config_map["data"]["dedup.yaml"])
    with c.environment({}):
        settings = c.load_settings(str(path))
    assert settings.engine == "spark" and settings.spark.state_provider == "rocksdb"
    assert set(settings.effective_rules()) == {"APP", "WEB"}


def test_the_checkpoint_is_on_the_shared_claim_mounted_in_the_driver_and_the_executors(sparkapp, k8s, image_env):
    spec = sparkapp["spec"]
    assert c.volume_problems(spec, k8s) == []
    checkpoint = driver_settings(sparkapp, k8s, image_env).spark.checkpoint
    claims = {v["name"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    for role in ("driver", "executor"):
        mounts = [m["mountPath"] for m in spec[role]["volumeMounts"] if m["name"] in claims]
        assert any(checkpoint.startswith(m.rstrip("/") + "/") for m in mounts), f"{role} does not see {checkpoint}"


def test_the_volume_check_fails_on_undeclared_mounts_missing_claims_and_single_node_claims():
    spec = {
        "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "missing"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "rwo"}},
        ],
        "driver": {"volumeMounts": [{"name": "c", "mountPath": "/x"}]},
    }
    docs = [
        (
            "p.yaml",
            {"kind": "PersistentVolumeClaim", "metadata": {"name": "rwo"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
        )
    ]
    assert c.volume_problems(spec, docs) == [
        "driver: mounts 'c', which spec.volumes does not declare",
        "volume a: no PersistentVolumeClaim missing",
        "volume b: the driver and the executors share it, it must be ReadWriteMany",
    ]


def test_the_driver_probes_get_health_on_the_metrics_port(sparkapp, k8s, image_env):
    port = driver_settings(sparkapp, k8s, image_env).metrics_port
    assert port == METRICS_PORT
    assert c.probe_problems(sparkapp["spec"]["driver"]["template"], port) == []
    ports = {p["name"]: p["containerPort"] for p in sparkapp["spec"]["driver"]["ports"]}
    assert ports["metrics"] == port


def test_the_probe_check_fails_on_a_wrong_path_or_port_and_a_missing_probe():
    template = {
        "spec": {
            "containers": [
                {
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 9108}},
                    "startupProbe": {"httpGet": {"path": "/health", "port": 8080}},
                }
            ]
        }
    }
    assert c.probe_problems(template, 9108) == [
        "livenessProbe: GET /healthz on port 9108, not /health on 9108",
        "readinessProbe: missing",
        "startupProbe: GET /health on port 8080, not /health on 9108",
    ]


def test_the_metrics_service_selects_the_driver_on_the_metrics_port(sparkapp, k8s):
    [service] = c.find_kind(k8s, "Service", "streamdedup-metrics")
    driver = sparkapp["spec"]["driver"]
    labels = {**driver["labels"], "spark-role": "driver"}  # Spark labels its driver pod spark-role=driver
    ports = {p["name"]: p["containerPort"] for p in driver["ports"]}
    assert c.service_problems(service, labels, ports, METRICS_PORT) == []


def test_the_service_check_fails_on_a_selector_or_port_that_misses_the_driver():
    service = {
        "metadata": {"name": "s", "annotations": {"prometheus.io/port": "9100"}},
        "spec": {"selector": {"app": "other"}, "ports": [{"port": 9108, "targetPort": "http"}]},
    }
    assert c.service_problems(service, {"app": "streamdedup"}, {"metrics": 9108}, 9108) == [
        "Service s: selector {'app': 'other'} matches no driver label",
        "Service s: no port forwarding to the metrics port 9108",
        "Service s: prometheus.io/port 9100 is not 9108",
    ]


def test_the_resources_agree_with_the_state_store_settings(sparkapp, k8s, image_env):
    assert c.sizing_problems(sparkapp["spec"], driver_settings(sparkapp, k8s, image_env)) == []


def test_the_sizing_check_fails_when_rocksdb_outgrows_the_overhead_or_partitions_are_too_few():
    settings = c.load_deployed_settings(
        {
            "DEDUP_SPARK__SHUFFLE_PARTITIONS": "8",
            "DEDUP_SPARK__CONF": json.dumps(
                {
                    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
                    "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "4096",
                }
            ),
        }
    )
    spec = {"executor": {"instances": 3, "cores": 4, "memoryOverhead": "2g"}}
    assert c.sizing_problems(spec, settings) == [
        "spark.shuffle_partitions 8 < 12 executor cores: some cores would hold no state partition",
        (
            "executor memoryOverhead 2048 MiB cannot hold RocksDB's 4096 MiB plus 512 MiB of JVM off-heap: "
            "the pods would be OOM-killed"
        ),
    ]


def test_the_sizing_check_holds_a_deployment_to_the_engines_rocksdb_budget_when_it_sets_none():
    settings = c.load_deployed_settings({"DEDUP_SPARK__SHUFFLE_PARTITIONS": "4"})
    spec = {"executor": {"instances": 1, "cores": 4, "memoryOverhead": "3g"}}
    budget = int(DEFAULT_CONF["spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"])
    assert c.sizing_problems(spec, settings) == [
        (
            f"executor memoryOverhead 3072 MiB cannot hold RocksDB's {budget} MiB plus 512 MiB of JVM off-heap: "
            "the pods would be OOM-killed"
        )
    ]
    roomy = {"executor": {"instances": 1, "cores": 4, "memoryOverhead": f"{budget + 1024}m"}}
    assert c.sizing_problems(roomy, settings) == []


def test_the_sizing_reasoning_is_written_next_to_the_manifests(sparkapp):
    sizing = (K8S / "SIZING.md").read_text()
    executor = sparkapp["spec"]["executor"]
    assert "100,000 events/s" in sizing
    assert f"{executor['instances']} executors x {executor['cores']} cores" in sizing
    assert f"{executor['memory']} heap + {executor['memoryOverhead']} overhead" in sizing


def test_compose_and_kubernetes_run_the_same_image(compose, sparkapp):
    images = {s["image"] for s in compose["services"].values() if s.get("image", "").startswith(IMAGE_NAME)}
    assert images == {sparkapp["spec"]["image"]} == {the_image()}


def test_the_ports_are_one_port_everywhere(compose, sparkapp, k8s, image_env, dockerfile):
    [service] = c.find_kind(k8s, "Service", "streamdedup-metrics")
    prometheus = c.load_yaml(PROMETHEUS / "prometheus.yml")
    found = {
        "Dockerfile ENV": int(image_env["DEDUP_METRICS_PORT"]),
        "compose dedup": compose_settings(image_env, compose["services"]["dedup"]).metrics_port,
        "prometheus target": c.scrape_targets(prometheus)[0][2],
        "driver settings": driver_settings(sparkapp, k8s, image_env).metrics_port,
        "k8s service": service["spec"]["ports"][0]["port"],
    }
    assert set(found.values()) == {METRICS_PORT}, found
    assert METRICS_PORT in c.exposed_ports(dockerfile.final)
