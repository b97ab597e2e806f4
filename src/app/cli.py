"""The ``dedup`` command line: run the service, run the demo, generate test streams."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
from pathlib import Path

from app._collector import long_lived_frozen
from app._container import container_for
from app._demo import prepare as prepare_demo
from app._demo import report as report_demo
from app._errors import SettingsError, UsageError
from app._generator import StreamSpec, generate
from app._logs import configure_logging
from app._metrics_server import MetricsServer
from app._progress import ProgressLine
from app._settings import Settings, load_settings
from app._state_cli import add_state_commands
from app._uris import check_stream_uri
from domain import DEFAULT_BATCH_SIZE, Accounting, DedupError, Engine, PolicyExhausted, SetupError, redact

EXIT_USAGE, EXIT_STOPPED = 2, 3


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (SettingsError, UsageError, SetupError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except PolicyExhausted as exc:
        return fail(
            f"stopped by policy: {exc}. The failing batch was not acknowledged; a restart processes it again.",
            EXIT_STOPPED,
        )
    except DedupError as exc:
        return fail(str(exc), EXIT_STOPPED)
    except KeyboardInterrupt:
        return 130


def installed_version() -> str:
    """The version of the installed package (``pyproject.toml``), or ``unknown`` when run from sources alone."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamdedup")
    except PackageNotFoundError:
        return "unknown"


def fail(message: str, code: int) -> int:
    print(f"dedup: {redact(message)}", file=sys.stderr)
    return code


class OneLineParser(argparse.ArgumentParser):
    """A usage error is one line naming the argument and where the help is, exit 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: {redact(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="dedup", description="Streaming event deduplication.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"dedup {installed_version()}",
        help="print the installed version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add_run(commands.add_parser("run", help="deduplicate a stream"))
    add_demo(commands.add_parser("demo", help="generate a stream with known duplicates and deduplicate it"))
    add_generate(commands.add_parser("generate", help="write a test stream and its expected counts"))
    add_state_commands(commands)
    return parser


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="settings file (YAML, JSON or TOML)")
    parser.add_argument(
        "--engine",
        choices=["memory", "kafka", "spark"],
        help="memory (the default: files and stdin), kafka (Kafka topics, one process) or spark",
    )
    parser.add_argument("--source", help="file:PATH, - (stdin) or kafka://HOST:PORT/TOPIC?group=G")
    parser.add_argument("--sink", help="file:PATH, - (stdout) or kafka://HOST:PORT/TOPIC")
    parser.add_argument("--dlq", help="dead-letter output: file:PATH or kafka://HOST:PORT/TOPIC")
    parser.add_argument("--notifications", help="INVALIDATE notifications input, e.g. kafka://HOST:PORT/TOPIC")
    parser.add_argument("--notifications-out", help="where the invalidate policy publishes INVALIDATE notifications")
    parser.add_argument(
        "--duplicates",
        help="the report of every duplicate, with the first copy it repeats: "
        "file:PATH or kafka://HOST:PORT/TOPIC (off by default)",
    )
    parser.add_argument("--state", help="memory, memory:SNAPSHOT_PATH (kept across runs) or redis://HOST:PORT/DB")
    parser.add_argument(
        "--batch-size",
        type=int,
        help=f"records a batch of the memory and kafka engines holds at most (default {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument("--metrics-port", type=int, help="serve /metrics (Prometheus) and /health on this port")
    parser.add_argument("--master", help="the Spark engine's master: local[N] or spark://HOST:PORT (spark.master)")
    parser.add_argument("--summary-json", type=writable_file, help="write the accounting counts here as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no live progress line on a terminal")
    parser.set_defaults(handler=cmd_run)


def add_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=["memory", "spark"],
        default="spark",
        help="spark (default: local mode, JSONL directories) or memory",
    )
    parser.add_argument("--events", type=positive_int, default=20_000, help="unique events to generate")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("demo-out"),
        help="directory of the demo's stream, outputs and summary (default demo-out)",
    )
    parser.set_defaults(handler=cmd_demo)


def add_generate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--events",
        type=positive_int,
        default=10_000,
        help="unique events (default 10000); the stream also holds their copies and a few invalid and late records",
    )
    parser.add_argument("--dup-ratio", type=fraction, default=0.3, help="copies per unique event, 0 to 1")
    parser.add_argument("--seed", type=int, default=7, help="the same seed writes the same stream (default 7)")
    parser.add_argument(
        "--out",
        required=True,
        help="JSONL file to write, or kafka://HOST:PORT/TOPIC "
        "(an existing topic; each record keyed by its uniqueValue)",
    )
    parser.add_argument("--expected-json", type=writable_file, help="write the expected accounting here")
    parser.set_defaults(handler=cmd_generate)


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}")
    return value


def writable_file(text: str) -> Path:
    """A file a report is written to at the end: its directory must exist now, not after the run."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file path")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the directory {path.parent} does not exist")
    return path


def cmd_run(args: argparse.Namespace) -> int:
    settings = load_settings(
        args.config,
        engine=args.engine,
        source=args.source,
        sink=args.sink,
        dlq=args.dlq,
        notifications=args.notifications,
        notifications_out=args.notifications_out,
        duplicates=args.duplicates,
        state=args.state,
        batch_size=args.batch_size,
        metrics_port=args.metrics_port,
        spark={"master": args.master} if args.master else None,
    )
    progress = None if args.no_progress or not sys.stderr.isatty() else ProgressLine()
    totals = run_engine(settings, progress, settings_file(args.config))
    if settings.log_format == "json":
        logging.getLogger("dedup").info("done: %s", totals.summary_line(), extra={"counts": totals.as_dict()})
    else:
        print(f"dedup: {totals.summary_line()}", file=sys.stderr)
    if args.summary_json:
        args.summary_json.write_text(json.dumps(totals.as_dict(), indent=2) + "\n")
    return 0


def settings_file(config: str | None) -> str | None:
    """The settings file in use (``--config``, else ``DEDUP_CONFIG``), absolute: commands a message
    suggests name it, and run from any directory."""
    path = config or os.environ.get("DEDUP_CONFIG")
    return str(Path(path).resolve()) if path else None


def run_engine(settings: Settings, progress: ProgressLine | None = None, config_file: str | None = None) -> Accounting:
    """Build the configured engine and run it until its input ends or SIGTERM/SIGINT arrives;
    ``config_file``: the file the settings came from (``settings_file``)."""
    configure_logging(settings.log_level, settings.log_format)
    container = container_for(settings, config_file)
    engine: Engine = container.engine()
    server = None
    if settings.metrics_port is not None:
        server = MetricsServer(
            container.metrics(), settings.metrics_port, settings.metrics_host, settings.stall_timeout
        ).start()
    engine.on_batch = batch_listener(progress, server)
    stop = stop_on_signals()
    try:
        with long_lived_frozen():
            return engine.run(stop)
    finally:
        if progress:
            progress.close()
        if server:
            server.stop()
        if settings.engine != "spark":  # the Spark engine's state is its checkpoint (or its executors' Redis)
            container.state_store().close()


def batch_listener(progress: ProgressLine | None, server: MetricsServer | None):
    def on_batch(totals: Accounting) -> None:
        if server:
            server.progressed(totals.records_in)
        if progress:
            progress(totals)

    return on_batch


def stop_on_signals() -> threading.Event:
    """SIGTERM and SIGINT let the running batch finish, then the engine stops cleanly."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    return stop


def cmd_generate(args: argparse.Namespace) -> int:
    if not args.out.startswith(("kafka://", "file:")) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", args.out):
        try:
            check_stream_uri(args.out, "--out")  # a misspelt scheme is named, not written as a local path
        except ValueError as exc:
            raise UsageError(f"invalid setting --out: {exc}") from None
    records, expected = generate(StreamSpec(uniques=args.events, dup_ratio=args.dup_ratio, seed=args.seed))
    try:
        write_stream(args.out.removeprefix("file:"), records)
    except OSError as exc:
        raise UsageError(f"invalid setting --out: cannot write {args.out}: {exc.strerror}") from None
    if args.expected_json:
        args.expected_json.write_text(json.dumps(expected.as_accounting(), indent=2) + "\n")
    print(f"dedup: wrote {len(records):,} records to {redact(str(args.out))}", file=sys.stderr)
    return 0


def write_stream(out: str, records: list[bytes]) -> None:
    """``records`` as a JSONL file, or produced in order to a Kafka topic, each keyed by its
    ``uniqueValue`` as an upstream producer keys it (raises ``KafkaConfigurationError`` for a
    missing topic, ``SinkUnavailable`` when the broker does not take them)."""
    if not out.startswith("kafka:"):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_bytes(b"".join(r + b"\n" for r in records))
        return
    from adapters.kafka import parse_kafka_uri, produce, producer_key, require_topics

    endpoint = parse_kafka_uri(out, "output")
    require_topics([("output", endpoint)], None, timeout=10)
    produce(endpoint, ((None, producer_key(r), r) for r in records))


def cmd_demo(args: argparse.Namespace) -> int:
    demo, source = prepare_demo(args.engine, args.out, StreamSpec(uniques=args.events))
    print(demo.describe(source), file=sys.stderr)
    progress = ProgressLine() if sys.stderr.isatty() else None
    totals = run_engine(load_settings(**demo.settings), progress)
    return report_demo(totals, demo.expected.as_accounting(), demo.outputs)


if __name__ == "__main__":
    sys.exit(main())
