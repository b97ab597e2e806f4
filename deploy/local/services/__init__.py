"""Real local test services: a single-node Apache Kafka 4.x broker (KRaft), redis-server and Prometheus.

Everything listens on 127.0.0.1 only, on free ports. One module per job:

* ``process``: supervision of one server process (``Service``: start and wait until ready,
  re-pick taken ports, stop with SIGTERM then SIGKILL, kill for fault tests),
* ``kafka``: ``KafkaBroker(Service)`` and ``create_topics`` (confluent-kafka's AdminClient),
* ``redis``: ``RedisServer(Service)``,
* ``prometheus``: ``PrometheusServer(Service)``, scraping given targets, with ``query``,
* ``hdfs``: ``HdfsCluster``, a NameNode and a DataNode (``uri`` -> ``hdfs://127.0.0.1:PORT``),
* ``spark_cluster``: ``SparkCluster``, a Spark standalone master and N workers (``url``),
* ``prerequisites``: where java, redis-server, prometheus and the jar sets are,
* ``cli``: ``python -m deploy.local.services up|down|status|topics``.

Prerequisites (installed by ``scripts/bootstrap-services.sh``, idempotent): a Java 17+
``java``, the broker's jars in ``.cache/jars/kafka-broker/`` (from
``deploy/local/jars/kafka-broker/pom.xml``), ``redis-server``, ``prometheus``; and the project's ./.venv
(confluent-kafka, redis).

Library use, with the repository root on ``sys.path`` (``deploy`` is a namespace package)::

    from deploy.local import services

    broker = services.KafkaBroker(tmp_path / "kafka")      # jars_dir defaults to .cache/jars/kafka-broker
    broker.start()                                          # formats storage on first start
    broker.create_topic("events", partitions=3)
    ... broker.bootstrap  -> "127.0.0.1:PORT"
    broker.restart()    # same ports, same data dirs: committed data survives
    broker.kill()       # SIGKILL (fault tests); start() again recovers the log
    broker.stop()

    redis = services.RedisServer(tmp_path / "redis")       # appendonly=True to survive restarts
    redis.start(); redis.url -> "redis://127.0.0.1:PORT/0"; redis.stop()

    prom = services.PrometheusServer(tmp_path / "prom", {"streamdedup": ["127.0.0.1:9109"]})
    prom.start(); prom.url -> "http://127.0.0.1:PORT"; prom.query("up") -> [{"metric": …, "value": …}]
    prom.stop()

Unless ``detach=True``, the service processes get SIGKILL when the Python thread that
started them exits (Linux parent-death signal via ``setpriv --pdeathsig``), so a crashed
or killed test run leaves no broker behind. Start them from the main thread (pytest
fixtures run there); ``detach=True`` is what the CLI uses.
"""

from .hdfs import HdfsCluster
from .kafka import KafkaBroker, create_topics
from .prerequisites import DEFAULT_KAFKA_JARS, DEFAULT_SPARK_KAFKA_JARS, spark_kafka_jars
from .process import ServiceError, find_free_port, pid_alive
from .prometheus import PrometheusServer
from .redis import RedisServer
from .spark_cluster import SparkCluster

__all__ = [
    "DEFAULT_KAFKA_JARS",
    "DEFAULT_SPARK_KAFKA_JARS",
    "HdfsCluster",
    "KafkaBroker",
    "PrometheusServer",
    "RedisServer",
    "ServiceError",
    "SparkCluster",
    "create_topics",
    "find_free_port",
    "pid_alive",
    "spark_kafka_jars",
]
