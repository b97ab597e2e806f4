"""A Prometheus server on a loopback port, scraping given targets: for tests that query what a
real Prometheus made of the service's ``/metrics`` (and to look at one by hand)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from .prerequisites import prometheus_server
from .process import LOOPBACK, Service, ServiceError


class PrometheusServer(Service):
    """``prometheus`` with a config of its own in ``workdir``: one scrape job per entry of
    ``targets`` (job name -> ``HOST:PORT`` targets), every ``scrape_interval``, and the rule
    files ``rule_files`` evaluated as often. Its data lives in ``workdir/data`` and survives
    restart(). ``query`` asks its HTTP API; it raises ServiceError when Prometheus refuses the
    expression or cannot be reached.
    """

    NAME = "prometheus"

    def __init__(
        self,
        workdir: Path,
        targets: dict[str, list[str]],
        port: int | None = None,
        *,
        scrape_interval: str = "1s",
        rule_files: tuple[Path, ...] = (),
        detach: bool = False,
    ) -> None:
        workdir = Path(workdir).resolve()
        super().__init__(workdir, port, detach=detach, stdout_log=workdir / "prometheus.log")
        self.targets = targets
        self.scrape_interval = scrape_interval
        self.rule_files = [str(Path(f).resolve()) for f in rule_files]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.workdir / "prometheus.yml"

    def config(self) -> dict[str, Any]:
        interval = self.scrape_interval
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": self.rule_files,
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(targets)}]}
                for job, targets in self.targets.items()
            ],
        }

    def _prepare(self) -> None:
        super()._prepare()
        self.config_file.write_text(yaml.safe_dump(self.config(), sort_keys=False))

    def _command(self) -> list[str]:
        return [
            prometheus_server(),
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--log.level=warn",
        ]  # fmt: skip

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now: ``[{"metric": {labels}, "value": [time, "text"]}, …]``
        (a scalar comes as one such entry without labels)."""
        data = self._api("query", query=expr)
        return data["result"] if data["resultType"] == "vector" else [{"metric": {}, "value": data["result"]}]

    def rules(self) -> list[dict[str, Any]]:
        """Every alerting and recording rule loaded, with its ``health`` and ``lastError``."""
        return [rule for group in self._api("rules")["groups"] for rule in group["rules"]]

    def _api(self, endpoint: str, **params: str) -> Any:
        data = urllib.parse.urlencode(params).encode() if params else None
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{endpoint}", data=data, timeout=10) as reply:
                body = json.load(reply)
        except urllib.error.HTTPError as err:
            body = json.load(err)
        except (urllib.error.URLError, OSError) as exc:
            raise ServiceError(f"{self.NAME} at {self.url} cannot be queried: {exc}") from None
        if body.get("status") != "success":
            raise ServiceError(f"{self.NAME} refused {endpoint} {params}: {body.get('error')}")
        return body["data"]
