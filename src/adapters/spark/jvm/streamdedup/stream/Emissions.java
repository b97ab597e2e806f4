package streamdedup.stream;

import java.io.Serializable;

/**
 * The state of one key: its live emissions' event times (s), the source position of the record
 * that made each ({@code owners[i]} for {@code times[i]}: {@code source:partition:offset}, as
 * domain._events.SourcePosition.token), its rule's retention (s), and when it wakes (ms of Spark's
 * event-time watermark: the moment of the queue that lists it, ExpiryQueue, or in state format 4
 * its own timer). State formats 4 and 5 (a transformWithState value state); format 3 was
 * flatMapGroupsWithState's, without wake; format 2 had no owners either.
 */
public class Emissions implements Serializable {
    private long[] times = new long[0];
    private String[] owners = new String[0];
    private long retention;
    private long wake;

    public Emissions() {}

    public Emissions(long[] times, String[] owners, long retention, long wake) {
        this.times = times;
        this.owners = owners;
        this.retention = retention;
        this.wake = wake;
    }

    public long[] getTimes() { return times; }

    public void setTimes(long[] times) { this.times = times; }

    public String[] getOwners() { return owners; }

    public void setOwners(String[] owners) { this.owners = owners; }

    public long getRetention() { return retention; }

    public void setRetention(long retention) { this.retention = retention; }

    public long getWake() { return wake; }

    public void setWake(long wake) { this.wake = wake; }
}
