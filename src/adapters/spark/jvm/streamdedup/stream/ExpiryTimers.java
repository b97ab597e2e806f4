package streamdedup.stream;

/**
 * When a {@link WindowDedup} key wakes (its queue's moment, {@link ExpiryQueue}), and which expiries
 * that moment covers.
 *
 * A key wakes when Spark's watermark passes its newest emission's expiry (s), moved ahead by how
 * far Spark's watermark ran ahead of the key's rule's watermark when it was queued (the lag, whole
 * seconds). Spark's watermark moves in whole seconds (the eviction clock is {@code timestamp_seconds}
 * of a long, with no delay), so a timer fires at the first whole second at or past it, and its
 * milliseconds are free to carry the lag: a wake of {@code s * 1000 + 2 + lag} fires at second
 * {@code s + 1} and covers expiries up to {@code s + 1 - lag}. A key whose newest expiry is covered
 * by its wake keeps it (one queue entry per key while its expiry does not move).
 *
 * A wake of milliseconds 0 or 1 covers only the expiries up to its second: those state format 4 set
 * at first (always whole seconds, or the watermark plus 1 ms, a timer of the key's own), and those
 * whose lag does not fit ({@link #MAX_LAG}) or that wake at Spark's first watermark.
 */
public final class ExpiryTimers {
    /** The first millisecond value that carries a lag. */
    static final long CARRIES_LAG = 2;
    /** The longest lag (s) a timer carries. */
    public static final long MAX_LAG = 999 - CARRIES_LAG;

    private ExpiryTimers() {}

    /**
     * The timer for a key whose newest emission expires at {@code expiry} (s), when Spark's watermark
     * runs {@code aheadMs} ahead of the rule's and is now {@code nowMs} (-1 while it has none):
     * never at or before {@code nowMs}, never earlier than {@code expiry * 1000 + aheadMs} is reached.
     */
    public static long wake(long expiry, long aheadMs, long nowMs) {
        long lag = Math.floorDiv(Math.max(0, aheadMs) + 999, 1000L);
        long second = Math.max(expiry + lag, Math.floorDiv(nowMs, 1000L) + 1);  // when it fires
        long timer = (second - 1) * 1000L + CARRIES_LAG + lag;
        // second * 1000 > nowMs; a carried lag fits in the second before unless nowMs is in it
        return lag <= MAX_LAG && timer > nowMs ? timer : second * 1000L;
    }

    /**
     * The newest expiry (s) {@code timer} was set for at most: a key whose newest emission expires
     * later needs a new timer.
     */
    public static long covers(long timer) {
        long millis = Math.floorMod(timer, 1000L);
        long second = Math.floorDiv(timer, 1000L);
        return millis < CARRIES_LAG ? second : second + 1 - (millis - CARRIES_LAG);
    }
}
