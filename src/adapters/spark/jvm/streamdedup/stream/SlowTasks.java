package streamdedup.stream;

import java.util.concurrent.locks.LockSupport;

import org.apache.spark.TaskContext;

/**
 * A test's slow-down of one stage's tasks in one micro-batch, so that a kill at a random moment
 * of that stage finds it running (tests/support/faults/phases.py, the unplaced kills). Spark setting
 * {@value #SETTING} (never set in production): {@code STAGE:BATCH:MICROS[,…]}, STAGE
 * {@code source} (the parse of each record, {@link PlainEvent}) or {@code operator} (each row
 * the stateful operator receives, {@link WindowDedup}), MICROS the pause per record. Only a
 * task's first attempt in its stage's first attempt is slowed: what Spark runs again runs at
 * full speed. Session settings reach the tasks as local properties; the micro-batch's id is
 * the local property Spark's micro-batch execution sets ({@value #BATCH_ID}).
 */
public final class SlowTasks {
    public static final String SETTING = "spark.streamdedup.test.slowTasks";
    static final String BATCH_ID = "streaming.sql.batchId";

    private SlowTasks() {
    }

    /** The pause per record, in µs, of the running task at {@code stage}: 0 unless a test asked for one. */
    static long micros(String stage) {
        TaskContext task = TaskContext.get();
        if (task == null || task.attemptNumber() + task.stageAttemptNumber() > 0) return 0;
        String spec = task.getLocalProperty(SETTING);
        String batch = task.getLocalProperty(BATCH_ID);
        if (spec == null || batch == null) return 0;
        for (String one : spec.split(",")) {
            String[] parts = one.trim().split(":");
            if (parts.length == 3 && parts[0].equals(stage) && parts[1].equals(batch)) {
                if (Long.parseLong(parts[2]) > 0) {
                    System.err.println("streamdedup test fault: slow " + stage + " task of batch " + batch);
                }
                return Long.parseLong(parts[2]);
            }
        }
        return 0;
    }

    /** Pauses {@code micros} µs per record for {@code records} records (nothing for 0). */
    static void pause(long micros, long records) {
        if (micros > 0 && records > 0) LockSupport.parkNanos(micros * records * 1_000L);
    }
}
