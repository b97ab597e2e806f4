"""Checkers for the deployment files under ``deploy/``.

Each checker returns the problems it finds as one-line strings (an empty list when the files
are right), so that a test can assert ``== []`` on the real files and show, on a deliberately
broken sample, that the checker does catch what it is there for.

Whether a file is well-formed is left to the maintained tool for its format: ``promtool``
(Prometheus config, alert rules, and the dashboard's PromQL), ``hadolint`` (the Dockerfile,
settings in ``deploy/.hadolint.yaml``), ``check-jsonschema`` (compose, against the Compose
Specification's schema), ``kubernetes-validate`` (the Kubernetes manifests,
against the API's schemas, offline) and ``yamllint`` (every YAML file, settings in
``deploy/.yamllint.yaml``). The checks written here hold the files to the application:
settings and environment variables it reads, metrics it exports, ports it serves on.

What "right" means is taken from the application wherever it can be: the environment
variables and config keys the service reads come from ``app._settings.Settings``, the metrics
it exports from a real ``adapters.metrics._prometheus.PrometheusMetrics`` exposition.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import typing
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel
from yamllint import linter as yaml_linter
from yamllint.config import YamlLintConfig

from adapters.metrics import PrometheusMetrics
from adapters.spark.runtime import DEFAULT_CONF
from app import Settings, SettingsError, load_settings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


# --------------------------------------------------------------------- the maintained tools


def tool(name: str) -> str:
    """A linter's executable: in this interpreter's environment (PyPI wheels) or on PATH
    (Debian packages); raises FileNotFoundError naming the install step."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(
            f"{name} not found: run scripts/bootstrap --services (Debian packages) or install the project's test extra"
        )
    return found


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([tool(command[0]), *command[1:]], capture_output=True, text=True, timeout=120)


def promtool_problems(kind: str, path: Path) -> list[str]:
    """``promtool check config|rules PATH``: its complaints, one per line (none when it passes)."""
    result = _run("promtool", "check", kind, str(path))
    if result.returncode == 0:
        return []
    lines = [line.strip() for line in (result.stderr + result.stdout).splitlines()]
    return [
        f"{path.name}: {line.removeprefix('FAILED: ')}"
        for line in lines
        if line and line != "FAILED:" and not line.startswith(("Checking", "SUCCESS"))
    ]


# Grafana's own interval variables, as Grafana substitutes them before the query reaches Prometheus.
GRAFANA_INTERVALS = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}


def promql_syntax_problems(exprs: dict[str, str]) -> list[str]:
    """Where -> PromQL expression (e.g. a dashboard's queries), checked by promtool as the
    expressions of recording rules; problems name the ``where`` of each bad expression."""
    rules, names = [], {}
    for index, (where, expr) in enumerate(exprs.items()):
        for variable, value in GRAFANA_INTERVALS.items():
            expr = expr.replace(variable, value)
        names[f"check:expr_{index}"] = where
        rules.append({"record": f"check:expr_{index}", "expr": expr})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "exprs.yml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "exprs", "rules": rules}]}))
        problems = promtool_problems("rules", path)
    return [_name_expr(line, names) for line in problems]


def _name_expr(line: str, names: dict[str, str]) -> str:
    """promtool names a bad rule by its position (group 1, rule N, "check:expr_N"): name it by its where."""
    match = re.search(r'rule (\d+), "[^"]*": (.*)', line)
    if match is None:
        return line
    return f"{names[f'check:expr_{int(match.group(1)) - 1}']}: {match.group(2)}"


def hadolint_problems(dockerfile: Path, config: Path | None = None) -> list[str]:
    """``hadolint`` findings (with deploy/.hadolint.yaml's ignores), as ``line N: CODE message``."""
    result = _run(
        "hadolint",
        "--no-color",
        "--format",
        "json",
        "--config",
        str(config or DEPLOY / ".hadolint.yaml"),
        str(dockerfile),
    )
    try:
        findings = json.loads(result.stdout)
    except ValueError:
        return [f"{dockerfile.name}: hadolint failed: {(result.stderr or result.stdout).strip()}"]
    return [f"line {f['line']}: {f['code']} {f['message']}" for f in findings]


def compose_schema_problems(compose_file: Path) -> list[str]:
    """The compose file against the Compose Specification's JSON schema (``check-jsonschema``
    ships it: ``--builtin-schema vendor.compose-spec``, offline), as ``PATH: message``."""
    result = _run(
        "check-jsonschema", "--builtin-schema", "vendor.compose-spec", "--output-format", "json", str(compose_file)
    )
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return [f"{compose_file.name}: check-jsonschema failed: {(result.stderr or result.stdout).strip()}"]
    errors = report.get("errors", []) + report.get("parse_errors", [])
    return [f"{compose_file.name}: {e.get('path', '')}: {e.get('message', e)}" for e in errors]


def yamllint_problems(paths: Iterable[Path], config: Path | None = None) -> list[str]:
    """``yamllint`` errors and warnings of each file (deploy/.yamllint.yaml's rules)."""
    conf = YamlLintConfig(file=str(config or DEPLOY / ".yamllint.yaml"))
    problems = []
    for path in paths:
        for problem in yaml_linter.run(path.read_text(), conf, str(path)):
            problems.append(f"{path.name}:{problem.line}:{problem.column}: {problem.level}: {problem.message}")
    return problems


def k8s_schema_problems(docs: list[tuple[str, dict]]) -> list[str]:
    """Each manifest against the Kubernetes API's schema (kubernetes-validate, strict: an unknown
    field is an error, as the API server's strict decoding makes it). Custom resources
    (SparkApplication) have no schema there: ``sparkapp_schema_problems`` checks them."""
    problems = []
    for file, doc in docs:
        try:
            kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            continue
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path) or "(document)"
            problems.append(
                f"{file}: {doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}: {where}: {exc.message}"
            )
    return problems


# --------------------------------------------------------------------------- the Dockerfile


class DockerfileError(ValueError):
    """The Dockerfile does not parse; the message names the line."""


KEYWORDS = frozenset(
    {
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "MAINTAINER",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
    }
)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    value: str
    line: int

    @property
    def flags(self) -> dict[str, str]:
        """Leading ``--name=value`` options (``--link`` alone gives ``"true"``)."""
        found = {}
        for word in self.value.split():
            if not word.startswith("--"):
                break
            name, _, value = word[2:].partition("=")
            found[name] = value or "true"
        return found

    @property
    def body(self) -> str:
        """The arguments after the leading ``--options``."""
        words = self.value.split(" ")
        while words and (words[0].startswith("--") or not words[0]):
            words.pop(0)
        return " ".join(words).strip()

    @property
    def exec_form(self) -> list[str] | None:
        """The JSON-array (exec) form's words, or None for the shell form."""
        if not self.body.startswith("["):
            return None
        try:
            words = json.loads(self.body)
        except ValueError:
            return None
        return words if isinstance(words, list) and all(isinstance(w, str) for w in words) else None


@dataclass
class Stage:
    index: int
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, ref: str) -> Stage | None:
        for stage in self.stages:
            if ref in (stage.name, str(stage.index)):
                return stage
        return None


def parse_dockerfile(text: str) -> Dockerfile:
    """Instructions with their continuation lines joined, grouped by stage; raises DockerfileError."""
    instructions = list(_instructions(text.splitlines(), _escape_directive(text)))
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for instr in instructions:
        if instr.keyword == "FROM":
            words = instr.body.split()
            name = words[2] if len(words) == 3 and words[1].lower() == "as" else None
            stages.append(Stage(len(stages), expand(words[0], global_args), name))
        elif not stages and instr.keyword == "ARG":
            global_args.update(_arg_default(instr.body, global_args))
        elif not stages:
            raise DockerfileError(f"line {instr.line}: {instr.keyword} before the first FROM")
        else:
            stages[-1].instructions.append(instr)
    if not stages:
        raise DockerfileError("no FROM instruction")
    return Dockerfile(global_args, stages)


def _escape_directive(text: str) -> str:
    for line in text.splitlines():
        directive = re.fullmatch(r"#\s*(\w+)\s*=\s*(\S+)\s*", line)
        if not directive:
            break
        if directive.group(1).lower() == "escape":
            return directive.group(2)
    return "\\"


def _instructions(lines: list[str], escape: str) -> Iterator[Instruction]:
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped):
            continue  # comments and blank lines, also inside a continuation (as Docker does)
        start = start or number
        if stripped.endswith(escape):
            parts.append(stripped[: -len(escape)].strip())
            continue
        parts.append(stripped)
        yield _instruction(" ".join(parts), start)
        parts, start = [], 0
    if parts:
        raise DockerfileError(f"line {start}: the file ends inside a continuation line")


def _instruction(text: str, line: int) -> Instruction:
    keyword, _, value = text.partition(" ")
    if keyword.upper() not in KEYWORDS:
        raise DockerfileError(f"line {line}: unknown instruction {keyword!r}")
    if re.search(r"<<-?\s*['\"]?[A-Za-z_]+['\"]?\s*$", value):
        raise DockerfileError(f"line {line}: heredocs are not supported by this parser")
    return Instruction(keyword.upper(), value.strip(), line)


def _arg_default(body: str, known: dict[str, str]) -> dict[str, str]:
    name, eq, default = body.partition("=")
    return {name.strip(): expand(default.strip().strip('"'), known)} if eq else {}


def expand(text: str, variables: dict[str, str]) -> str:
    """``$NAME``, ``${NAME}`` and ``${NAME:-default}`` as Docker expands them (unknown: empty)."""

    def one(match: re.Match) -> str:
        name, default = match.group(1) or match.group(3), match.group(2)
        value = variables.get(name, "")
        return value if value or default is None else default

    return re.sub(r"\$(?:\{(\w+)(?::-([^}]*))?\}|(\w+))", one, text)


def stage_environment(dockerfile: Dockerfile, stage: Stage, base: dict[str, str] | None = None) -> dict[str, str]:
    """The ENV a stage sets (ARG defaults included for expansion), values expanded in order."""
    variables = dict(base or {})
    env: dict[str, str] = {}
    for instr in stage.instructions:
        if instr.keyword == "ARG":
            name, _, default = instr.body.partition("=")
            value = expand(default, variables) if default else dockerfile.global_args.get(name.strip(), "")
            variables[name.strip()] = value
        elif instr.keyword == "ENV":
            for name, value in _env_pairs(instr.body):
                env[name] = variables[name] = expand(value, variables)
    return env


def _env_pairs(body: str) -> list[tuple[str, str]]:
    words = shlex.split(body, posix=True)
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]  # the legacy form: ENV NAME value
    return [tuple(word.split("=", 1)) for word in words]  # type: ignore[misc]


def copy_sources(instr: Instruction) -> tuple[list[str], str]:
    """(sources, destination) of a COPY or ADD, in either form."""
    words = instr.exec_form or instr.body.split()
    return words[:-1], words[-1]


def resolve_container_path(dockerfile: Dockerfile, path: str, stage: Stage | None = None) -> Path | None:
    """The file in the repository that COPY puts at ``path`` in the image, or None if a RUN made it."""
    stage = stage or dockerfile.final
    for instr in reversed(stage.all("COPY") + stage.all("ADD")):
        sources, dest = copy_sources(instr)
        for source in sources:
            into_dir = len(sources) > 1 or (dest.endswith("/") and _is_file(source, instr.flags.get("from")))
            target = dest.rstrip("/") + ("/" + Path(source).name if into_dir else "")
            if path != target and not path.startswith(target + "/"):
                continue
            inside = source.rstrip("/") + path[len(target) :]
            origin = instr.flags.get("from")
            if origin is None:
                return REPO / inside.lstrip("/")
            from_stage = dockerfile.stage(origin)
            return resolve_container_path(dockerfile, inside, from_stage) if from_stage else None
    return None


def _is_file(source: str, origin: str | None) -> bool:
    return (REPO / source.lstrip("/")).is_file() if origin is None else bool(Path(source).suffix)


def dockerfile_source_problems(dockerfile: Dockerfile, context: Path, ignore_patterns: list[str]) -> list[str]:
    """Every COPY/ADD source exists in the build context and is not filtered out by .dockerignore;
    every --from names an earlier stage."""
    problems = []
    for stage in dockerfile.stages:
        earlier = {s.name for s in dockerfile.stages[: stage.index] if s.name} | {str(i) for i in range(stage.index)}
        for instr in stage.all("COPY") + stage.all("ADD"):
            origin = instr.flags.get("from")
            if origin is not None:
                if origin not in earlier:
                    problems.append(f"line {instr.line}: COPY --from={origin} names no earlier stage")
                continue
            for source in copy_sources(instr)[0]:
                problems += _context_source_problems(instr.line, source, context, ignore_patterns)
    return problems


def _context_source_problems(line: int, source: str, context: Path, ignore_patterns: list[str]) -> list[str]:
    relative = source.strip("/")  # sources are relative to the context, even with a leading /
    if ".." in Path(relative).parts:
        return [f"line {line}: {source} is outside the build context"]
    matches = list(context.glob(relative)) if any(c in relative for c in "*?[") else [context / relative]
    if not any(m.exists() for m in matches):
        return [f"line {line}: {source} does not exist in the build context {context}"]
    if all(dockerignore_excludes(ignore_patterns, m.relative_to(context).as_posix()) for m in matches):
        return [f"line {line}: {source} is excluded from the build context by the .dockerignore"]
    return []


def dockerfile_runtime_problems(dockerfile: Dockerfile) -> list[str]:
    """What hadolint does not ask for: a final stage with a USER, EXPOSE, a HEALTHCHECK, an
    ENTRYPOINT and a CMD. (Pinned base images, a non-root last USER and the exec form of
    ENTRYPOINT/CMD are hadolint's DL3006/DL3007, DL3002 and DL3025.)"""
    problems = []
    final = dockerfile.final
    if final.last("USER") is None:
        problems.append("the final stage runs as root: add a USER with a non-root numeric uid")
    if not final.all("EXPOSE"):
        problems.append("the final stage EXPOSEs no port")
    health = final.last("HEALTHCHECK")
    if health is None or health.body.upper().startswith("NONE"):
        problems.append("the final stage has no HEALTHCHECK")
    for keyword in ("ENTRYPOINT", "CMD"):
        if final.last(keyword) is None:
            problems.append(f"the final stage has no {keyword}")
    return problems


def healthcheck_command(instr: Instruction) -> list[str] | None:
    """The exec-form command of ``HEALTHCHECK [options] CMD [...]``."""
    body = instr.body
    if not body.upper().startswith("CMD"):
        return None
    return Instruction("CMD", body[3:].strip(), instr.line).exec_form


def exposed_ports(stage: Stage) -> set[int]:
    return {int(word.split("/")[0]) for instr in stage.all("EXPOSE") for word in instr.body.split()}


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Whether a context path is left out by .dockerignore patterns (last match wins, ! re-includes)."""
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _ignore_regex(pattern[1:] if negated else pattern)
        parts = path.split("/")
        if any(regex.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            excluded = not negated
    return excluded


def _ignore_regex(pattern: str) -> re.Pattern:
    pattern = pattern.strip().strip("/")
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def read_ignore_file(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines()) if path.exists() else ()
    return [line for line in lines if line and not line.startswith("#")]


def pom_jar_names(pom: Path) -> list[str]:
    """``artifactId-version.jar`` of each dependency a pom declares (properties resolved)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(pom).getroot()
    props = {p.tag.split("}")[1]: (p.text or "").strip() for p in root.find("m:properties", ns) or []}
    names = []
    for dep in root.findall("m:dependencies/m:dependency", ns):
        version = re.sub(
            r"\$\{([^}]+)\}", lambda m: props.get(m.group(1), m.group(0)), dep.findtext("m:version", "", ns).strip()
        )
        names.append(f"{dep.findtext('m:artifactId', '', ns).strip()}-{version}.jar")
    return names


# ------------------------------------------------------------ settings: env names, keys, values


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _dict_value(annotation: Any) -> Any:
    """The value type of a ``dict[str, X]`` annotation (also inside ``X | None``), else None."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is dict:
            return typing.get_args(arg)[1]
    return None


_KEY = r"(?:(?!__)[A-Za-z0-9_.\-])+"


def settings_env_patterns(model: type[BaseModel] = Settings) -> list[str]:
    """Regexes of every environment variable the settings read, derived from the model's fields.

    A nested model can be given whole (as JSON) or field by field (``__``); a dict of models
    (``rules``) takes any key, then the model's fields; a dict of strings takes any key.
    """
    return ["DEDUP_" + pattern for pattern in _field_patterns(model)]


def _field_patterns(model: type[BaseModel]) -> list[str]:
    patterns = []
    for name, info in model.model_fields.items():
        base = re.escape(name.upper())
        patterns.append(base)
        nested, value_type = _model_in(info.annotation), _dict_value(info.annotation)
        if nested is not None and value_type is None:
            patterns += [f"{base}__{p}" for p in _field_patterns(nested)]
        elif value_type is not None:
            patterns.append(f"{base}__{_KEY}")
            item_model = _model_in(value_type)
            patterns += [f"{base}__{_KEY}__{p}" for p in (_field_patterns(item_model) if item_model else [])]
    return patterns


def app_read_env_names(sources: Iterable[Path] = ()) -> set[str]:
    """``DEDUP_*`` variables the application reads directly (``os.environ``), e.g. DEDUP_CONFIG."""
    files = list(sources) or sorted((REPO / "src" / "app").glob("*.py"))
    found = set()
    for path in files:
        found |= set(
            re.findall(r"""(?:environ(?:\.get)?\s*[(\[]|getenv\s*\()\s*["'](DEDUP_\w+)["']""", path.read_text())
        )
    return found


def env_name_problems(names: Iterable[str], where: str) -> list[str]:
    """DEDUP_* names the application does not read (a typo is silently ignored at run time)."""
    patterns = [re.compile(p, re.IGNORECASE) for p in settings_env_patterns()]
    direct = app_read_env_names()
    return [
        f"{where}: {name} is not a setting the application reads"
        for name in names
        if name.upper().startswith("DEDUP_") and name not in direct and not any(p.fullmatch(name) for p in patterns)
    ]


def config_key_problems(data: Any, where: str, model: type[BaseModel] = Settings, path: str = "") -> list[str]:
    """Config-file keys that are not settings (walks the model's fields recursively)."""
    if not isinstance(data, dict):
        return [f"{where}: {path or 'the config'} must be a mapping"]
    problems = []
    for key, value in data.items():
        name = f"{path}{key}"
        info = model.model_fields.get(key)
        if info is None:
            problems.append(f"{where}: {name} is not a setting the application reads")
            continue
        nested, value_type = _model_in(info.annotation), _dict_value(info.annotation)
        if nested is not None and value_type is None:
            problems += config_key_problems(value, where, nested, name + ".")
        elif value_type is not None and _model_in(value_type) is not None and isinstance(value, dict):
            for item, item_value in value.items():
                problems += config_key_problems(item_value, where, _model_in(value_type), f"{name}.{item}.")
    return problems


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """os.environ with every DEDUP_* variable replaced by ``env``, restored afterwards."""
    saved = dict(os.environ)
    try:
        for name in [n for n in os.environ if n.upper().startswith("DEDUP_")]:
            del os.environ[name]
        os.environ.update(env)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def load_deployed_settings(env: dict[str, str], files: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """The settings a deployment gives the service: its DEDUP_* variables, and the config file
    DEDUP_CONFIG names (its text taken from ``files``, e.g. a ConfigMap's data). Raises SettingsError."""
    env = {k: v for k, v in env.items() if k.upper().startswith("DEDUP_")}
    with tempfile.TemporaryDirectory() as tmp:
        config = env.get("DEDUP_CONFIG")
        if config is not None and files and config in files:
            local = Path(tmp) / Path(config).name
            local.write_text(files[config])
            env["DEDUP_CONFIG"] = str(local)
        with environment(env):
            return load_settings(**overrides)


def settings_problems(
    env: dict[str, str], where: str, files: dict[str, str] | None = None, **overrides: Any
) -> list[str]:
    try:
        load_deployed_settings(env, files, **overrides)
    except SettingsError as exc:
        return [f"{where}: {exc}"]
    return []


def shadowed_config_problems(env_names: Iterable[str], config: dict, where: str) -> list[str]:
    """Config-file keys that an environment variable overrides (the file's value is then ignored)."""
    problems = []
    for name in env_names:
        if not name.upper().startswith("DEDUP_") or name.upper() == "DEDUP_CONFIG":
            continue
        node: Any = config
        for part in name[len("DEDUP_") :].split("__"):
            keys = {k.lower(): k for k in node} if isinstance(node, dict) else {}
            if part.lower() not in keys:
                node = None
                break
            node = node[keys[part.lower()]]
        if node is not None:
            setting = name[len("DEDUP_") :].replace("__", ".").lower()
            problems.append(f"{where}: config key {setting} is overridden by the environment variable {name}")
    return problems


# ----------------------------------------------------------------------------- metric names


def exported_metric_names() -> set[str]:
    """Every series name the service exports (a histogram's ``_bucket``, ``_sum`` and ``_count``
    included, and gauges whose labelled series appear only once set), read from the exposition
    of the service's own registry."""
    text = PrometheusMetrics(["APP", "WEB"]).exposition().decode()
    families = list(text_string_to_metric_families(text))
    gauges = {family.name for family in families if family.type == "gauge"}  # labelled ones have no series yet
    return gauges | {sample.name for family in families for sample in family.samples}


# Prometheus's own series, always there for a scraped target.
PROMETHEUS_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})

PROMQL_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "atan2",
        "inf",
        "nan",
    }
)


def promql_names(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, function names) an expression uses."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges, subqueries
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+-?\w+", " ", text)
    text = re.sub(r"(?<![\w:])\d[\w.]*(?:[eE][+-]?\d+)?", " ", text)  # numbers
    metrics, functions = set(), set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group()
        if text[match.end() :].lstrip().startswith("("):
            functions.add(name)
        elif name.lower() not in PROMQL_KEYWORDS:
            metrics.add(name)
    return metrics, functions


def promql_problems(expr: str, exported: set[str], where: str) -> list[str]:
    """Metrics the service does not export (whether the expression parses: ``promtool``)."""
    metrics, _ = promql_names(expr)
    unknown = sorted(metrics - exported - PROMETHEUS_SERIES)
    problems = [f"{where}: {m} is not a metric the service exports" for m in unknown]
    if not metrics:
        problems.append(f"{where}: the expression names no metric")
    return problems


# --------------------------------------------------------------------------- compose


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def compose_env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def published_ports(service: dict) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each published port ("" when no address)."""
    found = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            found.append((entry.get("host_ip", ""), int(entry.get("published", 0)), int(entry["target"])))
            continue
        parts = str(entry).split("/")[0].split(":")
        address = parts[0] if len(parts) == 3 else ""
        host = parts[-2] if len(parts) >= 2 else ""
        found.append((address, int(host) if host else 0, int(parts[-1])))
    return found


def compose_problems(compose: dict, base: Path) -> list[str]:
    """Ports published on loopback only; bind-mount sources and build files exist."""
    problems = []
    for name, service in (compose.get("services") or {}).items():
        for address, host, _ in published_ports(service):
            if address not in ("127.0.0.1", "::1", "localhost"):
                problems.append(f"service {name}: port {host} is published on all interfaces, not 127.0.0.1")
        for volume in service.get("volumes") or []:
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")) and not (base / source).exists():
                problems.append(f"service {name}: mounted {source} does not exist")
        build = service.get("build")
        if build:
            context = base / (build if isinstance(build, str) else build.get("context", "."))
            dockerfile = context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")
            if not dockerfile.is_file():
                problems.append(f"service {name}: build file {dockerfile} does not exist")
    return problems


def kafka_topics_created(service: dict) -> set[str]:
    """Topics a kafka-init service creates, from its lines ``create TOPIC PARTITIONS``."""
    command = service.get("command") or []
    text = "\n".join(command) if isinstance(command, list) else str(command)
    return set(re.findall(r"^\s*create\s+([\w.-]+)\s+\d+\s*$", text, re.MULTILINE))


def kafka_uri_problems(env: dict[str, str], brokers: set[str], topics: set[str], where: str) -> list[str]:
    """kafka:// settings point at a broker address of the stack and a topic it creates."""
    problems = []
    for name, value in env.items():
        match = re.match(r"kafka://([^/]+)/([^?]+)", value)
        if not match:
            continue
        if match.group(1) not in brokers:
            problems.append(f"{where}: {name} points at {match.group(1)}, not a broker of the stack {sorted(brokers)}")
        if match.group(2) not in topics:
            problems.append(f"{where}: {name} uses topic {match.group(2)!r}, which is not created")
    return problems


# ------------------------------------------------------------------------ Prometheus, alerts


def scrape_targets(prometheus: dict) -> list[tuple[str, str, int]]:
    """(job, host, port) of every static or DNS target."""
    found = []
    for job in prometheus.get("scrape_configs") or []:
        for static in job.get("static_configs") or []:
            for target in static.get("targets") or []:
                host, _, port = target.rpartition(":")
                found.append((job["job_name"], host, int(port)))
        for dns in job.get("dns_sd_configs") or []:
            found += [(job["job_name"], host, int(dns.get("port", 0))) for host in dns.get("names") or []]
    return found


def scrape_problems(prometheus: dict, metrics_ports: dict[str, int]) -> list[str]:
    """Each target is a service of the stack, scraped on the port its metrics are served on."""
    problems = []
    for job, host, port in scrape_targets(prometheus):
        if host not in metrics_ports:
            problems.append(f"job {job}: target {host} is not a service serving /metrics {sorted(metrics_ports)}")
        elif port != metrics_ports[host]:
            problems.append(f"job {job}: scrapes {host}:{port}, but its metrics port is {metrics_ports[host]}")
    return problems


def markdown_anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text."""
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return anchors


def alert_problems(rules: dict, exported: set[str], readme: str) -> list[str]:
    """Alert expressions name exported metrics; each alert is labelled, explained, and has a
    runbook anchor that exists in the operations guide."""
    problems = []
    anchors = markdown_anchors(readme)
    for group in rules.get("groups") or []:
        for rule in group.get("rules") or []:
            name = rule.get("alert") or rule.get("record") or "?"
            problems += promql_problems(str(rule.get("expr", "")), exported, f"alert {name}")
            if "alert" not in rule:
                continue
            annotations = rule.get("annotations") or {}
            if not (rule.get("labels") or {}).get("severity"):
                problems.append(f"alert {name}: no severity label")
            if not annotations.get("summary"):
                problems.append(f"alert {name}: no summary")
            anchor = str(annotations.get("runbook", "")).partition("#")[2]
            if anchor not in anchors:
                problems.append(f"alert {name}: runbook #{anchor} is not a heading of deploy/README.md")
    return problems


def alert_names(rules: dict) -> list[str]:
    return [r["alert"] for g in rules.get("groups") or [] for r in g.get("rules") or [] if "alert" in r]


def promtool_test_problems(test_file: Path) -> list[str]:
    """``promtool test rules FILE``: its warnings (a rule file that matches nothing is only
    one), then each failed case as ``test name: alertname at time``, or promtool's own
    complaint when the file does not load; none when every expectation holds."""
    result = _run("promtool", "test", "rules", str(test_file))
    text = result.stderr + result.stdout
    warnings = [line.strip() for line in text.splitlines() if line.strip().startswith("WARNING")]
    if result.returncode == 0:
        return warnings
    failed = re.findall(r"name: (.+?),\s*alertname: (\w+), time: (\S+?),", text)
    return warnings + [f"{name}: {alert} at {time}" for name, alert, time in failed] or [
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("Unit Testing")
    ]


def alert_test_coverage_problems(rules: dict, tests: dict) -> list[str]:
    """Every alert of ``rules`` has a case in ``tests`` (a promtool test file) where it fires
    and one where it stays silent; ``tests`` names no alert ``rules`` does not define."""
    cases: dict[str, set[str]] = {}
    for test in tests.get("tests") or []:
        for case in test.get("alert_rule_test") or []:
            cases.setdefault(case["alertname"], set()).add("firing" if case.get("exp_alerts") else "silent")
    problems = []
    for name in alert_names(rules):
        problems += [
            f"alert {name}: no {kind} case" for kind in ("firing", "silent") if kind not in cases.get(name, set())
        ]
    problems += [f"test of {name}: no such alert" for name in sorted(set(cases) - set(alert_names(rules)))]
    return problems


# ----------------------------------------------------------------------------------- Grafana


def dashboard_panels(dashboard: dict) -> Iterator[dict]:
    for panel in dashboard.get("panels") or []:
        yield panel
        yield from panel.get("panels") or []  # collapsed rows


def dashboard_exprs(dashboard: dict) -> dict[str, str]:
    """``panel 'TITLE' #N`` -> the PromQL of each query, for ``promql_syntax_problems``."""
    return {
        f"panel {panel.get('title', '?')!r} #{n}": target.get("expr", "")
        for panel in dashboard_panels(dashboard)
        for n, target in enumerate(panel.get("targets") or [], 1)
    }


def dashboard_problems(dashboard: dict, exported: set[str], datasource_uids: set[str]) -> list[str]:
    """Every query names exported metrics, through a provisioned datasource."""
    problems = []
    for panel in dashboard_panels(dashboard):
        title = panel.get("title", "?")
        for target in panel.get("targets") or []:
            problems += promql_problems(target.get("expr", ""), exported, f"panel {title!r}")
            uid = (target.get("datasource") or panel.get("datasource") or {}).get("uid")
            if uid not in datasource_uids:
                problems.append(f"panel {title!r}: datasource uid {uid!r} is not provisioned {sorted(datasource_uids)}")
        if panel.get("type") != "row" and not panel.get("targets"):
            problems.append(f"panel {title!r}: no query")
    return problems


# -------------------------------------------------------------------------------- Kubernetes


def k8s_documents(directory: Path) -> list[tuple[str, dict]]:
    """(file name, document) of every manifest in a directory (kustomization.yaml is not one)."""
    docs = []
    for path in sorted(p for p in directory.glob("*.yaml") if p.name != "kustomization.yaml"):
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def find_kind(docs: list[tuple[str, dict]], kind: str, name: str | None = None) -> list[dict]:
    return [d for _, d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]


def manifest_problems(docs: list[tuple[str, dict]], namespace: str) -> list[str]:
    """Each manifest has apiVersion, kind, a name, and the namespace of the application."""
    problems = []
    for file, doc in docs:
        meta = doc.get("metadata") or {}
        if not doc.get("apiVersion") or not doc.get("kind") or not meta.get("name"):
            problems.append(f"{file}: a document without apiVersion, kind or metadata.name")
        elif doc["kind"] != "Namespace" and meta.get("namespace") != namespace:
            problems.append(f"{file}: {doc['kind']}/{meta['name']} is not in namespace {namespace}")
    return problems


# The SparkApplication fields of the Kubeflow spark-operator's v1beta2 API (v2.1+); the API
# server decodes strictly, so an unknown field rejects the whole resource.
SPARKAPP_FIELDS = {
    "spec": {
        "type",
        "sparkVersion",
        "mode",
        "proxyUser",
        "image",
        "imagePullPolicy",
        "imagePullSecrets",
        "mainClass",
        "mainApplicationFile",
        "arguments",
        "sparkConf",
        "hadoopConf",
        "sparkConfigMap",
        "hadoopConfigMap",
        "volumes",
        "driver",
        "executor",
        "deps",
        "restartPolicy",
        "nodeSelector",
        "failureRetries",
        "retryInterval",
        "pythonVersion",
        "memoryOverheadFactor",
        "monitoring",
        "batchScheduler",
        "timeToLiveSeconds",
        "batchSchedulerOptions",
        "sparkUIOptions",
        "driverIngressOptions",
        "dynamicAllocation",
    },
    "pod": {
        "template",
        "cores",
        "coreLimit",
        "memory",
        "memoryOverhead",
        "gpu",
        "image",
        "configMaps",
        "secrets",
        "env",
        "envVars",
        "envFrom",
        "envSecretKeyRefs",
        "labels",
        "annotations",
        "volumeMounts",
        "affinity",
        "tolerations",
        "podSecurityContext",
        "securityContext",
        "schedulerName",
        "sidecars",
        "initContainers",
        "hostNetwork",
        "nodeSelector",
        "dnsConfig",
        "terminationGracePeriodSeconds",
        "serviceAccount",
        "hostAliases",
        "shareProcessNamespace",
        "runtimeClassName",
    },
    "driver": {
        "podName",
        "coreRequest",
        "javaOptions",
        "lifecycle",
        "kubernetesMaster",
        "serviceAnnotations",
        "serviceLabels",
        "ports",
        "priorityClassName",
    },
    "executor": {
        "instances",
        "coreRequest",
        "javaOptions",
        "lifecycle",
        "deleteOnTermination",
        "ports",
        "priorityClassName",
    },
    "restartPolicy": {
        "type",
        "onSubmissionFailureRetries",
        "onFailureRetries",
        "onSubmissionFailureRetryInterval",
        "onFailureRetryInterval",
    },
    "deps": {"jars", "files", "pyFiles", "packages", "excludePackages", "repositories", "archives"},
}


def sparkapp_schema_problems(app: dict) -> list[str]:
    spec = app.get("spec") or {}
    problems = [f"spec.{k} is not a SparkApplication field" for k in set(spec) - SPARKAPP_FIELDS["spec"]]
    for role in ("driver", "executor"):
        allowed = SPARKAPP_FIELDS["pod"] | SPARKAPP_FIELDS[role]
        problems += [f"spec.{role}.{k} is not a SparkApplication field" for k in set(spec.get(role) or {}) - allowed]
    for part in ("restartPolicy", "deps"):
        problems += [
            f"spec.{part}.{k} is not a SparkApplication field"
            for k in set(spec.get(part) or {}) - SPARKAPP_FIELDS[part]
        ]
    return sorted(problems)


def pod_env(pod: dict, docs: list[tuple[str, dict]]) -> tuple[dict[str, str], list[str]]:
    """A pod spec's environment with secretKeyRef/configMapKeyRef values looked up in the
    manifests, and the problems of references that do not resolve."""
    env, problems = {}, []
    for item in pod.get("env") or []:
        name, source = item["name"], item.get("valueFrom")
        if source is None:
            env[name] = str(item.get("value", ""))
            continue
        kind, ref = (
            ("Secret", source.get("secretKeyRef"))
            if "secretKeyRef" in source
            else ("ConfigMap", source.get("configMapKeyRef"))
        )
        found = find_kind(docs, kind, (ref or {}).get("name"))
        data = {**(found[0].get("data") or {}), **(found[0].get("stringData") or {})} if found else {}
        if not ref or ref.get("key") not in data:
            problems.append(f"env {name}: {kind} {ref and ref.get('name')!r} has no key {ref and ref.get('key')!r}")
        else:
            env[name] = str(data[ref["key"]])
    return env, problems


def mounted_files(pod: dict, spec: dict, docs: list[tuple[str, dict]]) -> dict[str, str]:
    """Path -> text of the ConfigMap keys a pod mounts as files."""
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    files = {}
    for mount in pod.get("volumeMounts") or []:
        config_map = (volumes.get(mount["name"]) or {}).get("configMap")
        for found in find_kind(docs, "ConfigMap", config_map["name"]) if config_map else []:
            for key, text in (found.get("data") or {}).items():
                files[f"{mount['mountPath'].rstrip('/')}/{key}"] = text
    return files


def volume_problems(spec: dict, docs: list[tuple[str, dict]]) -> list[str]:
    """Mounts name declared volumes; claims and config maps exist; shared claims are ReadWriteMany."""
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    problems = []
    for role in ("driver", "executor"):
        for mount in (spec.get(role) or {}).get("volumeMounts") or []:
            if mount["name"] not in volumes:
                problems.append(f"{role}: mounts {mount['name']!r}, which spec.volumes does not declare")
    for name, volume in volumes.items():
        if "persistentVolumeClaim" in volume:
            claims = find_kind(docs, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
            if not claims:
                problems.append(
                    f"volume {name}: no PersistentVolumeClaim {volume['persistentVolumeClaim']['claimName']}"
                )
            elif "ReadWriteMany" not in claims[0]["spec"].get("accessModes", []):
                problems.append(f"volume {name}: the driver and the executors share it, it must be ReadWriteMany")
        if "configMap" in volume and not find_kind(docs, "ConfigMap", volume["configMap"]["name"]):
            problems.append(f"volume {name}: no ConfigMap {volume['configMap']['name']}")
    return problems


def probe_problems(pod_template: dict, port: int, path: str = "/health") -> list[str]:
    """Liveness and readiness probes (and a startup probe, if any) GET /health on the metrics port."""
    containers = ((pod_template or {}).get("spec") or {}).get("containers") or []
    if not containers:
        return ["no container in the pod template: no probes"]
    problems = []
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = containers[0].get(kind)
        if probe is None:
            if kind != "startupProbe":
                problems.append(f"{kind}: missing")
            continue
        get = probe.get("httpGet") or {}
        if get.get("path") != path or get.get("port") != port:
            problems.append(f"{kind}: GET {get.get('path')} on port {get.get('port')}, not {path} on {port}")
    return problems


def size_mib(text: str) -> int:
    """Kubernetes/Spark memory sizes (2g, 512m, 3Gi, 1024) in MiB."""
    number, unit = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", str(text).strip()).groups()
    factor = {"": 1, "m": 1, "mi": 1, "mb": 1, "g": 1024, "gi": 1024, "gb": 1024, "t": 1 << 20, "ti": 1 << 20}
    return int(number) * factor[unit.lower()]


def sizing_problems(spec: dict, settings: Settings) -> list[str]:
    """The resources agree with the settings: RocksDB's bounded memory fits in the executors'
    off-heap allowance, and there are state partitions for every executor core."""
    executor = spec.get("executor") or {}
    cores = int(executor.get("cores", 1)) * int(executor.get("instances", 1))
    problems = []
    if settings.spark.shuffle_partitions < cores:
        problems.append(
            f"spark.shuffle_partitions {settings.spark.shuffle_partitions} < {cores} executor cores: "
            "some cores would hold no state partition"
        )
    conf = {**DEFAULT_CONF, **settings.spark.conf}  # what the engine runs with (adapters.spark.runtime)
    if conf.get("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage") == "true":
        rocksdb = int(conf["spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"])  # the engine sets one
        overhead = size_mib(executor.get("memoryOverhead", "384m"))
        if overhead < rocksdb + 512:
            problems.append(
                f"executor memoryOverhead {overhead} MiB cannot hold RocksDB's {rocksdb} MiB "
                "plus 512 MiB of JVM off-heap: the pods would be OOM-killed"
            )
    elif settings.spark.state_provider == "rocksdb":
        problems.append("RocksDB's memory is not bounded (spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage)")
    return problems


def service_problems(service: dict, pod_labels: dict[str, str], pod_ports: dict[str, int], port: int) -> list[str]:
    """The metrics Service selects the driver pod and forwards to its metrics port."""
    problems = []
    selector = service["spec"].get("selector") or {}
    missing = {k: v for k, v in selector.items() if pod_labels.get(k) != v}
    if missing:
        problems.append(f"Service {service['metadata']['name']}: selector {missing} matches no driver label")
    ports = service["spec"].get("ports") or []
    if not any(pod_ports.get(p.get("targetPort"), p.get("targetPort")) == port for p in ports):
        problems.append(f"Service {service['metadata']['name']}: no port forwarding to the metrics port {port}")
    annotation = (service["metadata"].get("annotations") or {}).get("prometheus.io/port")
    if annotation is not None and int(annotation) != port:
        problems.append(f"Service {service['metadata']['name']}: prometheus.io/port {annotation} is not {port}")
    return problems
