package streamdedup.stream;

import java.util.Collection;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The domain's per-rule watermarks over a partitioned source (domain._watermarks.Watermarks), kept
 * by the driver between micro-batches: what the Spark engine judges each batch against, folded
 * in JVM code so a batch's bookkeeping costs the Python driver nothing (BatchWatermarkFiles).
 *
 * The same rules as the domain's, which a parity test (tests/adapters/spark/stream) holds it to
 * over tables and random sequences: a partition's newest time per rule; a rule's watermark the
 * minimum over the partitions not idle (no event of the rule for {@code idleTimeout} seconds of
 * wall time since its last one, or since it was first expected), none while an expected partition
 * that showed nothing yet holds it back, never going back except when a partition is gained; a
 * partition revoked or gained starts afresh. The domain's memo of the last answer
 * ({@code Watermarks._known}) is a speed-up of its per-record judging, which a batch engine does
 * not do: each answer here is computed from the partitions. The document ({@link #toDocument})
 * is the domain's, read and written by both.
 */
public final class Watermarks {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final double idleTimeout;
    private Set<String> expected; // null: the source does not say; the partitions seen count
    private final Map<String, Double> since = new LinkedHashMap<>(); // partition -> wall time first expected
    private final Map<String, Map<String, Newest>> newest = new LinkedHashMap<>(); // rule -> partition -> newest
    private final Map<String, Long> current = new LinkedHashMap<>(); // rule -> its watermark so far

    /** A partition's newest time of a rule and the wall time of its last event. */
    private static final class Newest {
        long time;
        double wall;

        Newest(long time, double wall) {
            this.time = time;
            this.wall = wall;
        }
    }

    public Watermarks(double idleTimeout) {
        this.idleTimeout = idleTimeout;
    }

    /** The partitions the source reads from now on (its current assignment). */
    public void expect(Collection<String> partitions, double now) {
        Set<String> next = new HashSet<>(partitions);
        if (expected != null && !next.equals(expected)) {
            Set<String> changed = new HashSet<>(next);
            changed.removeAll(expected);
            boolean gained = !changed.isEmpty();
            for (String partition : expected) {
                if (!next.contains(partition)) changed.add(partition);
            }
            for (String partition : changed) {
                since.remove(partition);
                for (Map<String, Newest> seen : newest.values()) seen.remove(partition);
            }
            if (gained) current.clear();
        }
        expected = next;
        for (String partition : next) since.putIfAbsent(partition, now);
    }

    /** An event of {@code rule} at time {@code t} was read from {@code partition} at wall time {@code now}. */
    public void observe(String rule, String partition, long t, double now) {
        Newest seen = newest.computeIfAbsent(rule, r -> new LinkedHashMap<>()).get(partition);
        if (seen == null) {
            newest.get(rule).put(partition, new Newest(t, now));
        } else {
            seen.time = Math.max(seen.time, t);
            seen.wall = now;
        }
    }

    /** The rule's watermark at wall time {@code now}; null while it has none. */
    public Long of(String rule, double now) {
        Long lowest = lowestActive(rule, now);
        if (lowest != null) current.merge(rule, lowest, Math::max);
        return current.get(rule);
    }

    /**
     * The lowest newest time of the partitions not idle at {@code now}; null while a partition
     * that showed nothing yet holds the watermark back, or when every partition is idle.
     */
    private Long lowestActive(String rule, double now) {
        Map<String, Newest> seen = newest.getOrDefault(rule, Map.of());
        Collection<String> partitions = expected == null ? seen.keySet() : expected;
        Long low = null;
        for (String partition : partitions) {
            Newest last = seen.get(partition);
            if (last == null) {
                if (now - since.getOrDefault(partition, now) < idleTimeout) return null;
            } else if (now - last.wall < idleTimeout && (low == null || last.time < low)) {
                low = last.time;
            }
        }
        return low;
    }

    /**
     * What a micro-batch is judged against at wall time {@code now}, as RuleHorizons reads it:
     * lines of {@code rule \t watermark} (rules with one), then {@code rule \t partition \t newest}.
     */
    public String table(double now) {
        StringBuilder lines = new StringBuilder();
        for (String rule : newest.keySet()) {
            Long mark = of(rule, now);
            if (mark != null) lines.append(rule).append('\t').append(mark).append('\n');
        }
        newest.forEach((rule, parts) -> parts.forEach((partition, seen) ->
                lines.append(rule).append('\t').append(partition).append('\t').append(seen.time).append('\n')));
        return lines.toString();
    }

    /** What a restart needs to resume the watermarks: the domain's document, as JSON. */
    public String toDocument() {
        ObjectNode document = JSON.createObjectNode();
        ObjectNode rules = document.putObject("newest");
        newest.forEach((rule, parts) -> {
            ObjectNode byPartition = rules.putObject(rule);
            parts.forEach((partition, seen) -> byPartition.putArray(partition).add(seen.time).add(seen.wall));
        });
        ObjectNode marks = document.putObject("current");
        current.forEach(marks::put);
        ObjectNode first = document.putObject("since");
        since.forEach(first::put);
        return document.toString();
    }

    /** The watermarks a document (``toDocument``, or the domain's ``to_document``) describes. */
    public static Watermarks fromDocument(String text, double idleTimeout) {
        Watermarks marks = new Watermarks(idleTimeout);
        JsonNode document;
        try {
            document = JSON.readTree(text);
        } catch (java.io.IOException unreadable) {
            throw new IllegalArgumentException("not a watermark document: " + unreadable.getMessage(), unreadable);
        }
        for (Iterator<Map.Entry<String, JsonNode>> rules = document.path("newest").properties().iterator();
                rules.hasNext(); ) {
            Map.Entry<String, JsonNode> rule = rules.next();
            Map<String, Newest> parts = marks.newest.computeIfAbsent(rule.getKey(), r -> new LinkedHashMap<>());
            for (Map.Entry<String, JsonNode> part : rule.getValue().properties()) {
                ArrayNode seen = (ArrayNode) part.getValue();
                parts.put(part.getKey(), new Newest(seen.get(0).asLong(), seen.get(1).asDouble()));
            }
        }
        for (Map.Entry<String, JsonNode> mark : document.path("current").properties()) {
            marks.current.put(mark.getKey(), mark.getValue().asLong());
        }
        for (Map.Entry<String, JsonNode> first : document.path("since").properties()) {
            marks.since.put(first.getKey(), first.getValue().asDouble());
        }
        return marks;
    }
}
