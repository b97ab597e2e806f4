package streamdedup.stream;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.util.AccumulatorV2;

/**
 * The number of keys in WindowDedup's state, counted by the operator itself, so that RocksDB
 * need not count its rows (its trackTotalNumberOfRows reads every key before writing it).
 *
 * A task adds each key's change (+1 created, -1 removed) under its micro-batch's time and its
 * partition. Spark merges a task's changes once the task succeeds; a partition judged again for
 * the same micro-batch (replayed after a crash, or read again by a retried write) replaces its
 * earlier change instead of adding to it: a micro-batch's time is kept in the offset log, so a
 * replay has the same. Changes of all but the last {@value #KEPT} micro-batches are folded into
 * one settled sum. The value is the net change since the accumulator was created;
 * {@link #removed()} the keys removed (expired, or emptied by an invalidation) in the same way.
 */
public final class StateRowCount extends AccumulatorV2<long[], Long> {
    static final int KEPT = 64;

    private long settled;
    private long settledRemoved;
    private final TreeMap<Long, HashMap<Integer, long[]>> recent = new TreeMap<>();
    private transient long[] lastCell;  // a task adds to one (batch, partition) cell: found once
    private transient long lastBatch;
    private transient int lastPartition;

    /** A change of {@code change} keys in micro-batch {@code batchTimeMs}, partition {@code partition}. */
    public void add(long batchTimeMs, int partition, long change) {
        if (lastCell == null || lastBatch != batchTimeMs || lastPartition != partition) {
            lastCell = recent.computeIfAbsent(batchTimeMs, k -> new HashMap<>()).computeIfAbsent(partition, k -> new long[2]);
            lastBatch = batchTimeMs;
            lastPartition = partition;
        }
        lastCell[0] += change;
        if (change < 0) lastCell[1] -= change;
    }

    @Override
    public void add(long[] batchPartitionChange) {
        add(batchPartitionChange[0], (int) batchPartitionChange[1], batchPartitionChange[2]);
    }

    @Override
    public synchronized void merge(AccumulatorV2<long[], Long> other) {
        StateRowCount task = (StateRowCount) other;
        settled += task.settled;
        settledRemoved += task.settledRemoved;
        task.recent.forEach((batch, partitions) -> recent.computeIfAbsent(batch, k -> new HashMap<>())
                .putAll(partitions));
        while (recent.size() > KEPT) {
            Map<Integer, long[]> oldest = recent.pollFirstEntry().getValue();
            settled += sum(oldest, 0);
            settledRemoved += sum(oldest, 1);
        }
    }

    @Override
    public synchronized Long value() {
        long total = settled;
        for (Map<Integer, long[]> partitions : recent.values()) total += sum(partitions, 0);
        return total;
    }

    /** The keys removed since the accumulator was created. */
    public synchronized long removed() {
        long total = settledRemoved;
        for (Map<Integer, long[]> partitions : recent.values()) total += sum(partitions, 1);
        return total;
    }

    @Override
    public synchronized boolean isZero() {
        return settled == 0 && settledRemoved == 0 && recent.isEmpty();
    }

    @Override
    public synchronized StateRowCount copy() {
        StateRowCount copy = new StateRowCount();
        copy.settled = settled;
        copy.settledRemoved = settledRemoved;
        recent.forEach((batch, partitions) -> {
            HashMap<Integer, long[]> cells = new HashMap<>();
            partitions.forEach((partition, cell) -> cells.put(partition, cell.clone()));
            copy.recent.put(batch, cells);
        });
        return copy;
    }

    @Override
    public synchronized void reset() {
        settled = 0;
        settledRemoved = 0;
        recent.clear();
        lastCell = null;
    }

    private static long sum(Map<Integer, long[]> partitions, int field) {
        long total = 0;
        for (long[] cell : partitions.values()) total += cell[field];
        return total;
    }
}
