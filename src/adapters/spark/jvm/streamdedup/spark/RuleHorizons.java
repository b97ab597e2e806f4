package streamdedup.spark;

import java.io.Serializable;
import java.util.HashMap;

/**
 * What WindowDedup judges a micro-batch against (domain.watermarks), set by the driver before
 * the batch runs: per rule its watermark (the minimum over the source's partitions of the newest
 * time in each; emissions older than it minus their retention are forgotten) and per rule and
 * partition the newest time seen (an event is late when older than its partition's newest time,
 * or the rule's watermark if higher, minus the rule's lateness).
 *
 * The operator function, and this object with it, is serialized into every micro-batch's tasks,
 * so each batch's tasks see the values the driver set for that batch.
 */
public final class RuleHorizons implements Serializable {
    static final String SEPARATOR = "\u0000";

    private final HashMap<String, Long> watermarks = new HashMap<>();
    private final HashMap<String, Long> newest = new HashMap<>();

    /** Replace the values: lines of {@code rule \t watermark} and {@code rule \t partition \t newest}. */
    public synchronized void load(String encoded) {
        watermarks.clear();
        newest.clear();
        for (String line : encoded.split("\n")) {
            if (line.isEmpty()) continue;
            String[] parts = line.split("\t", -1);
            if (parts.length == 2) watermarks.put(parts[0], Long.parseLong(parts[1]));
            else newest.put(parts[0] + SEPARATOR + parts[1], Long.parseLong(parts[2]));
        }
    }

    /** The rule's watermark, or Long.MIN_VALUE while it has none. */
    public long watermark(String rule) {
        return watermarks.getOrDefault(rule, Long.MIN_VALUE);
    }

    /** What an event of {@code rule} from {@code partition} is late against (Long.MIN_VALUE: nothing yet). */
    public long horizon(String rule, String partition) {
        return Math.max(watermark(rule), newest.getOrDefault(rule + SEPARATOR + partition, Long.MIN_VALUE));
    }
}
