package streamdedup.spark;

import java.io.Serializable;

/** The state of one key: its live emissions' event times (s) and its rule's retention (s). */
public class Emissions implements Serializable {
    private long[] times = new long[0];
    private long retention;

    public Emissions() {}

    public Emissions(long[] times, long retention) {
        this.times = times;
        this.retention = retention;
    }

    public long[] getTimes() { return times; }

    public void setTimes(long[] times) { this.times = times; }

    public long getRetention() { return retention; }

    public void setRetention(long retention) { this.retention = retention; }
}
