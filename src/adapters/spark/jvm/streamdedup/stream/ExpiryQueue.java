package streamdedup.stream;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.statefulprocessor.ImplicitGroupingKeyTracker;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.StatefulProcessorHandle;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The operator's own index of expiries (state formats 5 and 6): the keys that wake at one moment,
 * listed under one key of the operator's state, the <em>queue</em> of that moment, which alone keeps a timer.
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
 * A queue is a log, in the order it was written: {@link #JOINED} and a key when the key is set to
 * wake at the queue's moment, {@link #LEFT} and a key when a key set to wake there is set to wake
 * elsewhere or removed (state format 6). Replayed when the queue's timer fires, the log gives the
 * keys whose stored wake is still that moment ({@link Due#current}) without reading them: the
 * operator removes such a key unread when its rule's watermark has passed what the moment covers,
 * a delete instead of a read and a delete. State format 5 wrote a key alone on joining and nothing
 * on leaving: such an entry ({@link Due#unsure}) may be stale, and the operator reads the key and
 * skips the entry unless the key's stored wake is that queue's moment ({@link WindowDedup}).
 *
 * Since state format 7 a moment's log is cut in {@link #SHARDS} lists by its keys' hash
 * ({@link #shard}: a key's joins and leaves of a moment are in one list, in order), and the
 * moment's timer stays on its own key. Each append is a RocksDB merge operand, and RocksDB's
 * string-append operator folds a list's operands pairwise as it flushes and compacts, copying the
 * growing value each time: the cost of a list grows with the square of its operands. One list per
 * moment held all the keys of a second of event time (25,000 a second of a stream that keeps 30 M
 * keys for 1,200 s): flushing 500,000 appends took 0.30 s at 195 operands a list and 7.9 s at
 * 25,000 (bench/rocksdb_merge_bench.py, docs/design/operator.md). A moment's due log is read from
 * its own key (what formats 5 and 6 wrote) and then from each of its lists.
 */
final class ExpiryQueue {
    /** The start of every queue's key: an escape and {@code q}, never the start of a data key. */
    static final String PREFIX = "\u001eq";
    /** Before a key, an entry saying the key wakes at the queue's moment (never the start of a key). */
    static final String JOINED = "\u001e+";
    /** Before a key, an entry saying the key no longer wakes at the queue's moment. */
    static final String LEFT = "\u001e-";
    /** The lists a moment's log is cut in (state format 7). Fixed: a moment's entries are found by it.
     *  A moment due reads every list: with 64, a 500,000-record batch at 1 M live keys (600 moments)
     *  read 136,000 keys more and took twice the time in its timers' phase; with 16, a moment of a
     *  stream of 30 M keys on two state partitions lists ~780 keys a list. */
    static final int SHARDS = 16;
    /** Between a moment's key and the number of one of its lists (not a digit: never a moment's key). */
    static final String SHARD = "/";

    private final ListState<String> entries;
    private final StatefulProcessorHandle handle;
    private final Set<Long> timed = new HashSet<>();  // the moments whose queue has a timer, as this task knows

    ExpiryQueue(ListState<String> entries, StatefulProcessorHandle handle) {
        this.entries = entries;
        this.handle = handle;
    }

    /** Whether {@code key} is a queue (else a data key). */
    static boolean isQueue(String key) {
        return key.startsWith(PREFIX);
    }

    /** Lists {@code key} (the current implicit key) to wake at {@code wake} (ms of Spark's watermark);
     *  the queue gets its timer with its first entry; the implicit key is {@code key} again on return. */
    void add(String key, long wake) {
        write(key, wake, JOINED);
    }

    /** Records that {@code key} (the current implicit key), listed to wake at {@code wake}, no longer
     *  does (it wakes at another moment, or is removed). */
    void leave(String key, long wake) {
        write(key, wake, LEFT);
    }

    private void write(String key, long wake, String entry) {
        at(PREFIX + wake);
        try {
            // a queue keeps its timer exactly while it lists entries (take empties it as the timer fires);
            // a key listed by state format 4 leaves a moment no queue has yet, which then gets one
            if (timed.add(wake) && !hasTimer()) handle.registerTimer(wake);
            at(PREFIX + wake + SHARD + shard(key));
            entries.appendValue(entry + key);
        } finally {
            at(key);
        }
    }

    /** The list of a moment that holds {@code key}'s entries: the same for every moment and every
     *  JVM ({@code String.hashCode} is specified). */
    static int shard(String key) {
        return Math.floorMod(key.hashCode(), SHARDS);
    }

    /** Whether the current implicit key (a queue) has its timer. Its timers are read to their end:
     *  Spark closes the RocksDB iterator of the scan then, not at the task's end. */
    private boolean hasTimer() {
        scala.collection.Iterator<Object> timers = handle.listTimers();
        boolean any = false;
        while (timers.hasNext()) {
            timers.next();
            any = true;
        }
        return any;
    }

    /** The keys of the queue {@code moment} (the current implicit key, whose timer fires), which is
     *  emptied: the entries under the moment's own key (formats 5 and 6), older than any in its lists,
     *  then each list's; a key's entries in the lists are all in one, so each key's are replayed in
     *  the order they were written. The implicit key is the moment's again on return. */
    Due take(String moment) {
        Due due = new Due();
        try {
            drain(due);
            for (int shard = 0; shard < SHARDS; shard++) {
                at(moment + SHARD + shard);
                drain(due);
            }
        } finally {
            at(moment);
        }
        return due;
    }

    /** Replays the current implicit key's list into {@code due} and removes it (an empty one is left as it is). */
    private void drain(Due due) {
        java.util.Iterator<String> listed = CollectionConverters.asJava(entries.get());
        if (!listed.hasNext()) return;
        listed.forEachRemaining(due::replay);
        entries.clear();
    }

    /** What a queue's log says when its moment comes. */
    static final class Due {
        /** The keys whose stored wake is the queue's moment, in the order they joined it. */
        final Set<String> current = new LinkedHashSet<>();
        /** The keys state format 5 listed there, which may have left since (not in {@link #current}). */
        final List<String> unsure = new ArrayList<>();

        private void replay(String entry) {
            if (entry.startsWith(JOINED)) {
                current.add(entry.substring(JOINED.length()));
            } else if (entry.startsWith(LEFT)) {
                current.remove(entry.substring(LEFT.length()));
            } else {
                unsure.add(entry);
            }
        }
    }

    /** Makes {@code key} the implicit grouping key of the handle's state and timer calls. */
    static void at(String key) {
        ImplicitGroupingKeyTracker.setImplicitKey(key);
    }
}
