"""The kafka engine as a process of its own, for the crash tests to kill -9.

    python -m tests.support.engine_runner --bootstrap HOST:PORT --input T --output T --dlq T
        --group G [--state memory|redis://...] [--state-prefix P] [--exactly-once]
        [--batch-size N] [--hang-before-commit N] [--instance NAME | --dynamic] [--follow]

Runs until the input's end (a bounded run), or with ``--follow`` until SIGTERM (one of
several instances of a group). Its ``group.instance.id`` is ``GROUP-NAME`` (static
membership; ``--dynamic``: none). Prints ``BATCH <totals json>`` after every
batch and ``DONE <totals json>`` at the end. A SIGTERM asks for a clean stop from the
process's first statement on (``STARTED`` is printed once the handler is in place: one who
stops a runner it has just started waits for that line); SIGUSR1 prints every thread's stack
to stderr (for a runner that does not stop). ``--hang-before-commit N`` makes the N-th batch
stop after its outputs were flushed and before it is acknowledged (its transaction still
open under exactly-once), printing ``HANGING <first offset> <last offset>``: the worst
moment to die, made deterministic.
"""

from __future__ import annotations

import faulthandler
import signal
import threading

STOP = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: STOP.set())  # before the imports below: they take a second
faulthandler.register(signal.SIGUSR1, all_threads=True)
print("STARTED", flush=True)

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from adapters import SystemClock  # noqa: E402
from adapters.kafka import KafkaSource, build_kafka_engine  # noqa: E402
from adapters.memory import InMemoryStateStore  # noqa: E402
from domain import BatchCommitter, Deduplicator, RawRecord, RuleSet  # noqa: E402


class HangBeforeCommit:
    """Wraps the engine's committer; the ``at``-th commit never happens.

    Before hanging it waits for the coordinator to confirm the earlier batches' offsets
    (sent asynchronously under at-least-once), so that a kill from then on replays exactly
    the hung batch, whatever the machine's load.
    """

    def __init__(self, inner: BatchCommitter, at: int, source: KafkaSource):
        self.inner, self.at, self.source, self.batches = inner, at, source, 0

    def begin(self) -> None:
        self.inner.begin()

    def commit(self, records: Sequence[RawRecord]) -> None:
        self.batches += 1
        if self.batches == self.at:
            self.source.confirm_acknowledged()
            offsets = [r.position.offset for r in records]
            print(f"HANGING {min(offsets)} {max(offsets)}", flush=True)
            time.sleep(3600)
        self.inner.commit(records)

    def abort(self) -> None:
        self.inner.abort()


def state_store(uri: str, prefix: str):
    if uri == "memory":
        return InMemoryStateStore()
    from adapters.redis import RedisStateStore

    return RedisStateStore(uri, key_prefix=prefix)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    core = Deduplicator(RuleSet(), state_store(args.state, args.state_prefix), SystemClock())
    settings = {"session.timeout.ms": "6000"}
    if not args.dynamic:  # static membership: a restarted runner takes over the dead one's partitions at once
        settings["group.instance.id"] = f"{args.group}-{args.instance}"
    if args.transaction_timeout_ms:
        settings["producer.transaction.timeout.ms"] = str(args.transaction_timeout_ms)
    engine = build_kafka_engine(
        core,
        f"kafka://{args.bootstrap}/{args.input}?group={args.group}",
        f"kafka://{args.bootstrap}/{args.output}",
        f"kafka://{args.bootstrap}/{args.dlq}",
        exactly_once=args.exactly_once,
        kafka_settings=settings,
        batch_size=args.batch_size,
        stop_at_end=not args.follow,
    )
    if args.hang_before_commit:
        engine.pipeline.committer = HangBeforeCommit(
            engine.pipeline.committer, args.hang_before_commit, engine.pipeline.source
        )
    engine.on_batch = lambda totals: print("BATCH " + json.dumps(totals.as_dict()), flush=True)
    totals = engine.run(STOP)
    core.state.close()
    print("DONE " + json.dumps(totals.as_dict()), flush=True)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="engine_runner")
    for name in ("--bootstrap", "--input", "--output", "--dlq", "--group"):
        parser.add_argument(name, required=True)
    parser.add_argument("--state", default="memory")
    parser.add_argument("--state-prefix", default="dedup:")
    parser.add_argument("--exactly-once", action="store_true")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--hang-before-commit", type=int, default=0)
    parser.add_argument("--instance", default="runner")
    parser.add_argument("--dynamic", action="store_true")
    parser.add_argument("--transaction-timeout-ms", type=int, help="librdkafka's transaction.timeout.ms")
    parser.add_argument("--follow", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
