package streamdedup.stream;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;

import streamdedup.checkpoint.CheckpointText;

/**
 * The driver's side of the Spark engine's watermarks (adapters.spark.stream._watermarks), each
 * micro-batch's bookkeeping in one call: {@link #prepare} before batch N runs, {@link #advance}
 * after its output is written. The {@link Watermarks} they keep are the domain's.
 *
 * <ul>
 *   <li>{@code prepare(N)} reads N's entry of Spark's offset log (its timestamp; with a Kafka
 *       source, the partitions it reads, which the watermarks then expect). A replay of N finds
 *       N's file ({@code streamdedup/watermarks/N.json}) and takes the table written there
 *       ({@code use}); otherwise the table is taken from the watermarks at the wall clock and
 *       written there first. The table goes to {@link RuleHorizons} under N's timestamp; the
 *       operator's {@link NewestTimes} are reset.
 *   <li>{@code advance(N)} folds in the newest times N judged (the operator's, or a judge's) and
 *       writes the watermarks after N beside N's table ({@code after}); the file {@link #KEPT_FILES}
 *       batches back is deleted.
 *   <li>A start resumes from the newest file's {@code after} (as adapters.spark.checkpoint.restored
 *       does).
 * </ul>
 *
 * The directory is listed once, at the start: this instance alone writes there while it holds
 * the checkpoint's lease, and keeps the set of batches with a file. The files are the ones the
 * Python side reads (restarts, migrations, {@code state inspect}): the same JSON documents.
 */
public final class BatchWatermarkFiles {
    public static final int KEPT_FILES = 10;
    static final String DIRECTORY = "streamdedup/watermarks";
    private static final ObjectMapper JSON = new ObjectMapper();

    private final CheckpointText files;
    private final RuleHorizons horizons;
    private final NewestTimes newest;
    private final String topic; // the Kafka topic whose partitions hold the watermarks back, or null
    private final TreeSet<Long> written = new TreeSet<>(); // the batches with a file
    private Watermarks marks;
    private long documentBatch = -1; // the last batch prepared, and its document as written
    private ObjectNode document;
    private long timestampMs;
    private String table = "";

    public BatchWatermarkFiles(String location, Configuration conf, double idleTimeout, String topic,
            RuleHorizons horizons, NewestTimes newest) throws IOException {
        this.files = new CheckpointText(location, conf);
        this.horizons = horizons;
        this.newest = newest;
        this.topic = topic;
        for (String name : files.list(DIRECTORY)) {
            if (name.endsWith(".json") && name.length() > 5 && name.substring(0, name.length() - 5).chars()
                    .allMatch(Character::isDigit)) {
                written.add(Long.parseLong(name.substring(0, name.length() - 5)));
            }
        }
        if (written.isEmpty()) files.mkdirs(DIRECTORY);
        this.marks = restored(idleTimeout);
    }

    private Watermarks restored(double idleTimeout) throws IOException {
        for (Iterator<Long> batches = written.descendingIterator(); batches.hasNext(); ) {
            JsonNode saved = read(batches.next());
            if (saved != null && saved.has("after")) return Watermarks.fromDocument(saved.get("after").toString(),
                    idleTimeout);
        }
        return new Watermarks(idleTimeout);
    }

    /**
     * Sets what micro-batch {@code batchId} is judged against (the same on a replay); returns the
     * table, as {@link RuleHorizons#load} reads it.
     */
    public synchronized String prepare(long batchId) throws IOException {
        String entry = files.read("offsets/" + batchId);
        if (entry == null) throw new java.io.FileNotFoundException("offsets/" + batchId);
        String[] lines = entry.split("\n");
        JsonNode metadata = lines.length > 1 ? JSON.readTree(lines[1]) : JSON.createObjectNode();
        long timestamp = metadata.path("batchTimestampMs").asLong(0);
        JsonNode saved = written.contains(batchId) ? read(batchId) : null;
        StringBuilder encoded = new StringBuilder();
        ObjectNode document;
        if (saved != null && saved.path("use").isObject()) {
            document = (ObjectNode) saved;
            JsonNode use = saved.get("use");
            use.path("watermarks").properties().forEach(mark ->
                    encoded.append(mark.getKey()).append('\t').append(mark.getValue().asLong()).append('\n'));
            for (JsonNode row : use.path("newest")) {
                encoded.append(row.get(0).asText()).append('\t').append(row.get(1).asText()).append('\t')
                        .append(row.get(2).asLong()).append('\n');
            }
        } else {
            double now = System.currentTimeMillis() / 1000.0;
            List<String> partitions = partitions(lines);
            if (!partitions.isEmpty()) marks.expect(partitions, now);
            encoded.append(marks.table(now));
            document = JSON.createObjectNode();
            ObjectNode use = document.putObject("use");
            ObjectNode watermarks = use.putObject("watermarks");
            ArrayNode rows = use.putArray("newest");
            for (String line : encoded.toString().split("\n")) {
                String[] fields = line.split("\t");
                if (fields.length == 2) watermarks.put(fields[0], Long.parseLong(fields[1]));
                if (fields.length == 3) rows.addArray().add(fields[0]).add(fields[1]).add(Long.parseLong(fields[2]));
            }
            write(batchId, document);
        }
        documentBatch = batchId;
        this.document = document;
        timestampMs = timestamp;
        table = encoded.toString();
        horizons.load(timestamp, table);
        newest.reset();
        return table;
    }

    /** The timestamp of the batch last prepared (its tasks' processing time), ms. */
    public synchronized long timestampMs() {
        return timestampMs;
    }

    /**
     * Folds in the newest times batch {@code batchId} judged: lines of {@code rule \t partition \t time}
     * (a judge's), or null for what the operator collected; records the watermarks after it.
     * Returns the table they give at the wall clock (as {@link #prepare} returns one).
     */
    public synchronized String advance(long batchId, String judged) throws IOException {
        double now = System.currentTimeMillis() / 1000.0;
        for (String line : (judged == null ? newest.value() : judged).split("\n")) {
            String[] fields = line.split("\t");
            if (fields.length == 3) marks.observe(fields[0], fields[1], Long.parseLong(fields[2]), now);
        }
        JsonNode saved = batchId == documentBatch ? document : read(batchId);
        ObjectNode after = saved instanceof ObjectNode ? ((ObjectNode) saved).deepCopy() : JSON.createObjectNode();
        after.set("after", JSON.readTree(marks.toDocument()));
        write(batchId, after);
        for (Long old : new ArrayList<>(written.headSet(batchId - KEPT_FILES))) {
            files.delete(file(old));
            written.remove(old);
        }
        return marks.table(now);
    }

    /** The table the watermarks give at the wall clock (see {@link Watermarks#table}). */
    public synchronized String table() {
        return marks.table(System.currentTimeMillis() / 1000.0);
    }

    private List<String> partitions(String[] lines) {
        List<String> partitions = new ArrayList<>();
        if (topic == null) return partitions;
        for (int i = 2; i < lines.length; i++) {
            if (lines[i].isBlank()) continue;
            JsonNode source;
            try {
                source = JSON.readTree(lines[i]);
            } catch (IOException unreadable) {
                return new ArrayList<>();
            }
            for (Map.Entry<String, JsonNode> partition : source.path(topic).properties()) {
                partitions.add(topic + ":" + partition.getKey());
            }
        }
        return partitions;
    }

    private JsonNode read(long batchId) throws IOException {
        try {
            String text = files.read(file(batchId));
            return text == null ? null : JSON.readTree(text);
        } catch (JsonProcessingException unreadable) { // a file cut short by a kill: as if missing
            return null;
        }
    }

    private void write(long batchId, JsonNode content) throws IOException {
        files.write(file(batchId), content.toString());
        written.add(batchId);
    }

    private static String file(long batchId) {
        return DIRECTORY + "/" + batchId + ".json";
    }
}
