#!/bin/bash
# The executor-loss reproduction of issue 52 (../shared/repro/executor-loss/run.sh), with what its
# diagnosis needed: an executor killed while a new job's first micro-batches run, on a freshly started
# standalone cluster (2 workers) with an HDFS checkpoint. Changed from the shipped script:
#   * the producer is idempotent: a producer that retries without idempotence reorders a partition
#     (docs/design/recomputation.md), and the oracle (the memory engine over the file) then no longer
#     describes the topic; after producing, each partition is read back and compared with the file;
#   * DELIVERY (4th argument, exactly-once by default): with at-least-once a replayed partition may be
#     written again, so the distinct events written and the distinct dead letters (by source partition
#     and offset) must equal the oracle's; written-twice counts are printed, not judged.
# The stream comes from the shipped make_stream.py (80,000 records, keyed over 4 partitions, 0.2%
# hostile), read 4,000 records per micro-batch (availableNow).
#
#   tests/support/faults/executor_loss.sh [SEED] [KILL_AFTER_SECONDS] [kill|nokill] [exactly-once|at-least-once]
#
# Run from the repository root after `scripts/bootstrap --services`, with ../shared beside it.
set -u
SEED=${1:-20261126}; KILL_AFTER=${2:-50}; KILL=${3:-kill}; DELIVERY=${4:-exactly-once}
H=${EXECUTOR_LOSS_REPRO:-../shared/repro/executor-loss}; W=$(mktemp -d); S=$(date +%s)
[ -f "$H/make_stream.py" ] || { echo "no $H/make_stream.py: run from the repository root with ../shared beside it, or set EXECUTOR_LOSS_REPRO"; exit 2; }
[ -x .venv/bin/dedup ] || { echo "run from the repository root after scripts/bootstrap --services"; exit 2; }
trap '.venv/bin/python -m deploy.local.services down --dir "$W/svc" --purge >/dev/null 2>&1; echo "work directory: $W"' EXIT
.venv/bin/python -m deploy.local.services up --dir "$W/svc" --spark-workers 2 --hdfs >"$W/services.log" 2>&1 \
  || { echo "cannot start the services (see $W/services.log)"; exit 2; }
source <(grep -E '^(export )?[A-Z_]+=' "$W/svc/services.env" | sed 's/^export //; s/^/export /')
python3 "$H/make_stream.py" "$W/ev.jsonl" 80000 "$SEED"
.venv/bin/dedup run --engine memory --source "file:$W/ev.jsonl" --sink "file:$W/oracle.jsonl" --dlq "file:$W/odlq.jsonl" \
  --summary-json "$W/oracle.json" >/dev/null 2>&1 || { echo "oracle failed"; exit 1; }
.venv/bin/python - "$KAFKA" "$W/ev.jsonl" "$S" <<'PY'
import sys, json, zlib
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
bs, path, s = sys.argv[1:]
a = AdminClient({"bootstrap.servers": bs})
for f in a.create_topics([NewTopic(n, p, 1) for n, p in ((f"cin{s}", 4), (f"cout{s}", 4), (f"cdlq{s}", 1))]).values(): f.result(30)
p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "enable.idempotence": True}); want = {}
for line in open(path, "rb"):
    raw = line.rstrip(b"\n")
    try: key = json.loads(raw)["uniqueValue"].encode()
    except Exception: key = None
    p.produce(f"cin{s}", raw, key, partition=(zlib.crc32(key) % 4) if key else 0)
    want.setdefault((zlib.crc32(key) % 4) if key else 0, []).append(raw)
p.flush()
from confluent_kafka import Consumer, TopicPartition
for part, rows in sorted(want.items()):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"chk{part}", "enable.auto.commit": False})
    c.assign([TopicPartition(f"cin{s}", part, 0)]); got = []
    while len(got) < len(rows):
        got += [m.value() for m in c.consume(1000, 5) if m.error() is None]
    c.close()
    print(f"partition {part}: {len(got)} records, in order: {got == rows}")
    assert got == rows
PY
start=$(date +%s)
DEDUP_KAFKA__DELIVERY=$DELIVERY DEDUP_SPARK__CHECKPOINT="$HDFS/repro/ck-$start" DEDUP_SPARK__AVAILABLE_NOW=true \
  timeout 900 .venv/bin/dedup run --engine spark --master "$SPARK_MASTER" --no-progress \
  --source "kafka://$KAFKA/cin$S?maxOffsetsPerTrigger=4000" --sink "kafka://$KAFKA/cout$S" --dlq "kafka://$KAFKA/cdlq$S" \
  --summary-json "$W/spark.json" > "$W/spark.log" 2>&1 &
job=$!
sleep "$KILL_AFTER"
ex=$(pgrep -f CoarseGrainedExecutorBackend | head -1)
[ "$KILL" = kill ] && [ -n "$ex" ] && kill -9 "$ex" && echo "killed executor $ex $KILL_AFTER s after the job started"
wait $job; rc=$?
echo "spark engine exit $rc after $(( $(date +%s) - start )) s"
.venv/bin/python - "$KAFKA" "$W/oracle.jsonl" "$W/odlq.jsonl" "$S" "$start" "$DELIVERY" <<'PY'
import sys, json, time, collections
from confluent_kafka import Consumer
bs, oracle, odlq, s, start, delivery = sys.argv[1:]
want = sorted(json.loads(l)["id"] for l in open(oracle) if l.strip())
wdlq = sum(1 for l in open(odlq) if l.strip())
def read(topic):
    c = Consumer({"bootstrap.servers": bs, "group.id": f"r-{topic}-{time.time()}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe([topic]); got, idle = [], time.time()
    while time.time() - idle < 8:
        for m in c.consume(1000, 0.5):
            if m.error() is None: got.append(m); idle = time.time()
    c.close(); return got
out = sorted(json.loads(m.value())["id"] for m in read(f"cout{s}"))
dlq = read(f"cdlq{s}")
print(f"out {len(out)} (oracle {len(want)}), missing {len(set(want)-set(out))}, extra {len(set(out)-set(want))}, "
      f"doubled {len(out)-len(set(out))}; dead letters {len(dlq)} (oracle {wdlq})")
late = collections.defaultdict(list)
for m in dlq:
    h = {k: (v.decode() if v else "") for k, v in (m.headers() or [])}
    if h.get("dedup.reason") == "late":
        late[h.get("dedup.source.partition")].append((int(h["dedup.source.offset"]), round(float(h["dedup.time"]) - int(start))))
for p, xs in sorted(late.items()):
    xs.sort(); times = collections.Counter(t for _, t in xs)
    print(f"  partition {p}: {len(xs)} late, offsets {xs[0][0]}-{xs[-1][0]}, dead-letter time (s after start): {dict(sorted(times.items()))}")
if delivery == "exactly-once":
    ok = out == want and len(dlq) == wdlq
else:  # at-least-once: a replayed partition may be written again; distinct events and dead letters must match
    spots = {tuple((k, v) for k, v in (m.headers() or []) if k in ("dedup.source.partition", "dedup.source.offset")) for m in dlq}
    reasons = collections.Counter(dict(m.headers() or []).get("dedup.reason") for m in dlq)
    print(f"at-least-once: distinct out {len(set(out))} (oracle {len(want)}), distinct dead letters {len(spots)} (oracle {wdlq}), reasons {dict(reasons)}")
    ok = set(out) == set(want) and len(spots) == wdlq
print("exact" if ok else "differs")
sys.exit(0 if ok else 1)
PY
