package streamdedup.checkpoint;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

/**
 * The files of a checkpoint's state directory ({@code CHECKPOINT/state}), on any Hadoop file
 * system, looked at after each micro-batch: the bytes of the files that appeared (or changed
 * size) since the last look, and the bytes of all of them. A state store writes only new files
 * to the checkpoint (RocksDB: a changelog per version, and snapshots with the SST files they
 * add; the memory provider: a delta per version and snapshots), so what appeared is what the
 * micro-batches in between wrote there.
 *
 * One recursive listing per look, done here in the JVM ({@code FileSystem.listFiles}: a flat
 * listing on object stores), so the Python driver makes one call whatever the number of files.
 * Hidden files are left out: the temporary files a file is written to before it is renamed into
 * place, which would count its bytes twice, and Hadoop's checksums ({@code .NAME.crc}, which a
 * local file system keeps beside each file and leaves out of its listings anyway). Files the
 * store deleted (old versions past their retention) leave the listing.
 */
public final class StateFiles {
    private final FileSystem fs;
    private final Path directory;
    private Map<String, Long> known;

    /** The state directory at {@code location} (a Hadoop URI); what it holds now is the baseline. */
    public StateFiles(String location, Configuration conf) throws IOException {
        directory = new Path(location);
        fs = directory.getFileSystem(conf);
        known = listing();
    }

    /** {bytes of the files new or resized since the last look (or the baseline), bytes of all files}. */
    public synchronized long[] look() throws IOException {
        Map<String, Long> now = listing();
        long added = 0;
        long total = 0;
        for (Map.Entry<String, Long> file : now.entrySet()) {
            total += file.getValue();
            if (!file.getValue().equals(known.get(file.getKey()))) {
                added += file.getValue();
            }
        }
        known = now;
        return new long[] {added, total};
    }

    private Map<String, Long> listing() throws IOException {
        Map<String, Long> sizes = new HashMap<>();
        if (!fs.exists(directory)) {
            return sizes;
        }
        RemoteIterator<LocatedFileStatus> files = fs.listFiles(directory, true);
        while (files.hasNext()) {
            LocatedFileStatus file = files.next();
            if (!file.getPath().getName().startsWith(".")) {
                sizes.put(file.getPath().toString(), file.getLen());
            }
        }
        return sizes;
    }
}
