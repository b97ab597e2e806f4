package streamdedup.output;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import streamdedup.stream.BatchWatermarkFiles;

/**
 * The driver's work around each micro-batch written by {@link KafkaSink}, with no call into
 * Python: registered by the engine for one query run under a name the sink's {@code hooks}
 * option gives.
 *
 * <ul>
 *   <li>{@link #before}: the checkpoint's lease is this instance's (the Python heartbeat renews
 *       it and reports here, {@link #renewed}, {@link #lost}: a batch is refused once the lease
 *       was lost, or when it was not found ours within {@code freshMs}, as
 *       {@code checkpoint._lease.confirm} refuses it), then the watermarks' {@code prepare}.
 *   <li>{@link #after}: the watermarks' {@code advance}; the lines of the tasks that found
 *       their partition committed before (its marker) are kept for the engine to report
 *       ({@link #drainSkipped}).
 *   <li>{@link #aborted}: Spark aborted the batch's write (a task failed past Spark's own task
 *       retries); the engine retries the batch per its {@code transient} policy by starting the
 *       query again ({@link #lastAborted}).
 * </ul>
 */
public final class BatchHooks {
    private static final ConcurrentHashMap<String, BatchHooks> REGISTERED = new ConcurrentHashMap<>();

    private final BatchWatermarkFiles watermarks;
    private final long freshMs;
    private final AtomicLong oursAtMs = new AtomicLong(Long.MIN_VALUE / 2);
    private final AtomicReference<String> lostReason = new AtomicReference<>();
    private final ConcurrentLinkedQueue<String> skipped = new ConcurrentLinkedQueue<>();
    private volatile long lastAborted = -1;

    private BatchHooks(BatchWatermarkFiles watermarks, long freshMs) {
        this.watermarks = watermarks;
        this.freshMs = freshMs;
    }

    /** Registers the hooks of a query run under {@code name}; {@code freshMs}: how long a renewal proves the lease. */
    public static BatchHooks register(String name, BatchWatermarkFiles watermarks, long freshMs) {
        BatchHooks hooks = new BatchHooks(watermarks, freshMs);
        REGISTERED.put(name, hooks);
        return hooks;
    }

    public static void unregister(String name) {
        REGISTERED.remove(name);
    }

    static BatchHooks of(String name) {
        return name == null ? null : REGISTERED.get(name);
    }

    /** The heartbeat found the lease this instance's and renewed it. */
    public void renewed() {
        oursAtMs.set(System.nanoTime() / 1_000_000);
    }

    /** The heartbeat found the checkpoint lost ({@code reason}). */
    public void lost(String reason) {
        lostReason.compareAndSet(null, reason);
    }

    void before(long batchId) {
        String reason = lostReason.get();
        if (reason == null && System.nanoTime() / 1_000_000 - oursAtMs.get() > freshMs) {
            reason = "the lease was not renewed within " + freshMs + " ms";
        }
        if (reason != null) throw new IllegalStateException("checkpoint lease: " + reason + "; batch " + batchId
                + " is not written");
        try {
            watermarks.prepare(batchId);
        } catch (IOException failed) {
            throw new UncheckedIOException(failed);
        }
    }

    /** Keeps at most this many skipped partitions' lines for the engine to drain (it drains after every batch). */
    static final int SKIPPED_KEPT = 1000;

    void after(long batchId, String lines) {
        try {
            watermarks.advance(batchId, null);
        } catch (IOException failed) {
            throw new UncheckedIOException(failed);
        }
        for (String line : lines.split("\n")) {
            if (!line.contains("\"skipped\":true")) continue;
            skipped.add(batchId + "\t" + line);
            while (skipped.size() > SKIPPED_KEPT) skipped.poll();
        }
    }

    void aborted(long batchId) {
        lastAborted = batchId;
    }

    /**
     * The lines of the partitions found committed before, since the last call: one per line,
     * {@code BATCH<TAB>LINE}.
     */
    public String drainSkipped() {
        StringBuilder lines = new StringBuilder();
        for (String line = skipped.poll(); line != null; line = skipped.poll()) lines.append(line).append('\n');
        return lines.toString();
    }

    /** The last batch whose write Spark aborted in this run, or -1. */
    public long lastAborted() {
        return lastAborted;
    }
}
