package streamdedup.output;

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A partition's commit marker: the offset {@code batch + 1} of the consumer group named by its
 * transactional id on the marker topic's partition 0, committed inside the partition's
 * transaction, with JSON metadata {@code {transactional_id, query_id, batch_id, partition,
 * counts, time}}. A group's committed offset is one lookup, and read with
 * {@code isolation.level=read_committed} it is only answered once no transaction holds a pending
 * offset for the group (KIP-447), so a marker is seen exactly when its transaction committed.
 * The consumer that looks a group up is kept between micro-batches (one per group, leased by one
 * task at a time), so a batch costs each task one offset fetch, not a new client.
 */
final class Markers {
    static final Duration LOOKUP_TIMEOUT = Duration.ofSeconds(60);
    private static final Pattern QUERY_ID = Pattern.compile("\"query_id\":\\s*(null|\"([^\"]*)\")");
    private static final Pattern COUNTS = Pattern.compile("\"counts\":\\{([^}]*)\\}");
    private static final Pattern COUNT = Pattern.compile("\"((?:[^\"\\\\]|\\\\.)*)\":(-?\\d+)");
    private static final Map<String, KafkaConsumer<byte[], byte[]>> IDLE = new HashMap<>();

    private Markers() {
    }

    /** {@code id}'s last marker when it is of {@code batch} or later, of the same query (or of none); else null. */
    static OffsetAndMetadata committedMarker(Map<String, String> consumerConfig, String topic, String id,
                                             String queryId, long batch) {
        OffsetAndMetadata last = last(consumerConfig, topic, id);
        return last != null && last.offset() >= batch + 1 && sameQuery(last.metadata(), queryId) ? last : null;
    }

    /**
     * Raises unless {@code recomputed} (a committed partition's rows, judged again) counts as the
     * marker of {@code batch} says its committed output did. A marker of a later batch says
     * nothing of this one's counts and is not compared.
     */
    static void requireSameCounts(OffsetAndMetadata marker, long batch, int partition, Map<String, Long> recomputed) {
        if (marker.offset() != batch + 1 || marker.metadata() == null) return;
        Map<String, Long> committed = counts(marker.metadata());
        if (committed != null && !committed.equals(new TreeMap<>(recomputed))) {
            throw new IllegalStateException("streamdedup: batch " + batch + ", partition " + partition
                    + " judged again does not match the output committed to Kafka: committed " + committed
                    + ", judged now " + new TreeMap<>(recomputed) + ". Verdicts must not change when Spark "
                    + "recomputes a batch; the batch is not committed");
        }
    }

    /** The {@code counts} of a marker's JSON, or null when it has none. */
    static Map<String, Long> counts(String metadata) {
        Matcher found = COUNTS.matcher(metadata);
        if (!found.find()) return null;
        Map<String, Long> counts = new TreeMap<>();
        Matcher entry = COUNT.matcher(found.group(1));
        while (entry.find()) counts.put(unquote(entry.group(1)), Long.parseLong(entry.group(2)));
        return counts;
    }

    private static String unquote(String quoted) {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < quoted.length(); i++) {
            char c = quoted.charAt(i);
            if (c == '\\' && i + 1 < quoted.length()) {
                char next = quoted.charAt(++i);
                if (next == 'u' && i + 4 < quoted.length()) {
                    text.append((char) Integer.parseInt(quoted.substring(i + 1, i + 5), 16));
                    i += 4;
                } else {
                    text.append(next);
                }
            } else {
                text.append(c);
            }
        }
        return text.toString();
    }

    /** The last marker of {@code id}, or null. */
    static OffsetAndMetadata last(Map<String, String> consumerConfig, String topic, String id) {
        String key = new TreeMap<>(consumerConfig) + "|" + id;
        KafkaConsumer<byte[], byte[]> consumer;
        synchronized (IDLE) {
            consumer = IDLE.remove(key);
        }
        if (consumer == null) consumer = open(consumerConfig, id);
        boolean healthy = false;
        try {
            TopicPartition partition = new TopicPartition(topic, 0);
            OffsetAndMetadata last = consumer.committed(Collections.singleton(partition), LOOKUP_TIMEOUT).get(partition);
            healthy = true;
            return last;
        } finally {
            if (healthy) keep(key, consumer);
            else close(consumer);
        }
    }

    /** Closes the consumers kept between batches (the query ended). */
    static void closeAll() {
        synchronized (IDLE) {
            IDLE.values().forEach(Markers::close);
            IDLE.clear();
        }
    }

    private static KafkaConsumer<byte[], byte[]> open(Map<String, String> consumerConfig, String id) {
        Map<String, Object> config = new HashMap<>(consumerConfig);
        config.put("group.id", id);
        config.put("isolation.level", "read_committed");
        config.put("enable.auto.commit", "false");
        config.put("client.id", id + "-marker");
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static void keep(String key, KafkaConsumer<byte[], byte[]> consumer) {
        KafkaConsumer<byte[], byte[]> replaced;
        synchronized (IDLE) {
            replaced = IDLE.put(key, consumer);
        }
        if (replaced != null) close(replaced);
    }

    private static void close(KafkaConsumer<byte[], byte[]> consumer) {
        try {
            consumer.close(Duration.ofSeconds(5));
        } catch (RuntimeException ignored) {
            // a broken consumer: nothing more to release
        }
    }

    static boolean sameQuery(String metadata, String queryId) {
        if (queryId == null || metadata == null) return true;
        Matcher found = QUERY_ID.matcher(metadata);
        return !found.find() || found.group(2) == null || found.group(2).equals(queryId);
    }

    static String marker(String id, String queryId, long batch, int partition, Map<String, Long> counts) {
        StringBuilder json = new StringBuilder("{\"transactional_id\":").append(quote(id))
                .append(",\"query_id\":").append(queryId == null ? "null" : quote(queryId))
                .append(",\"batch_id\":").append(batch).append(",\"partition\":").append(partition)
                .append(",\"counts\":{");
        String sep = "";
        for (Map.Entry<String, Long> entry : counts.entrySet()) {
            json.append(sep).append(quote(entry.getKey())).append(':').append(entry.getValue());
            sep = ",";
        }
        return json.append("},\"time\":").append(System.currentTimeMillis() / 1000.0).append('}').toString();
    }

    static String quote(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') quoted.append('\\').append(c);
            else if (c < 0x20) quoted.append(String.format("\\u%04x", (int) c));
            else quoted.append(c);
        }
        return quoted.append('"').toString();
    }
}
