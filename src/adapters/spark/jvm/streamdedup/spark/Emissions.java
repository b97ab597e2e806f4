package streamdedup.spark;

import java.io.Serializable;

/**
 * The state of one key: its live emissions' event times (s), the source position of the record
 * that made each ({@code owners[i]} for {@code times[i]}: {@code source:partition:offset}, as
 * domain.events.SourcePosition.token), and its rule's retention (s). State format 3; format 2
 * had no owners.
 */
public class Emissions implements Serializable {
    private long[] times = new long[0];
    private String[] owners = new String[0];
    private long retention;

    public Emissions() {}

    public Emissions(long[] times, String[] owners, long retention) {
        this.times = times;
        this.owners = owners;
        this.retention = retention;
    }

    public long[] getTimes() { return times; }

    public void setTimes(long[] times) { this.times = times; }

    public String[] getOwners() { return owners; }

    public void setOwners(String[] owners) { this.owners = owners; }

    public long getRetention() { return retention; }

    public void setRetention(long retention) { this.retention = retention; }
}
