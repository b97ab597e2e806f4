package streamdedup.stream;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The domain's judgement (domain._state.decide under domain._rules) as one JVM stateful operator.
 *
 * Per key, in arrival order ({@code file_time}, {@code source}, {@code ord}: adapters.spark.stream._sources): late when t < horizon - lateness; a duplicate
 * when a live emission lies less than window away (|t - e| < window); otherwise emitted and
 * remembered. An emission is live while watermark < e + window + lateness. The horizon (per
 * rule and source partition) and the watermark (per rule) are the driver's, computed from the
 * earlier micro-batches ({@link RuleHorizons}, domain._watermarks) and fixed for a batch: each
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
 * also names the emission it repeats (domain._state.decide): {@code repeats_time} and
 * {@code repeats_owner}, the position of the record that made it ({@code source:partition:offset}
 * of the row's columns {@code source}, {@code partition}, {@code offset}; null when unknown).
 * The old state of a migration is consulted first, as domain._migration.MigratingStateStore does.
 * A {@code transformWithState} processor in event time: each key is listed, once, to wake at the
 * expiry of its newest live emission (its time plus the rule's retention), in the operator's own
 * index of expiries ({@link ExpiryQueue}: one list and one Spark timer per moment at which keys
 * wake, not one timer per key), so a micro-batch costs the keys it reads and the keys that fall
 * due, never a scan of the whole state nor of the markers its expired keys left behind. Spark's
 * event-time watermark ({@link #EVICTION_CLOCK}: the newest judged time, bounded by the batch's
 * second, over every rule) only wakes a key: it is removed once its own rule's watermark (the
 * driver's, from the batch's table) has passed all its emissions' retention; otherwise it is listed
 * again as far ahead as its rule's watermark lags ({@link ExpiryTimers}). A key leaving a queue
 * (listed at another moment, or removed) says so in it, so a key still listed when its queue comes
 * due is removed unread once its rule's watermark has passed what the moment covers; the entries
 * of state format 5, which did not say so, are checked by reading their key. Timers of a key's
 * own, which state format 4 set, still wake their key the same way. Whether a key has been woken
 * never changes a verdict: a key's expired emissions are dropped whenever it is read.
 *
 * During a migration (adapters.spark.checkpoint._migration) rows may carry {@code fallback} (array of
 * long: the old state's emission times for the key's old key), {@code fallback_owners} (their
 * makers' positions, null where the old state kept none) and {@code fallback_retention}:
 * those emissions make repeats duplicates while live, but are only read, never stored; and
 * {@code watermark_floor} (s): the old job's watermark, below which the new query's own
 * (which starts afresh) does not go, so lateness is judged as the old job would have.
 *
 * A row with {@code invalidate} = true (optional column; adapters.spark.stream._invalidation) is an
 * INVALIDATE notification for the key: it comes first in its micro-batch (lowest file_time and ord), the
 * key forgets all its emissions (as domain StateStore.invalidate), and the row comes out
 * with verdict {@code invalidated}; it is never late and never stored.
 *
 * Every key it creates or removes is counted in a {@link StateRowCount}.
 */
public final class WindowDedup extends StatefulProcessor<String, Row, Row> {
    private static final long serialVersionUID = 1L;
    /** The name of the key's state variable (a value state of {@link Emissions}). */
    public static final String STATE = "emissions";
    /** The name of the queues' state variable (a list state of keys: {@link ExpiryQueue}). */
    public static final String EXPIRY_QUEUE = "expiry_queue";
    /** The column Spark's event-time watermark is taken from ({@link #judge}); dropped before the operator. */
    public static final String EVICTION_CLOCK = "eviction_clock";
    private static final long NO_TIMER = Long.MIN_VALUE;
    public static final String EMIT = "emit";
    public static final String DUPLICATE = "duplicate";
    public static final String LATE = "late";
    public static final String PASS = "pass";
    public static final String INVALIDATED = "invalidated";

    private final int tIdx, ordIdx, fileTimeIdx, windowIdx, latenessIdx, judgedIdx, fallbackIdx, fallbackOwnersIdx, fallbackRetentionIdx,
        invalidateIdx;
    private final int watermarkFloorIdx, ruleIdx, laneIdx, seenIdx, sourceIdx, partitionIdx, offsetIdx;
    private final StateRowCount stateRows;
    private final RuleHorizons horizons;
    private final NewestTimes newest;

    private transient ValueState<Emissions> state;
    private transient ExpiryQueue queue;
    private transient long slowMicros;  // a test's slow-down of this task ({@link SlowTasks}): 0 in production

    private WindowDedup(StructType schema, StateRowCount stateRows, RuleHorizons horizons, NewestTimes newest) {
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
        this.fallbackOwnersIdx = names.indexOf("fallback_owners");
        this.watermarkFloorIdx = names.indexOf("watermark_floor");
        this.invalidateIdx = names.indexOf("invalidate");
        this.stateRows = stateRows;
    }

    /** Judge every row of {@code in}, grouped by {@code keyColumn}; adds a {@code verdict} column.
     *  {@code stateRows} (registered with the SparkContext) counts the keys in the state;
     *  {@code horizons} holds what the next batch is judged against, {@code newest} collects its times.
     *  {@code clock} (long, s): the row's time for Spark's event-time watermark, which wakes keys
     *  whose emissions may have expired (the judged rows' time bounded by the batch's second; null
     *  for the others). It is dropped before the operator, so Spark filters no row as late: lateness
     *  is the operator's verdict. */
    public static Dataset<Row> judge(Dataset<Row> in, String keyColumn, Column clock, StateRowCount stateRows,
                                     RuleHorizons horizons, NewestTimes newest) {
        StructType schema = in.schema();
        StructType out = schema.add("verdict", DataTypes.StringType, false)
                .add("repeats_time", DataTypes.LongType, true).add("repeats_owner", DataTypes.StringType, true);
        Dataset<Row> clocked = in.withColumn(EVICTION_CLOCK, functions.timestamp_seconds(functions.coalesce(clock, functions.lit(0L))))
                .withWatermark(EVICTION_CLOCK, "0 seconds").drop(EVICTION_CLOCK);
        return clocked.groupBy(keyColumn)
                 .as(Encoders.STRING(), Encoders.row(schema))
                 .transformWithState(new WindowDedup(schema, stateRows, horizons, newest), TimeMode.EventTime(),
                         OutputMode.Append(), Encoders.row(out));
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        state = getHandle().getValueState(STATE, Encoders.bean(Emissions.class), TTLConfig.NONE());
        queue = new ExpiryQueue(getHandle().getListState(EXPIRY_QUEUE, Encoders.STRING(), TTLConfig.NONE()), getHandle());
        slowMicros = SlowTasks.micros("operator");
    }

    @Override
    public scala.collection.Iterator<Row> handleExpiredTimer(String key, TimerValues timers, ExpiredTimerInfo expired) {
        long fired = expired.getExpiryTimeInMs();
        if (ExpiryQueue.isQueue(key)) {
            ExpiryQueue.Due due = queue.take(key);
            RuleHorizons.Table horizons = this.horizons.of(timers.getCurrentProcessingTimeInMs());
            long covered = ExpiryTimers.covers(fired);
            for (String current : due.current) {
                ExpiryQueue.at(current);
                if (horizons.watermark(ruleOf(current)) >= covered) {
                    // its stored wake is this moment, so its newest expiry is at most what the moment
                    // covers, which its rule's watermark has passed: none of its emissions is live
                    state.clear();
                    counted(timers, -1);
                } else {
                    expire(current, fired, timers);
                }
            }
            for (String unsure : due.unsure) {
                if (due.current.contains(unsure)) continue;
                ExpiryQueue.at(unsure);
                expire(unsure, fired, timers);
            }
            ExpiryQueue.at(key);  // Spark deletes the queue's timer under its own key
        } else {
            expire(key, fired, timers);  // a timer of the key's own, set by state format 4
        }
        return CollectionConverters.asScala(Collections.<Row>emptyIterator());
    }

    /** Wakes {@code key} (the implicit key) at {@code fired}, the moment it was queued for: removes it
     *  once its rule's watermark has passed all its emissions' retention, else queues it again. An
     *  entry the key has left since (removed, or woken at another moment) changes nothing. */
    private void expire(String key, long fired, TimerValues timers) {
        Emissions stored = state.get();  // null when the key holds none
        if (stored == null || stored.getWake() != fired) return;
        long watermark = this.horizons.of(timers.getCurrentProcessingTimeInMs()).watermark(ruleOf(key));
        // the key's entry is spent: it has none now
        if (!keepLive(key, stored.getTimes(), stored.getOwners(), stored.getRetention(), watermark, timers, NO_TIMER)) {
            counted(timers, -1);
        }
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(String key, scala.collection.Iterator<Row> rows,
                                                          TimerValues timers) {
        return CollectionConverters.asScala(judged(key, CollectionConverters.asJava(rows), timers));
    }

    /** The verdicts of a key's rows of one micro-batch (its timer may fall due in the same batch, after). */
    private Iterator<Row> judged(String key, Iterator<Row> rows, TimerValues timers) {
        RuleHorizons.Table horizons = this.horizons.of(timers.getCurrentProcessingTimeInMs());
        List<Row> batch = new ArrayList<>();
        List<Row> out = new ArrayList<>();
        rows.forEachRemaining(row -> {
            if (row.getBoolean(judgedIdx)) batch.add(row); else out.add(withVerdict(row, PASS, null, null));
        });
        SlowTasks.pause(slowMicros, batch.size() + out.size());
        if (batch.isEmpty()) return out.iterator();
        batch.sort(this::arrival);
        long window = batch.get(0).getLong(windowIdx), lateness = batch.get(0).getLong(latenessIdx);
        String rule = batch.get(0).getString(ruleIdx);
        long floor = watermarkFloorIdx >= 0 && !batch.get(0).isNullAt(watermarkFloorIdx)
                ? batch.get(0).getLong(watermarkFloorIdx) : Long.MIN_VALUE;
        long watermark = horizons.bounded(Math.max(horizons.watermark(rule), floor));
        Emissions stored = state.get();  // one read of the store: null when the key holds none
        boolean existed = stored != null;
        long[] live = new long[0];
        String[] owners = new String[0];
        long wake = NO_TIMER;
        if (existed) {
            wake = stored.getWake();
            int[] kept = live(stored.getTimes(), window + lateness, watermark);
            live = select(stored.getTimes(), kept);
            owners = select(stored.getOwners(), kept);
        }
        long[] old = fallbackTimes(batch.get(0));
        String[] oldOwners = fallbackOwners(batch.get(0), old.length);
        int[] oldLive = fallbackIdx < 0 || batch.get(0).isNullAt(fallbackRetentionIdx) ? new int[0]
                : live(old, batch.get(0).getLong(fallbackRetentionIdx), watermark);
        old = select(old, oldLive);
        oldOwners = select(oldOwners, oldLive);
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
                out.add(withVerdict(row, DUPLICATE, old[fromOld], oldOwners[fromOld]));
            } else if (fromLive >= 0) {
                out.add(withVerdict(row, DUPLICATE, live[fromLive], owners[fromLive]));
            } else {
                live = append(live, t);
                owners = append(owners, ownerOf(row));
                out.add(withVerdict(row, EMIT, null, null));
            }
        }
        boolean kept = keepLive(key, live, owners, window + lateness, watermark, timers, wake);
        if (kept != existed) counted(timers, kept ? 1 : -1);
        return out.iterator();
    }

    /** Stores the live ones of {@code times} with their owners, or removes the key if none is; true if the key is kept.
     *  A kept key is queued ({@link ExpiryQueue}) to wake at its newest live emission's expiry, moved
     *  ahead by as much as Spark's watermark runs ahead of the rule's (a rule behind the others wakes
     *  its keys later, not again and again; {@link ExpiryTimers#wake}); never at or before Spark's
     *  current watermark. A wake already set for that expiry or a later one ({@link ExpiryTimers#covers}),
     *  and still ahead of Spark's watermark, is kept (a duplicate, which changes no expiry, queues
     *  nothing). A wake left behind stays in its queue and is skipped when it comes due. */
    private boolean keepLive(String key, long[] times, String[] owners, long retention, long watermark,
                             TimerValues timers, long wake) {
        int[] live = live(times, retention, watermark);
        if (live.length == 0) {
            if (wake != NO_TIMER) queue.leave(key, wake);
            state.clear();
            return false;
        }
        long[] kept = select(times, live);
        long expiry = Arrays.stream(kept).max().getAsLong() + retention;
        long now = timers.getCurrentWatermarkInMs();
        long ahead = watermark == Long.MIN_VALUE ? 0 : Math.max(0, now - watermark * 1000L);
        long next = wake != NO_TIMER && ExpiryTimers.covers(wake) >= expiry && wake > now
                ? wake : ExpiryTimers.wake(expiry, ahead, now);
        if (next != wake) {
            if (wake != NO_TIMER) queue.leave(key, wake);
            queue.add(key, next);
        }
        state.update(new Emissions(kept, select(owners, live), retention, next));
        return true;
    }

    private static List<String> names(StructType schema) {
        return Arrays.asList(schema.fieldNames());
    }

    /** Late when older than the horizon minus the lateness; never while there is no horizon. */
    private static boolean late(long t, long horizon, long lateness) {
        return horizon != Long.MIN_VALUE && t < horizon - lateness;
    }

    /** The rule of a state key: its first part (domain._rules.DedupRule.state_key). */
    private static String ruleOf(String key) {
        int end = key.indexOf('\u001f');
        return end < 0 ? key : key.substring(0, end);
    }

    private void counted(TimerValues timers, long change) {
        stateRows.add(timers.getCurrentProcessingTimeInMs(), TaskContext.getPartitionId(), change);
    }

    /** An INVALIDATE notification row (adapters.spark.stream._invalidation): the key forgets its emissions. */
    private boolean invalidates(Row row) {
        return invalidateIdx >= 0 && !row.isNullAt(invalidateIdx) && row.getBoolean(invalidateIdx);
    }

    /** The old state's emission times for this key (read-only; the live ones are chosen by the caller), or none. */
    private long[] fallbackTimes(Row row) {
        if (fallbackIdx < 0 || row.isNullAt(fallbackIdx) || row.isNullAt(fallbackRetentionIdx)) return new long[0];
        List<Long> times = row.getList(fallbackIdx);
        return times.stream().mapToLong(Long::longValue).toArray();
    }

    /** The positions of the old state's emissions (null each where unknown: a fallback exported without them). */
    private String[] fallbackOwners(Row row, int count) {
        String[] owners = new String[count];
        if (fallbackOwnersIdx < 0 || row.isNullAt(fallbackOwnersIdx)) return owners;
        List<String> known = row.getList(fallbackOwnersIdx);
        for (int i = 0; i < count && i < known.size(); i++) owners[i] = known.get(i);
        return owners;
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

    /** The record's position, as the owner of the emission it makes (domain._events.SourcePosition.token). */
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
