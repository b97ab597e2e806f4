"""The ``kafka.config`` setting (librdkafka names) as options of Spark's Kafka source and sink.

Spark's connector runs the Java Kafka client and takes its settings as ``kafka.``-prefixed
options. The names both clients share (``security.protocol``, ``sasl.mechanism``,
``ssl.key.password``, ``client.id``…) pass through; the librdkafka-only ones are mapped:

* ``sasl.username`` + ``sasl.password`` → ``sasl.jaas.config`` with the login module of
  ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512);
* ``ssl.ca.location`` → a PEM trust store (``ssl.truststore.type=PEM``,
  ``ssl.truststore.location``);
* ``ssl.certificate.location`` + ``ssl.key.location`` → a PEM key store holding the
  certificate chain and the key (the files are read here, on the driver, so executors
  need no copy).

A key prefixed ``consumer.`` applies to the source only, ``producer.`` to the sinks only
(as for the kafka engine). ``ValueError`` names a setting that cannot be mapped. The values
are secrets: the options are never logged (``adapters.kafka._config.redacted`` shows them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.kafka import client_settings

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
LIBRDKAFKA_ONLY = (
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "sasl.mechanisms",
)


def spark_kafka_options(settings: Mapping[str, Any] | None, role: str) -> dict[str, str]:
    """Spark reader (``role="consumer"``) or writer (``"producer"``) options for ``settings``."""
    config = client_settings(settings, role)
    if "sasl.mechanisms" in config:
        config.setdefault("sasl.mechanism", config["sasl.mechanisms"])
    java = {k: v for k, v in config.items() if k not in LIBRDKAFKA_ONLY}
    java.update(_sasl(config))
    java.update(_trust_store(config))
    java.update(_key_store(config))
    return {f"kafka.{key}": value for key, value in java.items()}


def _sasl(config: dict[str, str]) -> dict[str, str]:
    if "sasl.username" not in config and "sasl.password" not in config:
        return {}
    if "sasl.username" not in config or "sasl.password" not in config:
        raise ValueError("sasl.username and sasl.password go together")
    mechanism = config.get("sasl.mechanism", "PLAIN").upper()
    if mechanism not in LOGIN_MODULES:
        raise ValueError(
            f"sasl.mechanism {mechanism!r} has no username/password login module in Java's "
            f"Kafka client (use {', '.join(LOGIN_MODULES)}, or give sasl.jaas.config)"
        )
    user, password = json.dumps(config["sasl.username"]), json.dumps(config["sasl.password"])
    return {
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f"{LOGIN_MODULES[mechanism]} required username={user} password={password};",
    }


def _trust_store(config: dict[str, str]) -> dict[str, str]:
    location = config.get("ssl.ca.location")
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": location} if location else {}


def _key_store(config: dict[str, str]) -> dict[str, str]:
    certificate, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
    if not certificate and not key:
        return {}
    if not certificate or not key:
        raise ValueError("ssl.certificate.location and ssl.key.location go together")
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": _read(certificate, "ssl.certificate.location"),
        "ssl.keystore.key": _read(key, "ssl.key.location"),
    }


def _read(path: str, name: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"{name}: cannot read {path}: {exc.strerror}") from None
