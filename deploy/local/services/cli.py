"""``python -m deploy.local.services up|down|status|topics``: the services, detached, for a demo by hand.

``up`` writes ``DIR/services.env`` and prints it: shell lines that export the addresses for
commands (``KAFKA=127.0.0.1:PORT``, ``REDIS=redis://127.0.0.1:PORT/0``) and set, unexported,
the names the test suite reads (``DEDUP_TEST_KAFKA``, ``DEDUP_TEST_REDIS``) and the pids
(``DEDUP_TEST_KAFKA_PID``, ``DEDUP_TEST_REDIS_PID``). ``up --hdfs`` also starts an HDFS
(NameNode + DataNode): ``HDFS=hdfs://127.0.0.1:PORT``, ``DEDUP_TEST_HDFS`` and its two pids
(``DEDUP_TEST_HDFS_PIDS``). ``up --spark-workers N`` also starts a Spark standalone cluster
of a master and N one-core workers: ``SPARK_MASTER=spark://127.0.0.1:PORT``,
``DEDUP_TEST_SPARK_MASTER`` and its pids (``DEDUP_TEST_SPARK_PIDS``). ``. DIR/services.env``
brings them into a shell. ``topics NAME… --partitions N`` creates the missing topics on that broker, then lists
every topic with its partition and message counts. DIR defaults to ``.cache/local-services``
under the repository root.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from confluent_kafka import KafkaException

from .hdfs import HdfsCluster
from .kafka import KafkaBroker, create_topics, topic_sizes
from .prerequisites import DEFAULT_KAFKA_JARS, DEFAULT_SERVICES_DIR
from .process import ServiceError, pid_alive, pid_cmdline, terminate
from .redis import RedisServer
from .spark_cluster import SparkCluster


def read_env(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith("#"))
    return {k.strip().removeprefix("export "): v.strip() for k, v in pairs}


def env_text(
    broker: KafkaBroker, redis: RedisServer, hdfs: HdfsCluster | None = None, spark: SparkCluster | None = None
) -> str:
    """services.env: the addresses exported for commands; the test suite's names and the pids set."""
    text = (
        f"export KAFKA={broker.bootstrap}\nexport REDIS={redis.url}\n"
        f"DEDUP_TEST_KAFKA={broker.bootstrap}\nDEDUP_TEST_REDIS={redis.url}\n"
        f"DEDUP_TEST_KAFKA_PID={broker.pid}\nDEDUP_TEST_REDIS_PID={redis.pid}\n"
    )
    if hdfs is not None:
        text += (
            f"export HDFS={hdfs.uri}\nDEDUP_TEST_HDFS={hdfs.uri}\n"
            f"DEDUP_TEST_HDFS_PIDS={','.join(str(pid) for pid in hdfs.pids)}\n"
        )
    if spark is not None:
        text += (
            f"export SPARK_MASTER={spark.url}\nDEDUP_TEST_SPARK_MASTER={spark.url}\n"
            f"DEDUP_TEST_SPARK_PIDS={','.join(str(pid) for pid in spark.pids)}\n"
        )
    return text


def env_alive(env: dict[str, str], root: Path) -> tuple[bool, bool]:
    """Are the pids in services.env still our processes (guards against pid reuse)?"""

    def ours(key: str, marker: str) -> bool:
        pid = env.get(key, "")
        return pid.isdigit() and pid_alive(int(pid)) and marker in pid_cmdline(int(pid))

    # redis-server sets its title to "redis-server 127.0.0.1:PORT"
    redis_addr = env.get("DEDUP_TEST_REDIS", "").removeprefix("redis://").split("/", 1)[0]
    return ours("DEDUP_TEST_KAFKA_PID", str(root / "kafka")), bool(redis_addr) and ours(
        "DEDUP_TEST_REDIS_PID", redis_addr
    )


def hdfs_pids(env: dict[str, str], root: Path) -> list[int]:
    """The HDFS daemons of services.env that are still ours (DataNode first, as they stop)."""
    pids = [int(p) for p in env.get("DEDUP_TEST_HDFS_PIDS", "").split(",") if p.isdigit()]
    return [pid for pid in reversed(pids) if pid_alive(pid) and str(root / "hdfs") in pid_cmdline(pid)]


def spark_pids(env: dict[str, str], root: Path) -> list[int]:
    """The Spark master and workers of services.env that are still ours (workers first, as they stop)."""
    pids = [int(p) for p in env.get("DEDUP_TEST_SPARK_PIDS", "").split(",") if p.isdigit()]
    return [pid for pid in reversed(pids) if pid_alive(pid) and str(root / "spark") in pid_cmdline(pid)]


def stop_from_env(env: dict[str, str], root: Path, timeout: float = 30) -> None:
    for alive, key in zip(env_alive(env, root), ("DEDUP_TEST_KAFKA_PID", "DEDUP_TEST_REDIS_PID")):
        if alive:
            terminate(int(env[key]), None, timeout)
    for pid in spark_pids(env, root) + hdfs_pids(env, root):
        terminate(pid, None, timeout)


def up(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env_file = root / "services.env"
    env = read_env(env_file)
    if (
        env
        and all(env_alive(env, root))
        and (not args.hdfs or len(hdfs_pids(env, root)) == 2)
        and len(spark_pids(env, root)) == (args.spark_workers + 1 if args.spark_workers else 0)
    ):
        print(env_file.read_text(), end="")
        return 0
    stop_from_env(env, root)  # half-alive leftovers
    root.mkdir(parents=True, exist_ok=True)
    broker = KafkaBroker(
        root / "kafka",
        Path(args.jars_dir) if args.jars_dir else None,
        args.kafka_port,
        num_partitions=args.partitions,
        detach=True,
    )
    hdfs = HdfsCluster(root / "hdfs", port=args.hdfs_port, detach=True) if args.hdfs else None
    spark = SparkCluster(root / "spark", args.spark_workers, detach=True) if args.spark_workers else None
    broker.check_jars()  # before redis starts: fail fast
    if hdfs is not None:
        hdfs.namenode.check_jars()
    redis = RedisServer(root / "redis", args.redis_port, detach=True).start()
    try:
        broker.start(timeout=args.timeout)
        if hdfs is not None:
            hdfs.start(timeout=args.timeout)
        if spark is not None:
            spark.start(timeout=args.timeout)
    except BaseException:
        for started in (spark, hdfs, broker, redis):
            if started is not None:
                started.stop()
        raise
    text = env_text(broker, redis, hdfs, spark)
    tmp = env_file.with_suffix(".env.tmp")
    tmp.write_text(text)
    tmp.replace(env_file)
    print(text, end="")
    print(f"# kafka started in {broker.last_start_seconds:.1f}s; logs in {broker.logs_dir}", file=sys.stderr)
    if hdfs is not None:
        print(f"# hdfs started in {hdfs.last_start_seconds:.1f}s; logs in {hdfs.workdir}/*/logs", file=sys.stderr)
    if spark is not None:
        print(
            f"# spark master and {len(spark.workers)} worker(s) up; logs in {root / 'spark'}/*/daemon.log",
            file=sys.stderr,
        )
    return 0


def down(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env_file = root / "services.env"
    stop_from_env(read_env(env_file), root, timeout=args.timeout)
    env_file.unlink(missing_ok=True)
    if args.purge and root.exists():
        shutil.rmtree(root)
    return 0


def status(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env = read_env(root / "services.env")
    kafka_alive, redis_alive = env_alive(env, root)
    print(f"kafka: {'up ' + env['DEDUP_TEST_KAFKA'] if kafka_alive else 'down'}")
    print(f"redis: {'up ' + env['DEDUP_TEST_REDIS'] if redis_alive else 'down'}")
    hdfs_alive = len(hdfs_pids(env, root)) == 2
    if "DEDUP_TEST_HDFS" in env:
        print(f"hdfs:  {'up ' + env['DEDUP_TEST_HDFS'] if hdfs_alive else 'down'}")
    wanted = len(env.get("DEDUP_TEST_SPARK_PIDS", "").split(",")) if "DEDUP_TEST_SPARK_MASTER" in env else 0
    spark_alive = len(spark_pids(env, root)) == wanted
    if wanted:
        print(f"spark: {'up ' + env['DEDUP_TEST_SPARK_MASTER'] if spark_alive else 'down'}")
    return 0 if (kafka_alive and redis_alive and (hdfs_alive or "DEDUP_TEST_HDFS" not in env) and spark_alive) else 1


def topics(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env = read_env(root / "services.env")
    if not env_alive(env, root)[0]:
        raise ServiceError(f"kafka is not up (no running broker in {root}): run 'up' first")
    if args.names:
        create_topics(env["DEDUP_TEST_KAFKA"], *args.names, partitions=args.partitions)
    for name, (partitions, messages) in topic_sizes(env["DEDUP_TEST_KAFKA"]).items():
        print(f"{name:<24} {partitions:>3} partitions {messages:>10} messages")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m deploy.local.services", description="Local Kafka (KRaft) + redis-server (+ HDFS) for tests."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    start = sub.add_parser("up", help="start the services detached; write DIR/services.env")
    start.add_argument("--kafka-port", type=int, default=None)
    start.add_argument("--redis-port", type=int, default=None)
    start.add_argument("--partitions", type=int, default=1, help="num.partitions (default 1)")
    start.add_argument("--jars-dir", default=None, help=f"default {DEFAULT_KAFKA_JARS}")
    start.add_argument(
        "--hdfs", action="store_true", help="also an HDFS (NameNode + DataNode), for hdfs:// checkpoints"
    )
    start.add_argument("--hdfs-port", type=int, default=None, help="the NameNode's RPC port (default: a free one)")
    start.add_argument(
        "--spark-workers",
        type=int,
        default=0,
        metavar="N",
        help="also a Spark standalone cluster: a master and N workers of one core each",
    )
    start.add_argument("--timeout", type=float, default=120)
    stop = sub.add_parser("down", help="stop services started by 'up'")
    stop.add_argument("--purge", action="store_true", help="also delete DIR (all data)")
    stop.add_argument("--timeout", type=float, default=30)
    check = sub.add_parser("status", help="exit 0 if every service started by 'up' is up")
    listing = sub.add_parser(
        "topics",
        help="create the topics NAMES that do not exist, then list every topic with its partitions and messages",
    )
    listing.add_argument("names", nargs="*", metavar="NAME")
    listing.add_argument("--partitions", type=int, default=1, help="of each topic created (default 1)")
    for command in (start, stop, check, listing):
        command.add_argument("--dir", default=str(DEFAULT_SERVICES_DIR))
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return {"up": up, "down": down, "status": status, "topics": topics}[args.cmd](args)
    except (ServiceError, KafkaException) as exc:
        print(f"services: {exc}", file=sys.stderr)
        return 1
