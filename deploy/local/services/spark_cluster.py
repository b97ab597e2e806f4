"""A Spark standalone cluster on loopback ports: one master and N workers, from the installed
pyspark's own classes (``bin/spark-class …deploy.master.Master`` / ``…deploy.worker.Worker``).

Each worker offers ``cores`` cores and ``memory`` to the applications the master gives it;
its executors are JVMs it starts in its own work directory (``workdir/work/APP/N``), so they
never run in the caller's working directory. Readiness comes from the master's JSON status
(``http://127.0.0.1:UI/json/``): the master is ready when ALIVE, a worker once the master lists
it ALIVE.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .process import LOOPBACK, Service, ServiceError, find_free_port, pid_cmdline, wait_until

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> Path:
    """The installed pyspark's directory: it holds ``bin/spark-class`` and Spark's jars."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError("pyspark is not installed in this Python: run scripts/bootstrap")
    return Path(spec.origin).parent


class _SparkDaemon(Service):
    """A master or worker JVM: ``spark-class CLASS ARGS`` with an RPC port and a web UI port."""

    CLASS = ""

    def __init__(self, workdir: Path, port: int | None, *, detach: bool) -> None:
        workdir = Path(workdir).resolve()
        super().__init__(workdir, port, detach=detach, stdout_log=workdir / "daemon.log")
        self.ui_port: int = self._saved().get("ui_port") or find_free_port()

    def _state(self) -> dict[str, Any]:
        return {"port": self.port, "ui_port": self.ui_port}

    def _pick_new_ports(self) -> None:
        super()._pick_new_ports()
        self.ui_port = find_free_port()

    def _environment(self) -> dict[str, str]:
        # SPARK_CONF_DIR: an empty one of its own, so no spark-env.sh or spark-defaults.conf of the machine applies
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.workdir / "conf"),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOG_DIR": str(self.workdir),
        }

    def _prepare(self) -> None:
        super()._prepare()
        (self.workdir / "conf").mkdir(exist_ok=True)

    def _command(self) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), self.CLASS, *self._arguments()]

    def _arguments(self) -> list[str]:
        raise NotImplementedError


class SparkMaster(_SparkDaemon):
    NAME = "spark-master"
    CLASS = "org.apache.spark.deploy.master.Master"

    def __init__(self, workdir: Path, port: int | None = None, *, detach: bool = False) -> None:
        super().__init__(workdir, port, detach=detach)

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def _arguments(self) -> list[str]:
        return ["--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port)]

    def status(self) -> dict[str, Any]:
        """The master's JSON status: workers, applications, cores; ``{}`` when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json/", timeout=2) as reply:
                return json.load(reply)
        except (urllib.error.URLError, OSError, ValueError):
            return {}

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def _ready(self) -> bool:
        return self.status().get("status") == "ALIVE"


class SparkWorker(_SparkDaemon):
    NAME = "spark-worker"
    CLASS = "org.apache.spark.deploy.worker.Worker"

    def __init__(
        self,
        workdir: Path,
        master: SparkMaster,
        *,
        cores: int = 1,
        memory: str = "3g",
        port: int | None = None,
        detach: bool = False,
    ) -> None:
        super().__init__(workdir, port, detach=detach)
        self.master, self.cores, self.memory = master, cores, memory

    def _arguments(self) -> list[str]:
        return [
            self.master.url,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(self.workdir / "work"),
        ]

    def _ready(self) -> bool:
        return any(w.get("port") == self.port for w in self.master.alive_workers())

    def executor_pids(self) -> list[int]:
        """The executor JVMs this worker runs now (children of its process)."""
        if self.pid is None:
            return []
        pids = []
        for children in Path(f"/proc/{self.pid}/task").glob("*/children"):  # the JVM's threads start them
            try:
                pids += [int(p) for p in children.read_text().split()]
            except OSError:
                continue
        return [p for p in pids if EXECUTOR_CLASS in pid_cmdline(p)]


class SparkCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each, under ``workdir``.

    ``url`` is what ``--master`` takes. ``stop()`` stops the workers (and their executors),
    then the master. ``workers[i].kill()`` is a worker crash, for fault tests.
    """

    NAME = "spark-cluster"

    def __init__(
        self, workdir: Path, workers: int = 2, *, cores: int = 1, memory: str = "3g", detach: bool = False
    ) -> None:
        workdir = Path(workdir).resolve()
        self.master = SparkMaster(workdir / "master", detach=detach)
        self.workers = [
            SparkWorker(workdir / f"worker-{i}", self.master, cores=cores, memory=memory, detach=detach)
            for i in range(workers)
        ]

    @property
    def url(self) -> str:
        return self.master.url

    def start(self, timeout: float = 60) -> SparkCluster:
        self.master.start(timeout)
        for worker in self.workers:
            worker.start(timeout)
        return self

    def stop(self, timeout: float = 30) -> None:
        for worker in self.workers:
            worker.stop(timeout)
        self.master.stop(timeout)

    @property
    def pids(self) -> list[int]:
        """The master's, then each worker's."""
        return [d.pid for d in (self.master, *self.workers) if d.pid is not None]

    def running_applications(self) -> list[dict[str, Any]]:
        return self.master.status().get("activeapps", [])

    def wait_idle(self, timeout: float = 60) -> bool:
        """True once no application holds the cluster (a driver that ended has been noticed)."""
        return wait_until(lambda: not self.running_applications(), timeout, interval=0.5)

    def executor_pids(self) -> list[int]:
        return [pid for worker in self.workers for pid in worker.executor_pids()]

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
