package streamdedup.output;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Writes a micro-batch's Kafka records from the executors: each task writes its own partition.
 *
 * The rows start with {@code (topic, key, value, headers, bucket, input)} (a null topic: counted,
 * not written; {@code output._spark_writer.accounted_records}, or a batch of a stream that carries
 * them ahead of its own columns: {@code with_records}). With a transactional prefix
 * (exactly-once) a task writes its partition in one Kafka transaction under the
 * transactional id {@code PREFIX-pN}: stable for the query and the partition, so a retried
 * task attempt, or the same partition of a replayed micro-batch, fences the attempt before
 * it. The transaction carries its commit marker ({@link Markers}): a record keyed by the
 * transactional id on the marker topic, and the offset {@code batch + 1} committed for the
 * consumer group {@code PREFIX-pN} on the marker topic's partition 0 with the same JSON as
 * metadata, the marker's one-lookup index. Before writing, a task reads that offset
 * (stable offsets only: the previous attempt's transaction was resolved by
 * {@code initTransactions}) and does not write a partition whose batch is committed: it still
 * reads the partition's rows, so the state the operator commits is this judgement's, and
 * fails unless they count as the committed marker says ({@link Markers#requireSameCounts}):
 * a recomputed batch that judged otherwise than the output already committed stops the
 * query instead of passing unnoticed. A task of a retried attempt or of a resubmitted stage
 * starts from a fresh producer, whose {@code initTransactions} ends what the attempt before
 * left open. Without a prefix (at-least-once) the partition is sent by an idempotent
 * producer and flushed.
 *
 * Each task returns one JSON line: its partition, whether it wrote or skipped, and how many
 * records it wrote per topic. The driver only collects these lines, never the records.
 * Tasks read Spark's internal rows as the plan produces them, as Spark's own Kafka writer
 * does: turning each into an external {@code Row} cost a third more CPU per record
 * (bench/kafka_writer_bench.py).
 */
public final class KafkaBatchWriter implements FlatMapFunction<Iterator<InternalRow>, String> {
    private static final long serialVersionUID = 1L;

    private final long batch;
    private final HashMap<String, String> producerConfig;
    private final HashMap<String, String> consumerConfig;
    private final String prefix;
    private final String markerTopic;
    private final String queryId;
    private final String fault;

    KafkaBatchWriter(long batch, Map<String, String> producerConfig, Map<String, String> consumerConfig,
                     String prefix, String markerTopic, String queryId, String fault) {
        this.batch = batch;
        this.producerConfig = new HashMap<>(producerConfig);
        this.consumerConfig = new HashMap<>(consumerConfig);
        this.prefix = prefix;
        this.markerTopic = markerTopic;
        this.queryId = queryId;
        this.fault = fault;
    }

    /** The same writer for micro-batch {@code batch}. */
    KafkaBatchWriter forBatch(long batch) {
        return new KafkaBatchWriter(batch, producerConfig, consumerConfig, prefix, markerTopic, queryId, fault);
    }

    /**
     * Writes {@code records}, one task per partition, and returns each task's JSON line.
     * {@code prefix} null: at-least-once. {@code fault}: a test's injected failure ({@link Faults}), or null.
     */
    public static List<String> write(Dataset<Row> records, long batch, Map<String, String> producerConfig,
                                     Map<String, String> consumerConfig, String prefix, String markerTopic,
                                     String queryId, String fault) {
        KafkaBatchWriter writer = new KafkaBatchWriter(batch, producerConfig, consumerConfig, prefix, markerTopic,
                queryId, fault);
        return records.queryExecution().toRdd().toJavaRDD().mapPartitions(writer).collect();
    }

    /** Closes this JVM's cached producers and marker consumers (the query ended). */
    public static void closeProducers() {
        Producers.closeAll();
        Markers.closeAll();
    }

    @Override
    public Iterator<String> call(Iterator<InternalRow> rows) throws Exception {
        TaskContext task = TaskContext.get();
        PartitionWrite write = open(task.partitionId(), task.attemptNumber(), task.stageAttemptNumber());
        try {
            while (rows.hasNext()) write.add(rows.next());
        } catch (Throwable failure) { // the rows' own failures too (the operator's, an interrupt)
            write.abort();
            throw failure;
        }
        return Collections.singletonList(write.commit()).iterator();
    }

    /**
     * The write of partition {@code partition} of this batch by a task's attempt: rows pushed one
     * at a time ({@link PartitionWrite#add}), then {@link PartitionWrite#commit}, which returns
     * the task's JSON line; a failure on the way gives the producer up (aborting its transaction)
     * unless a test's fault leaves the transaction open. What a streaming sink's data writer does.
     */
    PartitionWrite open(int partition, int attempt, int stageAttempt) {
        Faults faults = new Faults(fault, batch, partition, stageAttempt + attempt);
        faults.atStart();
        String id = prefix == null ? null : prefix + "-p" + partition;
        boolean retried = attempt > 0 || stageAttempt > 0;
        Producers.Lease lease = Producers.acquire(producerConfig, id, partition, retried);
        PartitionWrite write = new PartitionWrite(lease, id, partition, attempt, faults);
        try {
            OffsetAndMetadata marker = id == null ? null : Markers.committedMarker(consumerConfig, markerTopic, id,
                    queryId, batch);
            write.start(marker);
            return write;
        } catch (RuntimeException | Error failure) {
            write.abort();
            throw failure;
        }
    }

    /** One partition's write (see {@link #open}). */
    final class PartitionWrite {
        private final Producers.Lease lease;
        private final String id; // the transactional id, null at-least-once
        private final int partition;
        private final int attempt;
        private final Faults faults;
        private final AtomicReference<Exception> failed = new AtomicReference<>();
        private final Counts buckets = new Counts();
        private final Counts sent = new Counts();
        private OffsetAndMetadata committed; // the marker of this partition's batch, committed before
        private KafkaProducer<byte[], byte[]> producer; // null: counts the rows, sends nothing
        private long in;
        private UTF8String lastTopic;
        private String topic;
        private boolean done;

        PartitionWrite(Producers.Lease lease, String id, int partition, int attempt, Faults faults) {
            this.lease = lease;
            this.id = id;
            this.partition = partition;
            this.attempt = attempt;
            this.faults = faults;
        }

        private void start(OffsetAndMetadata marker) {
            committed = marker;
            if (marker == null) {
                producer = lease.producer;
                if (id != null) producer.beginTransaction();
            }
        }

        /**
         * Counts a row and sends it when it has a topic: {@code in} (rows whose {@code input} is
         * true), each {@code bucket}, and {@code sent:TOPIC} per topic. A partition committed
         * before, judged again, is only counted (reading its rows also commits its state).
         */
        void add(InternalRow row) {
            if (failed.get() != null) throw undelivered();
            if (!row.isNullAt(5) && row.getBoolean(5)) in++;
            if (!row.isNullAt(4)) buckets.add(row.getUTF8String(4));
            if (row.isNullAt(0)) return;
            UTF8String topicBytes = row.getUTF8String(0);
            if (!topicBytes.equals(lastTopic)) {
                lastTopic = topicBytes.clone();
                topic = lastTopic.toString();
            }
            if (producer != null) {
                producer.send(new ProducerRecord<>(topic, null, row.isNullAt(1) ? null : row.getBinary(1),
                                row.isNullAt(2) ? null : row.getBinary(2), headers(row)),
                        (metadata, exception) -> {
                            if (exception != null) failed.compareAndSet(null, exception);
                        });
            }
            sent.add(topicBytes);
        }

        /**
         * Flushes (the first failed delivery is raised) and, with exactly-once, commits the
         * transaction with its marker; a partition committed before fails unless it counted
         * the same ({@link Markers#requireSameCounts}). Returns the task's JSON line.
         */
        String commit() {
            try {
                if (producer != null) producer.flush();
                if (failed.get() != null) throw undelivered();
                Map<String, Long> counts = new TreeMap<>(buckets.named(""));
                counts.putAll(sent.named("sent:"));
                if (in > 0) counts.put("in", in);
                String line;
                if (committed != null) {
                    Markers.requireSameCounts(committed, batch, partition, counts);
                    line = outcome(partition, attempt, true, counts);
                } else {
                    faults.beforeCommit();
                    if (id != null) commitTransaction(counts);
                    line = outcome(partition, attempt, false, counts);
                    faults.afterCommit();
                }
                done = true;
                Producers.release(lease);
                return line;
            } catch (RuntimeException | Error failure) {
                abort();
                throw failure;
            }
        }

        /** Gives the producer up (its transaction aborted), unless a test's fault leaves it open. */
        void abort() {
            if (done) return;
            done = true;
            if (!faults.leavesTransactionOpen()) Producers.discard(lease, id != null);
        }

        private void commitTransaction(Map<String, Long> counts) {
            String marker = Markers.marker(id, queryId, batch, partition, counts);
            producer.send(new ProducerRecord<>(markerTopic, 0, id.getBytes(StandardCharsets.UTF_8),
                    marker.getBytes(StandardCharsets.UTF_8)));
            producer.sendOffsetsToTransaction(
                    Collections.singletonMap(new TopicPartition(markerTopic, 0),
                            new OffsetAndMetadata(batch + 1, marker)),
                    new ConsumerGroupMetadata(id));
            producer.commitTransaction();
        }

        private KafkaWriteFailed undelivered() {
            return new KafkaWriteFailed("a record was not delivered: " + failed.get(), failed.get());
        }
    }

    private static List<Header> headers(InternalRow row) {
        if (row.isNullAt(3)) return null;
        ArrayData entries = row.getArray(3);
        List<Header> headers = new ArrayList<>(entries.numElements());
        for (int i = 0; i < entries.numElements(); i++) {
            InternalRow entry = entries.getStruct(i, 2);
            headers.add(new RecordHeader(entry.getUTF8String(0).toString(),
                    entry.isNullAt(1) ? null : entry.getBinary(1)));
        }
        return headers;
    }

    /** Counts per string value of a column, keyed by Spark's own bytes (no String per row). */
    private static final class Counts {
        private final Map<UTF8String, long[]> byValue = new HashMap<>();

        void add(UTF8String value) {
            long[] count = byValue.get(value);
            if (count == null) byValue.put(value.clone(), count = new long[1]);
            count[0]++;
        }

        Map<String, Long> named(String prefix) {
            Map<String, Long> named = new TreeMap<>();
            byValue.forEach((value, count) -> named.put(prefix + value, count[0]));
            return named;
        }
    }

    private static String outcome(int partition, int attempt, boolean skipped, Map<String, Long> counts) {
        StringBuilder json = new StringBuilder("{\"partition\":").append(partition)
                .append(",\"attempt\":").append(attempt).append(",\"skipped\":").append(skipped).append(",\"counts\":{");
        String sep = "";
        for (Map.Entry<String, Long> entry : counts.entrySet()) {
            json.append(sep).append(Markers.quote(entry.getKey())).append(':').append(entry.getValue());
            sep = ",";
        }
        return json.append("}}").toString();
    }

    /** A record could not be delivered: the task fails, and its transaction (if any) is aborted. */
    public static final class KafkaWriteFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        KafkaWriteFailed(String message, Throwable cause) {
            super(message, cause);
        }
    }
}
