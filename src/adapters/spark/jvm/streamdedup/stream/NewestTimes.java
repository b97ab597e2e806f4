package streamdedup.stream;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.util.AccumulatorV2;

/**
 * The newest event time WindowDedup judged per rule and source partition in a micro-batch: the
 * driver reads it after the batch to move its watermarks (domain._watermarks) and resets it
 * before the next one. A task counted twice (a retry) changes nothing: values merge by max.
 */
public final class NewestTimes extends AccumulatorV2<String[], String> {
    private final HashMap<String, Long> newest = new HashMap<>();

    /** An event of {@code rule} at time {@code t} from {@code partition}. */
    public void add(String rule, String partition, long t) {
        newest.merge(rule + "\t" + partition, t, Math::max);
    }

    @Override
    public void add(String[] rulePartitionTime) {
        add(rulePartitionTime[0], rulePartitionTime[1], Long.parseLong(rulePartitionTime[2]));
    }

    @Override
    public synchronized void merge(AccumulatorV2<String[], String> other) {
        ((NewestTimes) other).newest.forEach((key, t) -> newest.merge(key, t, Math::max));
    }

    /** Lines of {@code rule \t partition \t newest time}. */
    @Override
    public synchronized String value() {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, Long> entry : newest.entrySet()) {
            out.append(entry.getKey()).append('\t').append(entry.getValue()).append('\n');
        }
        return out.toString();
    }

    @Override
    public synchronized boolean isZero() {
        return newest.isEmpty();
    }

    @Override
    public synchronized NewestTimes copy() {
        NewestTimes copy = new NewestTimes();
        copy.newest.putAll(newest);
        return copy;
    }

    @Override
    public synchronized void reset() {
        newest.clear();
    }
}
