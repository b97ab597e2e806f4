package streamdedup.stream;

import static org.apache.spark.sql.functions.col;

import java.util.HashMap;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF5;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * Adds {@code seen}: the newest time of the row's rule among the rows of its input partition up
 * to and including it, counted afresh wherever {@code source} or {@code partition} changes (null
 * for rows that are not judged). A Kafka topic-partition's records form one input partition, read
 * in offset order, so {@code seen} is the newest time the source partition showed earlier in the
 * same micro-batch: with the driver's horizon of the batches before ({@link RuleHorizons}) it
 * gives what domain._watermarks calls the horizon of the record, so lateness is judged record by
 * record, as the in-process engines do. Small files packed into one input partition come largest
 * first, not in the order they arrived: each file's split counts on its own.
 *
 * <p>A function of the row's columns that remembers the rows before it: a non-deterministic
 * UDF, so Spark evaluates it once per row, in the partition's order, inside the stage's generated
 * code (no conversion of whole rows to and from objects). Each task deserializes its own copy,
 * so what it remembers starts empty in every task.
 */
public final class RunningNewest implements UDF5<String, Integer, String, Long, Boolean, Long> {
    private transient HashMap<String, Long> newest;
    private transient String source;
    private transient int partition;

    /** {@code in} (columns source, partition, rule, t, judged; rows in source order within each partition) plus {@code seen}. */
    public static Dataset<Row> apply(Dataset<Row> in) {
        UserDefinedFunction running = functions.udf(new RunningNewest(), DataTypes.LongType).asNondeterministic();
        return in.withColumn("seen", running.apply(col("source"), col("partition"), col("rule"), col("t"), col("judged")));
    }

    @Override
    public Long call(String from, Integer part, String rule, Long t, Boolean judged) {
        if (newest == null) {
            newest = new HashMap<>();
        }
        int within = part == null ? 0 : part;
        if (from != null && (!from.equals(source) || within != partition)) {
            newest.clear();
            source = from;
            partition = within;
        }
        if (judged == null || !judged || rule == null || t == null) {
            return null;
        }
        return newest.merge(rule, t, Math::max);
    }
}
