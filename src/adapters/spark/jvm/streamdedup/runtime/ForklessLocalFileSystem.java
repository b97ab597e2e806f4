package streamdedup.runtime;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * Hadoop's checksummed local file system ({@code fs.file.impl}: {@code FileSystem}'s
 * {@code file:} scheme) over {@link ForklessRawLocalFileSystem}.
 */
public class ForklessLocalFileSystem extends LocalFileSystem {
    public ForklessLocalFileSystem() {
        super(new ForklessRawLocalFileSystem());
    }
}
