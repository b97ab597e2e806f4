package streamdedup.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The domain's judgement (domain.state.decide under domain.rules) as one JVM stateful operator.
 *
 * Per key, in arrival order ({@code file_time}, {@code source}, {@code ord}: adapters.spark.stream.sources): late when t < horizon - lateness; a duplicate
 * when a live emission lies less than window away (|t - e| < window); otherwise emitted and
 * remembered. An emission is live while watermark < e + window + lateness. The horizon (per
 * rule and source partition) and the watermark (per rule) are the driver's, computed from the
 * earlier micro-batches ({@link RuleHorizons}, domain.watermarks) and fixed for a batch: each
 * task takes its own batch's table by the batch's timestamp, so a task recomputed at any
 * moment judges as the first computation did; the
 * newest time judged per rule and partition goes to a {@link NewestTimes} for the next. An
 * optional long column {@code seen} ({@link RunningNewest}) raises the horizon to the newest time
 * the row's partition showed earlier in the same batch. Neither runs past the batch's second
 * ({@link RuleHorizons.Table#bounded}).
 *
 * Input rows carry their rule: long columns t (s), file_time, ord, window (s) and lateness (s), string
 * columns {@code rule} and {@code lane} (the source partition), and a boolean {@code judged}. Rows with judged = false (invalid, or without a rule) are passed
 * through untouched with verdict {@code pass} and never touch the state. Every input row
 * comes out exactly once with a {@code verdict}: emit, duplicate, late or pass. A duplicate
 * also names the emission it repeats (domain.state.decide): {@code repeats_time} and
 * {@code repeats_owner}, the position of the record that made it ({@code source:partition:offset}
 * of the row's columns {@code source}, {@code partition}, {@code offset}; null when unknown).
 * The old state of a migration is consulted first, as domain.migration.MigratingStateStore does.
 * Idle keys wake on a processing-time timeout and are removed once their rule's watermark
 * has passed all their emissions' retention; otherwise the timeout is re-armed.
 *
 * During a migration (adapters.spark.checkpoint.migration) rows may carry {@code fallback} (array of
 * long: the old state's emission times for the key's old key) and {@code fallback_retention}:
 * those emissions make repeats duplicates while live, but are only read, never stored; and
 * {@code watermark_floor} (s): the old job's watermark, below which the new query's own
 * (which starts afresh) does not go, so lateness is judged as the old job would have.
 *
 * A row with {@code invalidate} = true (optional column; adapters.spark.stream.invalidation) is an
 * INVALIDATE notification for the key: it comes first in its micro-batch (lowest file_time and ord), the
 * key forgets all its emissions (as domain StateStore.invalidate), and the row comes out
 * with verdict {@code invalidated}; it is never late and never stored.
 *
 * Every key it creates or removes is counted in a {@link StateRowCount}.
 */
public final class WindowDedup implements FlatMapGroupsWithStateFunction<String, Row, Emissions, Row> {
    public static final String EMIT = "emit";
    public static final String DUPLICATE = "duplicate";
    public static final String LATE = "late";
    public static final String PASS = "pass";
    public static final String INVALIDATED = "invalidated";

    private final int tIdx, ordIdx, fileTimeIdx, windowIdx, latenessIdx, judgedIdx, fallbackIdx, fallbackRetentionIdx, invalidateIdx;
    private final int watermarkFloorIdx, ruleIdx, laneIdx, seenIdx, sourceIdx, partitionIdx, offsetIdx;
    private final long idleTimeoutMs;
    private final StateRowCount stateRows;
    private final RuleHorizons horizons;
    private final NewestTimes newest;

    private WindowDedup(StructType schema, long idleTimeoutMs, StateRowCount stateRows, RuleHorizons horizons,
                        NewestTimes newest) {
        this.tIdx = schema.fieldIndex("t");
        this.ordIdx = schema.fieldIndex("ord");
        this.fileTimeIdx = schema.fieldIndex("file_time");
        this.windowIdx = schema.fieldIndex("window");
        this.latenessIdx = schema.fieldIndex("lateness");
        this.judgedIdx = schema.fieldIndex("judged");
        this.ruleIdx = schema.fieldIndex("rule");
        this.laneIdx = schema.fieldIndex("lane");
        this.seenIdx = names(schema).indexOf("seen");
        this.sourceIdx = schema.fieldIndex("source");
        this.partitionIdx = schema.fieldIndex("partition");
        this.offsetIdx = schema.fieldIndex("offset");
        this.horizons = horizons;
        this.newest = newest;
        List<String> names = Arrays.asList(schema.fieldNames());
        this.fallbackIdx = names.indexOf("fallback");
        this.fallbackRetentionIdx = names.indexOf("fallback_retention");
        this.watermarkFloorIdx = names.indexOf("watermark_floor");
        this.invalidateIdx = names.indexOf("invalidate");
        this.idleTimeoutMs = idleTimeoutMs;
        this.stateRows = stateRows;
    }

    /** Judge every row of {@code in}, grouped by {@code keyColumn}; adds a {@code verdict} column.
     *  {@code stateRows} (registered with the SparkContext) counts the keys in the state;
     *  {@code horizons} holds what the next batch is judged against, {@code newest} collects its times. */
    public static Dataset<Row> judge(Dataset<Row> in, String keyColumn, long idleTimeoutMs, StateRowCount stateRows,
                                     RuleHorizons horizons, NewestTimes newest) {
        StructType schema = in.schema();
        StructType out = schema.add("verdict", DataTypes.StringType, false)
                .add("repeats_time", DataTypes.LongType, true).add("repeats_owner", DataTypes.StringType, true);
        return in.groupBy(keyColumn)
                 .as(Encoders.STRING(), Encoders.row(schema))
                 .flatMapGroupsWithState(new WindowDedup(schema, idleTimeoutMs, stateRows, horizons, newest),
                         OutputMode.Append(),
                         Encoders.bean(Emissions.class), Encoders.row(out),
                         GroupStateTimeout.ProcessingTimeTimeout());
    }

    @Override
    public Iterator<Row> call(String key, Iterator<Row> rows, GroupState<Emissions> state) {
        RuleHorizons.Table horizons = this.horizons.of(state.getCurrentProcessingTimeMs());
        if (state.hasTimedOut()) {
            long watermark = horizons.watermark(ruleOf(key));
            Emissions stored = state.get();
            if (!keepLive(state, stored.getTimes(), stored.getOwners(), stored.getRetention(), watermark)) {
                counted(state, -1);
            }
            return Collections.emptyIterator();
        }
        List<Row> batch = new ArrayList<>();
        List<Row> out = new ArrayList<>();
        rows.forEachRemaining(row -> {
            if (row.getBoolean(judgedIdx)) batch.add(row); else out.add(withVerdict(row, PASS, null, null));
        });
        if (batch.isEmpty()) return out.iterator();
        batch.sort(this::arrival);
        long window = batch.get(0).getLong(windowIdx), lateness = batch.get(0).getLong(latenessIdx);
        String rule = batch.get(0).getString(ruleIdx);
        long floor = watermarkFloorIdx >= 0 && !batch.get(0).isNullAt(watermarkFloorIdx)
                ? batch.get(0).getLong(watermarkFloorIdx) : Long.MIN_VALUE;
        long watermark = horizons.bounded(Math.max(horizons.watermark(rule), floor));
        boolean existed = state.exists();
        long[] live = new long[0];
        String[] owners = new String[0];
        if (existed) {
            Emissions stored = state.get();
            int[] kept = live(stored.getTimes(), window + lateness, watermark);
            live = select(stored.getTimes(), kept);
            owners = select(stored.getOwners(), kept);
        }
        long[] old = fallback(batch.get(0), watermark);
        for (Row row : batch) {
            if (invalidates(row)) {
                live = new long[0];
                owners = new String[0];
                out.add(withVerdict(row, INVALIDATED, null, null));
                continue;
            }
            long t = row.getLong(tIdx);
            String lane = row.getString(laneIdx);
            newest.add(rule, lane, t);
            int fromOld = withinWindow(old, t, window);
            int fromLive = fromOld >= 0 ? -1 : withinWindow(live, t, window);
            long seen = seenIdx >= 0 && !row.isNullAt(seenIdx) ? row.getLong(seenIdx) : Long.MIN_VALUE;
            long horizon = horizons.bounded(Math.max(Math.max(horizons.horizon(rule, lane), seen), floor));
            if (late(t, horizon, lateness)) {
                out.add(withVerdict(row, LATE, null, null));
            } else if (fromOld >= 0) {
                out.add(withVerdict(row, DUPLICATE, old[fromOld], null));
            } else if (fromLive >= 0) {
                out.add(withVerdict(row, DUPLICATE, live[fromLive], owners[fromLive]));
            } else {
                live = append(live, t);
                owners = append(owners, ownerOf(row));
                out.add(withVerdict(row, EMIT, null, null));
            }
        }
        boolean kept = keepLive(state, live, owners, window + lateness, watermark);
        if (kept != existed) counted(state, kept ? 1 : -1);
        return out.iterator();
    }

    /** Stores the live ones of {@code times} with their owners, or removes the key if none is; true if the key is kept. */
    private boolean keepLive(GroupState<Emissions> state, long[] times, String[] owners, long retention, long watermark) {
        int[] live = live(times, retention, watermark);
        if (live.length == 0) {
            state.remove();
            return false;
        }
        state.update(new Emissions(select(times, live), select(owners, live), retention));
        state.setTimeoutDuration(idleTimeoutMs);
        return true;
    }

    private static List<String> names(StructType schema) {
        return Arrays.asList(schema.fieldNames());
    }

    /** Late when older than the horizon minus the lateness; never while there is no horizon. */
    private static boolean late(long t, long horizon, long lateness) {
        return horizon != Long.MIN_VALUE && t < horizon - lateness;
    }

    /** The rule of a state key: its first part (domain.rules.DedupRule.state_key). */
    private static String ruleOf(String key) {
        int end = key.indexOf('\u001f');
        return end < 0 ? key : key.substring(0, end);
    }

    private void counted(GroupState<Emissions> state, long change) {
        stateRows.add(state.getCurrentProcessingTimeMs(), TaskContext.getPartitionId(), change);
    }

    /** An INVALIDATE notification row (adapters.spark.stream.invalidation): the key forgets its emissions. */
    private boolean invalidates(Row row) {
        return invalidateIdx >= 0 && !row.isNullAt(invalidateIdx) && row.getBoolean(invalidateIdx);
    }

    /** The old state's live emissions for this key (read-only), or none. */
    private long[] fallback(Row row, long watermark) {
        if (fallbackIdx < 0 || row.isNullAt(fallbackIdx) || row.isNullAt(fallbackRetentionIdx)) return new long[0];
        List<Long> times = row.getList(fallbackIdx);
        long[] old = times.stream().mapToLong(Long::longValue).toArray();
        return select(old, live(old, row.getLong(fallbackRetentionIdx), watermark));
    }

    /** Arrival order: file_time, then source (nulls first), then ord. */
    private int arrival(Row a, Row b) {
        int byTime = Long.compare(a.getLong(fileTimeIdx), b.getLong(fileTimeIdx));
        if (byTime != 0) return byTime;
        String sa = a.getString(sourceIdx), sb = b.getString(sourceIdx);
        if (sa != null && sb != null && !sa.equals(sb)) return sa.compareTo(sb);
        if ((sa == null) != (sb == null)) return sa == null ? -1 : 1;
        return Long.compare(a.getLong(ordIdx), b.getLong(ordIdx));
    }

    /** The record's position, as the owner of the emission it makes (domain.events.SourcePosition.token). */
    private String ownerOf(Row row) {
        return row.get(sourceIdx) + ":" + row.get(partitionIdx) + ":" + row.get(offsetIdx);
    }

    /** The indexes of the emissions still live at {@code watermark}, in order. */
    private static int[] live(long[] times, long retention, long watermark) {
        return java.util.stream.IntStream.range(0, times.length).filter(i -> times[i] + retention > watermark).toArray();
    }

    private static long[] select(long[] values, int[] indexes) {
        if (indexes.length == values.length) return values;
        return Arrays.stream(indexes).mapToLong(i -> values[i]).toArray();
    }

    private static String[] select(String[] values, int[] indexes) {
        if (indexes.length == values.length) return values;
        return Arrays.stream(indexes).mapToObj(i -> values[i]).toArray(String[]::new);
    }

    /** The index of the first emission less than {@code window} away from {@code t}, or -1. */
    private static int withinWindow(long[] emissions, long t, long window) {
        for (int i = 0; i < emissions.length; i++) {
            if (Math.abs(t - emissions[i]) < window) return i;
        }
        return -1;
    }

    private static long[] append(long[] times, long t) {
        long[] grown = Arrays.copyOf(times, times.length + 1);
        grown[times.length] = t;
        return grown;
    }

    private static String[] append(String[] owners, String owner) {
        String[] grown = Arrays.copyOf(owners, owners.length + 1);
        grown[owners.length] = owner;
        return grown;
    }

    private static Row withVerdict(Row row, String verdict, Long repeatsTime, String repeatsOwner) {
        Object[] values = new Object[row.length() + 3];
        for (int i = 0; i < row.length(); i++) values[i] = row.get(i);
        values[row.length()] = verdict;
        values[row.length() + 1] = repeatsTime;
        values[row.length() + 2] = repeatsOwner;
        return RowFactory.create(values);
    }
}
