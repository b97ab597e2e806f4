package streamdedup.spark;

import java.util.HashMap;
import java.util.Iterator;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Adds {@code seen}: the newest time of the row's rule among the rows of its input partition up
 * to and including it, counted afresh wherever {@code source} changes (null for rows that are
 * not judged). A Kafka topic-partition's records form one input partition, read in offset
 * order, so {@code seen} is the newest time the source partition showed earlier in the same
 * micro-batch: with the driver's horizon of the batches before ({@link RuleHorizons}) it gives
 * what domain.watermarks calls the horizon of the record, so lateness is judged record by
 * record, as the in-process engines do. Small files packed into one input partition come
 * largest first, not in the order they arrived: each file's split counts on its own.
 */
public final class RunningNewest implements MapPartitionsFunction<Row, Row> {
    private final int tIdx, ruleIdx, judgedIdx, sourceIdx;

    private RunningNewest(StructType schema) {
        this.tIdx = schema.fieldIndex("t");
        this.ruleIdx = schema.fieldIndex("rule");
        this.judgedIdx = schema.fieldIndex("judged");
        this.sourceIdx = schema.fieldIndex("source");
    }

    /** {@code in} (columns t, rule, judged, source; rows in source order within each partition) plus {@code seen}. */
    public static Dataset<Row> apply(Dataset<Row> in) {
        StructType schema = in.schema();
        return in.mapPartitions(new RunningNewest(schema), Encoders.row(schema.add("seen", DataTypes.LongType, true)));
    }

    @Override
    public Iterator<Row> call(Iterator<Row> rows) {
        HashMap<String, Long> newest = new HashMap<>();
        return new Iterator<Row>() {
            private String source;

            @Override
            public boolean hasNext() {
                return rows.hasNext();
            }

            @Override
            public Row next() {
                Row row = rows.next();
                String from = row.getString(sourceIdx);
                if (from != null && !from.equals(source)) {
                    newest.clear();
                    source = from;
                }
                Long seen = null;
                if (row.getBoolean(judgedIdx) && !row.isNullAt(ruleIdx) && !row.isNullAt(tIdx)) {
                    seen = newest.merge(row.getString(ruleIdx), row.getLong(tIdx), Math::max);
                }
                Object[] values = new Object[row.length() + 1];
                for (int i = 0; i < row.length(); i++) values[i] = row.get(i);
                values[row.length()] = seen;
                return RowFactory.create(values);
            }
        };
    }
}
