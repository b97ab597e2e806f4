package streamdedup.output;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The executor writer as a Spark streaming sink (DataSource V2, {@code STREAMING_WRITE}):
 * {@code writeStream.format("streamdedup.output.KafkaSink")} writes each micro-batch's records
 * (the six record columns first, {@code output._spark_writer.with_records}) with no call into
 * the Python driver.
 *
 * Each task writes its partition as {@link KafkaBatchWriter} does ({@link KafkaBatchWriter.PartitionWrite}:
 * at-least-once, sent and flushed; exactly-once, one transaction under {@code PREFIX-pN} with its
 * commit marker, a committed partition only counted). The epoch Spark hands a streaming write is
 * the micro-batch's id and the partition the task's, so the exactly-once argument of
 * {@code output._executor_writer} holds as it is. The driver's work around a batch is
 * {@link BatchHooks}: before the batch's tasks (where Spark makes the batch's write, on the
 * stream's thread), the lease's check and the watermarks' {@code prepare}; in {@link
 * StreamingWrite#commit}, before Spark writes its commit log, their {@code advance}; a write
 * Spark aborts is reported to them, and the engine retries the batch per its {@code transient}
 * policy by starting the query again (the batch replayed under its id).
 *
 * Options: {@code hooks} (the {@link BatchHooks} registered by the engine), {@code prefix} and
 * {@code markers} (exactly-once), {@code producer.*} and {@code consumer.*} (Java client settings).
 */
public final class KafkaSink implements TableProvider {
    static final String FAULT_SETTING = "spark.streamdedup.test.writerFault";

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return new StructType();
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new SinkTable(schema);
    }

    private static final class SinkTable implements SupportsWrite {
        private final StructType schema;

        SinkTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return "streamdedup-kafka";
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.STREAMING_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            Map<String, String> options = info.options().asCaseSensitiveMap();
            return new WriteBuilder() {
                @Override
                public Write build() {
                    return new Write() {
                        @Override
                        public StreamingWrite toStreaming() {
                            return new BatchWrite(options, info.queryId());
                        }
                    };
                }
            };
        }
    }

    /** A micro-batch's write: made anew by Spark for every batch, on the stream's thread. */
    private static final class BatchWrite implements StreamingWrite {
        private final Map<String, String> options;
        private final String queryId;

        BatchWrite(Map<String, String> options, String queryId) {
            this.options = options;
            this.queryId = queryId;
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            SparkSession spark = SparkSession.active();
            String batch = spark.sparkContext().getLocalProperty("streaming.sql.batchId");
            BatchHooks hooks = BatchHooks.of(options.get("hooks"));
            if (hooks != null && batch != null) hooks.before(Long.parseLong(batch));
            String fault = spark.conf().get(FAULT_SETTING, null);
            String prefix = options.get("prefix");
            return new Writers(new KafkaBatchWriter(-1, prefixed(options, "producer."), prefixed(options, "consumer."),
                    prefix, options.get("markers"), prefix == null ? null : queryId, fault));
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
            BatchHooks hooks = BatchHooks.of(options.get("hooks"));
            if (hooks == null) return;
            StringBuilder lines = new StringBuilder();
            for (WriterCommitMessage message : messages) {
                if (message != null) lines.append(((Written) message).line).append('\n');
            }
            hooks.after(epochId, lines.toString());
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
            // each task's transaction was aborted by the task (or ends with its producer's fencing)
            BatchHooks hooks = BatchHooks.of(options.get("hooks"));
            if (hooks != null) hooks.aborted(epochId);
        }
    }

    private static HashMap<String, String> prefixed(Map<String, String> options, String prefix) {
        HashMap<String, String> settings = new HashMap<>();
        options.forEach((key, value) -> {
            if (key.startsWith(prefix)) settings.put(key.substring(prefix.length()), value);
        });
        return settings;
    }

    /** Makes each task's writer (serialized into the tasks): the batch's {@link KafkaBatchWriter}. */
    private static final class Writers implements StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final KafkaBatchWriter settings; // of every batch: its batch id is the epoch's

        Writers(KafkaBatchWriter settings) {
            this.settings = settings;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            TaskContext task = TaskContext.get();
            KafkaBatchWriter writer = settings.forBatch(epochId);
            return new PartitionWriter(writer.open(partitionId, task.attemptNumber(), task.stageAttemptNumber()));
        }
    }

    private static final class PartitionWriter implements DataWriter<InternalRow> {
        private final KafkaBatchWriter.PartitionWrite write;

        PartitionWriter(KafkaBatchWriter.PartitionWrite write) {
            this.write = write;
        }

        @Override
        public void write(InternalRow row) {
            write.add(row);
        }

        @Override
        public WriterCommitMessage commit() {
            return new Written(write.commit());
        }

        @Override
        public void abort() {
            write.abort();
        }

        @Override
        public void close() {
        }
    }

    /** A task's JSON line (its partition, whether it wrote or skipped, its counts). */
    private static final class Written implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
        final String line;

        Written(String line) {
            this.line = line;
        }
    }
}
