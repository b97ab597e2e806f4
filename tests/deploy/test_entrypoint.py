"""The image's command, run here exactly as deploy/Dockerfile states it.

ENTRYPOINT + CMD and the image's ENV are read from the Dockerfile, and only the paths are
substituted: the image's virtualenv (/opt/venv) becomes this checkout's, /app this checkout,
/opt/streamdedup the files the Dockerfile copies there, and the baked-in jars the ones
scripts/bootstrap-services.sh fetches from the same pom. tini (PID 1 in the container) is
left out unless installed here: it only relays signals to the entrypoint, whose own
forwarding is what these tests exercise. Spark binds to 127.0.0.1 (SPARK_LOCAL_IP).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.metrics import PrometheusMetrics
from app import MetricsServer, StreamSpec, generate, generate_parts, write_parts
from tests.deploy import checkers as c

DOCKERFILE = c.parse_dockerfile((c.DEPLOY / "Dockerfile").read_text())
CHECKOUT_JARS = c.REPO / ".cache/jars/spark-kafka"  # scripts/bootstrap-services.sh, from the image's pom


class LocalImage:
    """The image's command and environment with local paths.

    Image path -> local path, longest prefix first: the files the Dockerfile COPYs (checked
    against the Dockerfile by a test below), this checkout's virtualenv for /opt/venv, and for
    $STREAMDEDUP_CACHE a directory filled as the image build fills it.
    """

    def __init__(self, cache: Path):
        self.paths = {
            "/opt/streamdedup/cache": cache,
            "/opt/streamdedup": c.DEPLOY / "docker",
            "/opt/venv": Path(sys.prefix),
            "/app": c.REPO,
        }
        self._pattern = re.compile("(?<![^:=,])(" + "|".join(map(re.escape, self.paths)) + ")(?=[/:,]|$)")

    def localize(self, word: str) -> str:
        """Image paths at the start of a word or of a list entry, replaced by local ones."""
        return self._pattern.sub(lambda m: str(self.paths[m.group(1)]), word)

    def entrypoint(self) -> list[str]:
        """The final stage's ENTRYPOINT; tini is left out unless installed here."""
        words = DOCKERFILE.final.last("ENTRYPOINT").exec_form
        if words[:2] == ["/usr/bin/tini", "--"] and not shutil.which("tini"):
            words = words[2:]
        return [self.localize(w) for w in words]

    def command(self) -> list[str]:
        """ENTRYPOINT + CMD, as a container started without arguments runs them."""
        return self.entrypoint() + [self.localize(w) for w in DOCKERFILE.final.last("CMD").exec_form]

    def env(self, **settings: str) -> dict[str, str]:
        """The image's ENV over this process's environment without DEDUP_*. DEDUP_METRICS_PORT is
        dropped: the metrics server binds all interfaces, and tests use loopback only."""
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEDUP_")}
        image = c.stage_environment(DOCKERFILE, DOCKERFILE.final, base={"PATH": os.environ.get("PATH", "")})
        env.update({name: self.localize(value) for name, value in image.items() if name != "DEDUP_METRICS_PORT"})
        if not Path(env["SPARK_HOME"]).is_dir():  # a local Python other than the image's PYTHON_VERSION
            import pyspark

            env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
        env.update(SPARK_LOCAL_IP="127.0.0.1", **settings)
        return env

    def build_operator_jar(self) -> None:
        """The build stage's RUN that compiles the engine's JVM operator, run here."""
        [step] = [r for r in DOCKERFILE.stage("build").all("RUN") if "operator_jar" in r.body]
        build_env = c.stage_environment(DOCKERFILE, DOCKERFILE.stage("build"))
        env = {**os.environ, "STREAMDEDUP_CACHE": self.localize(build_env["STREAMDEDUP_CACHE"])}
        subprocess.run(["bash", "-c", self.localize(step.body)], env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> LocalImage:
    """$STREAMDEDUP_CACHE holds the Maven jars (here: the checkout's copy of the same pom's jars)."""
    cache = tmp_path_factory.mktemp("image-cache")
    (cache / "jars/spark-kafka").mkdir(parents=True)
    for jar in CHECKOUT_JARS.glob("*.jar"):
        shutil.copy(jar, cache / "jars/spark-kafka")
    return LocalImage(cache)


def run(command: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def summary(stderr: str) -> dict[str, int]:
    """The accounting from the ``dedup: in=…, out=…`` line a bounded run ends with."""
    [line] = [line for line in stderr.splitlines() if line.startswith("dedup: in=")]
    return {
        name: int(value)
        for name, value in (
            pair.split("=")
            for pair in line.removeprefix("dedup: ").replace("(", "").replace(")", "").replace(",", "").split()
            if "=" in pair
        )
    }


def lines_in(path: Path) -> int:
    """Lines of a JSONL output, whether written as one file or as a directory of part files."""
    files = (
        [path]
        if path.is_file()
        else [
            p
            for p in path.rglob("*")
            if p.is_file() and not p.name.startswith(("_", ".")) and "_spark_metadata" not in p.parts
        ]
    )
    return sum(1 for f in files for line in f.read_bytes().splitlines() if line.strip())


def write_stream(directory: Path, uniques: int = 200) -> tuple[Path, dict[str, int]]:
    records, expected = generate(StreamSpec(uniques=uniques, seed=11))
    source = directory / "input.jsonl"
    source.write_bytes(b"".join(r + b"\n" for r in records))
    return source, expected.as_accounting()


def needs_java():
    if not shutil.which("java"):
        pytest.skip("no java on PATH (scripts/bootstrap installs it)")


def spark_engine_missing() -> str | None:
    try:
        importlib.import_module("adapters.spark._engine")
    except Exception as exc:  # ImportError, or an error inside a module still being written
        return f"{type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------- the substitutions themselves


def test_the_local_paths_are_the_files_the_dockerfile_copies_into_the_image(image):
    words = DOCKERFILE.final.last("ENTRYPOINT").exec_form + DOCKERFILE.final.last("CMD").exec_form
    words += c.healthcheck_command(DOCKERFILE.final.last("HEALTHCHECK"))
    copied = [w for w in words if w.startswith(("/app/", "/opt/streamdedup/")) and "*" not in w]
    assert copied, "the command names files of the image"
    for word in copied:
        assert Path(image.localize(word)) == c.resolve_container_path(DOCKERFILE, word), word
        assert Path(image.localize(word)).is_file(), word


def test_the_checkout_has_the_jars_the_image_fetches_from_the_same_pom():
    if not list(CHECKOUT_JARS.glob("*.jar")):
        pytest.skip(f"no jars in {CHECKOUT_JARS}: run scripts/bootstrap --services")
    pom = c.REPO / "deploy/local/jars/spark-kafka/pom.xml"
    assert sorted(p.name for p in CHECKOUT_JARS.glob("*.jar")) == sorted(c.pom_jar_names(pom))


# ----------------------------------------------------------------------- the default command


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_the_default_command_runs_the_spark_job_over_files(image, tmp_path):
    reason = spark_engine_missing()
    if reason:
        pytest.skip(f"the Spark engine (adapters.spark._engine, issue 4) does not import yet: {reason}")
    needs_java()
    image.build_operator_jar()  # as the image's build stage does
    # Spark's file source reads a directory; one file per micro-batch, the late records last
    parts, counts = generate_parts(StreamSpec(uniques=200, seed=11), 3)
    write_parts(tmp_path / "input", parts)
    expected = counts.as_accounting()
    env = image.env(
        DEDUP_SOURCE=f"file:{tmp_path / 'input'}?maxFilesPerTrigger=1",
        DEDUP_SINK=f"file:{tmp_path / 'unique'}",
        DEDUP_DLQ=f"file:{tmp_path / 'dead-letters'}",
        DEDUP_SPARK__CHECKPOINT=str(tmp_path / "checkpoint"),
    )
    done = run(image.command(), env, tmp_path, timeout=480)
    output = done.stdout + done.stderr  # spark-submit relays the driver's stderr on its stdout
    assert done.returncode == 0, output[-4000:]
    got = summary(output)
    assert {k: got.get(k) for k in expected} == expected
    assert lines_in(tmp_path / "unique") == expected["out"]
    assert lines_in(tmp_path / "dead-letters") == expected["dead_lettered"]


def test_a_bad_setting_stops_the_default_command_with_one_line_and_exit_code_2(image, tmp_path):
    needs_java()
    done = run(image.command(), image.env(DEDUP_RULES__WEB__WINDOW="0"), tmp_path)
    assert done.returncode == 2, done.stderr[-4000:]
    output = done.stdout + done.stderr  # spark-submit relays the driver's stderr on its stdout
    ours = [line for line in output.splitlines() if line.startswith("dedup:")]
    assert ours == [
        ("dedup: invalid setting rules.WEB.window (DEDUP_RULES__WEB__WINDOW): must be a positive duration (got '0')")
    ]
    assert "Traceback" not in output


def test_arguments_after_the_default_command_reach_dedup_run(image, tmp_path):
    needs_java()
    done = run(image.command() + ["--help"], image.env(), tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("usage: dedup run")


def test_any_other_command_runs_as_given_in_the_image_environment(image, tmp_path):
    source, expected = write_stream(tmp_path)
    outputs = ["--sink", f"file:{tmp_path / 'out.jsonl'}", "--dlq", f"file:{tmp_path / 'dlq.jsonl'}"]
    command = image.entrypoint() + ["dedup", "run", "--engine", "memory", "--source", f"file:{source}", *outputs]
    done = run(command, image.env(), tmp_path)
    assert done.returncode == 0, done.stderr
    assert summary(done.stderr) == expected | {"invalidations": 0}


# ------------------------------------------------------------------------------ graceful stop

FAKE_DRIVER = """\
import os, signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append("TERM"))
print("driver ready", flush=True)
deadline = time.time() + 120
while not got and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.5)  # the running micro-batch finishes
print("driver stopped after", got, flush=True)
sys.exit(int(os.environ.get("FAKE_EXIT", "0")) if got else 9)
"""


def start_with_fake_driver(image: LocalImage, tmp_path: Path, **env: str) -> tuple[subprocess.Popen, Path]:
    """The image's command with a stand-in for spark_submit.py that records SIGTERM."""
    driver = tmp_path / "spark_submit.py"
    driver.write_text(FAKE_DRIVER)
    command = image.command()[:-1] + [str(driver)]
    log = tmp_path / "out.log"
    process = subprocess.Popen(
        command,
        env=image.env(**env),
        cwd=tmp_path,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 120
    while "driver ready" not in log.read_text():
        assert process.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    return process, log


def stop_all(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.parametrize("driver_exit", [0, 3])
def test_sigterm_reaches_the_python_driver_which_finishes_and_sets_the_exit_code(image, tmp_path, driver_exit):
    needs_java()
    process, log = start_with_fake_driver(image, tmp_path, FAKE_EXIT=str(driver_exit))
    try:
        process.send_signal(signal.SIGTERM)  # as docker stop / the kubelet signal the entrypoint
        assert process.wait(timeout=60) == driver_exit, log.read_text()[-3000:]
        assert "driver stopped after ['TERM']" in log.read_text()
    finally:
        stop_all(process)


def test_sigterm_to_spark_submits_jvm_itself_kills_the_driver_mid_batch(image, tmp_path):
    """Why the entrypoint forwards the signal: the JVM's shutdown kills the Python driver."""
    needs_java()
    process, log = start_with_fake_driver(image, tmp_path)
    try:
        jvm = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        assert len(jvm) == 1
        os.kill(int(jvm[0]), signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
        assert "driver stopped" not in log.read_text()
    finally:
        stop_all(process)


# ------------------------------------------------------------- Spark on Kubernetes: the contract


def fake_program(path: Path) -> None:
    """An executable that prints its arguments as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    path.chmod(0o755)


def test_the_driver_mode_runs_spark_submit_in_client_mode_inside_the_driver_pod(image, tmp_path):
    fake_program(tmp_path / "spark/bin/spark-submit")
    args = [
        "driver",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "local:///app/src/app/spark_submit.py",
    ]
    env = image.env(SPARK_HOME=str(tmp_path / "spark"), SPARK_DRIVER_BIND_ADDRESS="127.0.0.1")
    done = run(image.entrypoint() + args, env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.executorEnv.SPARK_DRIVER_POD_IP=127.0.0.1",
        "--deploy-mode",
        "client",
        *args[1:],
    ]


def test_the_executor_mode_starts_the_kubernetes_executor_backend(image, tmp_path):
    fake_program(tmp_path / "jdk/bin/java")
    env = image.env(
        JAVA_HOME=str(tmp_path / "jdk"),
        SPARK_HOME=str(tmp_path / "spark"),
        SPARK_JAVA_OPT_0="-Dspark.driver.port=7078",
        SPARK_EXECUTOR_MEMORY="4g",
        SPARK_CLASSPATH="/extra/*",
        SPARK_CONF_DIR="/opt/spark/conf",
        SPARK_DRIVER_URL="spark://CoarseGrainedScheduler@127.0.0.1:7078",
        SPARK_EXECUTOR_ID="1",
        SPARK_EXECUTOR_CORES="4",
        SPARK_APPLICATION_ID="spark-1",
        SPARK_EXECUTOR_POD_IP="127.0.0.1",
        SPARK_RESOURCE_PROFILE_ID="0",
        SPARK_EXECUTOR_POD_NAME="streamdedup-exec-1",
    )
    done = run(image.entrypoint() + ["executor"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    args = json.loads(done.stdout)
    assert args[:4] == ["-Dspark.driver.port=7078", "-Xms4g", "-Xmx4g", "-cp"]
    assert args[4].split(":")[:3] == ["/opt/spark/conf", "/extra/*", f"{tmp_path}/spark/jars/*"]
    assert args[5:] == [
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        "spark://CoarseGrainedScheduler@127.0.0.1:7078",
        "--executor-id",
        "1",
        "--cores",
        "4",
        "--app-id",
        "spark-1",
        "--hostname",
        "127.0.0.1",
        "--resourceProfileId",
        "0",
        "--podName",
        "streamdedup-exec-1",
    ]


# ----------------------------------------------------------------------------- the health check


def healthcheck(image: LocalImage, port: int | None, tmp_path: Path) -> int:
    command = [image.localize(w) for w in c.healthcheck_command(DOCKERFILE.final.last("HEALTHCHECK"))]
    env = image.env() | ({"DEDUP_METRICS_PORT": str(port)} if port is not None else {})
    return run(command, env, tmp_path, timeout=30).returncode


def test_the_healthcheck_passes_while_the_service_progresses_and_fails_when_it_stalls(image, tmp_path):
    server = MetricsServer(PrometheusMetrics(), 0, host="127.0.0.1").start()
    try:
        assert healthcheck(image, server.port, tmp_path) == 0
        server.stall_after = -1
        assert healthcheck(image, server.port, tmp_path) == 1
    finally:
        server.stop()


def test_the_healthcheck_fails_when_nothing_listens_or_no_port_is_set(image, tmp_path):
    server = MetricsServer(PrometheusMetrics(), 0, host="127.0.0.1")  # bound, never started, closed
    server._server.server_close()
    assert healthcheck(image, server.port, tmp_path) == 1
    assert healthcheck(image, None, tmp_path) == 1
