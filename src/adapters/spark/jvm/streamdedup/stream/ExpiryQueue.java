package streamdedup.stream;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.statefulprocessor.ImplicitGroupingKeyTracker;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.StatefulProcessorHandle;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The operator's own index of expiries (state format 5): the keys that wake at one moment, listed
 * under one key of the operator's state, the <em>queue</em> of that moment, which alone keeps a timer.
 *
 * Spark's {@code transformWithState} finds the timers that fall due by scanning its timer index from
 * its start (Spark 4.2, {@code TransformWithStateExec.processTimers}: no lower bound, on purpose), so
 * every micro-batch steps over the deletion markers of all the timers fired since RocksDB's
 * compaction last dropped them. A timer per key makes that one marker per expired key, and the
 * scan's cost follows the keys expired over the last compactions, whatever the batch holds. Here a
 * key is appended to the list of the moment it wakes at (a RocksDB merge: no read), and only that
 * moment's queue keeps a timer: a partition's index holds one timer per moment at which keys wake
 * (whole seconds of event time, and the lag a timer carries: {@link ExpiryTimers}), and the scan
 * steps over as few markers.
 *
 * A queue is a key of the operator's grouping-key space that no data key can be: {@link #PREFIX} is
 * an escape (domain._keys) followed by a letter an escaped key never has after one. The operator
 * reaches a queue's state from a data key's call (and a data key's from a queue's timer) by setting
 * Spark's implicit grouping key, as Spark itself does around every call of the processor
 * ({@code ImplicitGroupingKeyTracker}), and setting it back. Each partition's state store holds its
 * own queues: a queue is never read through the shuffle, only through its timer.
 *
 * An entry does not say whether it is still its key's wake: a key woken again later (a newer
 * emission, or a rule's watermark still behind) is appended to a later queue and its earlier entry
 * stays; the operator reads the key's state when its entry comes due and skips the entry unless the
 * key's stored wake is that queue's moment ({@link WindowDedup}).
 */
final class ExpiryQueue {
    /** The start of every queue's key: an escape and {@code q}, never the start of a data key. */
    static final String PREFIX = "\u001eq";

    private final ListState<String> keys;
    private final StatefulProcessorHandle handle;
    private final Set<Long> timed = new HashSet<>();  // the moments whose queue has a timer, as this task knows

    ExpiryQueue(ListState<String> keys, StatefulProcessorHandle handle) {
        this.keys = keys;
        this.handle = handle;
    }

    /** Whether {@code key} is a queue (else a data key). */
    static boolean isQueue(String key) {
        return key.startsWith(PREFIX);
    }

    /** Appends {@code key} (the current implicit key) to the queue of {@code wake} (ms of Spark's watermark),
     *  which gets its timer with its first entry; the implicit key is {@code key} again on return. */
    void add(String key, long wake) {
        at(PREFIX + wake);
        try {
            // a queue keeps its timer exactly while it lists keys (take empties it as the timer fires)
            if (timed.add(wake) && !keys.exists()) handle.registerTimer(wake);
            keys.appendValue(key);
        } finally {
            at(key);
        }
    }

    /** The keys listed in the current implicit key's queue (one whose timer fires), which is emptied. */
    List<String> take() {
        List<String> listed = new ArrayList<>();
        CollectionConverters.asJava(keys.get()).forEachRemaining(listed::add);
        keys.clear();
        return listed;
    }

    /** Makes {@code key} the implicit grouping key of the handle's state and timer calls. */
    static void at(String key) {
        ImplicitGroupingKeyTracker.setImplicitKey(key);
    }
}
