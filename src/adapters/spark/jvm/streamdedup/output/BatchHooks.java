package streamdedup.output;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.concurrent.ConcurrentHashMap;
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
 *   <li>{@link #after}: the watermarks' {@code advance}; the tasks' lines are kept for the
 *       engine ({@link #lastLines}).
 * </ul>
 */
public final class BatchHooks {
    private static final ConcurrentHashMap<String, BatchHooks> REGISTERED = new ConcurrentHashMap<>();

    private final BatchWatermarkFiles watermarks;
    private final long freshMs;
    private final AtomicLong oursAtMs = new AtomicLong(Long.MIN_VALUE / 2);
    private final AtomicReference<String> lostReason = new AtomicReference<>();
    private volatile String lastLines = "";
    private volatile long lastBatch = -1;

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

    void after(long batchId, String lines) {
        try {
            watermarks.advance(batchId, null);
        } catch (IOException failed) {
            throw new UncheckedIOException(failed);
        }
        lastLines = lines;
        lastBatch = batchId;
    }

    /** The tasks' lines of the last batch committed ({@link #lastBatch}), one per partition. */
    public String lastLines() {
        return lastLines;
    }

    public long lastBatch() {
        return lastBatch;
    }
}
