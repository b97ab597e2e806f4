package streamdedup.stream;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * What WindowDedup judges each micro-batch against (domain._watermarks), set by the driver before
 * the batch runs: per rule its watermark (the minimum over the source's partitions of the newest
 * time in each; emissions older than it minus their retention are forgotten) and per rule and
 * partition the newest time seen (an event is late when older than its partition's newest time,
 * or the rule's watermark if higher, minus the rule's lateness).
 *
 * Each table is kept under its micro-batch's timestamp ({@code batchTimestampMs} of Spark's
 * offset log, which a task reads as {@code GroupState.getCurrentProcessingTimeMs()}): the same
 * for every task, retried task, resubmitted stage and replay of that batch. The operator
 * function, and this object with it, is serialized into the tasks of every stage attempt; a
 * task judges against its own batch's table ({@link #of}), never against whichever table the
 * driver loaded last, and fails when that table is missing rather than judge against another
 * batch's. The last {@link #KEPT} tables are kept, so a stage of an earlier batch recomputed
 * late still finds its own.
 *
 * No horizon or watermark a task reads runs past its batch's second (domain._watermarks.clock_bound):
 * a record from the near future, or a producer with a fast clock, makes no on-time event late
 * and forgets no emission early. The batch's timestamp is Spark's wall clock of the batch, the
 * same on every replay.
 */
public final class RuleHorizons implements Serializable {
    private static final long serialVersionUID = 3L;
    static final String SEPARATOR = "\u0000";
    static final int KEPT = 16;

    private final TreeMap<Long, Table> byBatch = new TreeMap<>();
    private final boolean anyBatch;

    /** Tables loaded per micro-batch by the driver ({@link #load}). */
    public RuleHorizons() {
        this(false);
    }

    private RuleHorizons(boolean anyBatch) {
        this.anyBatch = anyBatch;
    }

    /** No horizons for any batch: nothing is late (a plan run without the engine's watermarks: benchmarks). */
    public static RuleHorizons none() {
        return new RuleHorizons(true);
    }

    /**
     * Keep the table of the micro-batch whose timestamp is {@code batchTimestampMs}: lines of
     * {@code rule \t watermark} and {@code rule \t partition \t newest}.
     */
    public synchronized void load(long batchTimestampMs, String encoded) {
        byBatch.put(batchTimestampMs, Table.parse(encoded, Math.floorDiv(batchTimestampMs, 1000L)));
        while (byBatch.size() > KEPT) byBatch.pollFirstEntry();
    }

    /** The table of the micro-batch whose timestamp is {@code batchTimestampMs}. */
    public synchronized Table of(long batchTimestampMs) {
        Table table = byBatch.get(batchTimestampMs);
        if (table != null) return table;
        if (anyBatch) return Table.EMPTY;
        throw new IllegalStateException("streamdedup: no horizons for the micro-batch of timestamp " + batchTimestampMs
                + " (the driver loaded those of " + byBatch.keySet() + "): not judging it against another batch's");
    }

    /** One micro-batch's horizons. */
    public static final class Table implements Serializable {
        private static final long serialVersionUID = 2L;
        static final Table EMPTY = new Table(new HashMap<>(), new HashMap<>(), Long.MAX_VALUE);

        private final Map<String, Long> watermarks;
        private final Map<String, Long> newest;
        private final long now;

        private Table(Map<String, Long> watermarks, Map<String, Long> newest, long now) {
            this.watermarks = watermarks;
            this.newest = newest;
            this.now = now;
        }

        static Table parse(String encoded, long now) {
            Map<String, Long> watermarks = new HashMap<>();
            Map<String, Long> newest = new HashMap<>();
            for (String line : encoded.split("\n")) {
                if (line.isEmpty()) continue;
                String[] parts = line.split("\t", -1);
                if (parts.length == 2) watermarks.put(parts[0], Long.parseLong(parts[1]));
                else newest.put(parts[0] + SEPARATOR + parts[1], Long.parseLong(parts[2]));
            }
            return new Table(watermarks, newest, now);
        }

        /** {@code t}, never past the batch's second (domain._watermarks.clock_bound). */
        public long bounded(long t) {
            return Math.min(t, now);
        }

        /** The rule's watermark, or Long.MIN_VALUE while it has none. */
        public long watermark(String rule) {
            return bounded(watermarks.getOrDefault(rule, Long.MIN_VALUE));
        }

        /** What an event of {@code rule} from {@code partition} is late against (Long.MIN_VALUE: nothing yet). */
        public long horizon(String rule, String partition) {
            return bounded(Math.max(watermark(rule), newest.getOrDefault(rule + SEPARATOR + partition, Long.MIN_VALUE)));
        }
    }
}
