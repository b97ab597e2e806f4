package streamdedup.output;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Failures a test injects into the writer, once per JVM and only in a task's first attempt of
 * its stage's first attempt (so a task Spark retries on a new executor, or in a stage it
 * resubmits after losing shuffle output with an executor, does not fail again), at one
 * partition of one batch
 * (Spark setting {@code spark.streamdedup.test.writerFault}, never set in production):
 * {@code KIND:BATCH:PARTITION[:TAG][,…]} (a fault fires once per JVM: a test's {@code TAG} makes
 * it another fault than an earlier test's), KIND one of
 * {@code halt-at-start} / {@code stall-at-start} (the task's JVM dies, or the task hangs, as the
 * write of its partition starts: before the stateful operator judged any of its rows),
 * {@code fail-before-commit} (the task dies mid-transaction: its records sent, the transaction
 * left open; with at-least-once output, once its records are sent and flushed), {@code fail-after-commit} (the task dies after its commit, before Spark hears of
 * it), {@code halt-before-commit} / {@code halt-after-commit} (the whole JVM dies there: with
 * {@code local[N]} the driver too), {@code stall-before-commit} (the task hangs mid-transaction
 * for {@link #STALL}, holding the batch open while the test kills the driver).
 */
final class Faults {
    static final long STALL = 10 * 60 * 1000L;
    private static final Set<String> FIRED = ConcurrentHashMap.newKeySet();
    private final String kind;

    /** {@code attempt}: 0 for a task's first attempt in its stage's first attempt. */
    Faults(String spec, long batch, int partition, int attempt) {
        String found = null;
        if (spec != null && attempt == 0) {
            for (String one : spec.split(",")) {
                String[] parts = one.trim().split(":");
                boolean here = (parts.length == 3 || parts.length == 4) && Long.parseLong(parts[1]) == batch
                        && Integer.parseInt(parts[2]) == partition;
                if (here && FIRED.add(one.trim())) {
                    found = parts[0];
                }
            }
        }
        kind = found;
    }

    void atStart() {
        strike("at-start");
    }

    void beforeCommit() {
        strike("before-commit");
    }

    void afterCommit() {
        strike("after-commit");
    }

    /** A task "killed" mid-transaction leaves its producer as it was: neither aborted nor closed. */
    boolean leavesTransactionOpen() {
        return "fail-before-commit".equals(kind);
    }

    private void strike(String where) {
        if (kind == null || !kind.endsWith(where)) return;
        if (kind.startsWith("stall-")) {
            System.err.println("streamdedup test fault: task stalls " + where);
            try {
                Thread.sleep(STALL);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
            return;
        }
        if (kind.startsWith("halt-")) {
            System.err.println("streamdedup test fault: halting the JVM " + where);
            Runtime.getRuntime().halt(137);
        }
        throw new IllegalStateException("streamdedup test fault: task failed " + where);
    }
}
