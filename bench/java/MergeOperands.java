import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;

import org.rocksdb.CompressionType;
import org.rocksdb.FlushOptions;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.StringAppendOperator;
import org.rocksdb.WriteOptions;

/**
 * What RocksDB's string-append merge operator costs by the number of operands a key holds
 * (bench/rocksdb_merge_bench.py runs it): {@code operands} appends of {@code bytes} bytes each,
 * {@code perKey} to a key, into one memtable, then one flush and a read of every key. Options as
 * Spark's RocksDB state store sets them for the engine: the operator with an empty delimiter
 * (Spark's list state, merge operator version 2), lz4, no write-ahead log, 512 MB memtables.
 * Prints one line: {@code perKey keys mergeMs flushMs getMs bytes}.
 */
public final class MergeOperands {
    public static void main(String[] args) throws Exception {
        int operands = Integer.parseInt(args[0]);
        int perKey = Integer.parseInt(args[1]);
        int bytes = Integer.parseInt(args[2]);
        RocksDB.loadLibrary();
        Path dir = Files.createTempDirectory("merge-operands");
        try (Options options = new Options()
                     .setCreateIfMissing(true)
                     .setMergeOperator(new StringAppendOperator(""))
                     .setCompressionType(CompressionType.LZ4_COMPRESSION)
                     .setWriteBufferSize(512L << 20);
             RocksDB db = RocksDB.open(options, dir.toString());
             WriteOptions write = new WriteOptions().setDisableWAL(true);
             FlushOptions flush = new FlushOptions().setWaitForFlush(true)) {
            byte[] value = new byte[bytes];
            Arrays.fill(value, (byte) 'x');
            long start = System.nanoTime();
            for (int i = 0; i < operands; i++) {
                db.merge(write, ("q" + i / perKey).getBytes(), value);
            }
            long merged = System.nanoTime();
            db.flush(flush);
            long flushed = System.nanoTime();
            int keys = (operands + perKey - 1) / perKey;
            long read = 0;
            for (int k = 0; k < keys; k++) {
                read += db.get(("q" + k).getBytes()).length;
            }
            long done = System.nanoTime();
            System.out.printf("%d %d %.1f %.1f %.1f %d%n", perKey, keys, (merged - start) / 1e6,
                    (flushed - merged) / 1e6, (done - flushed) / 1e6, read);
        } finally {
            try (var paths = Files.walk(dir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }
}
