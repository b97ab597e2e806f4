package streamdedup.runtime;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * Hadoop's checksummed local file system for {@code FileContext}
 * ({@code fs.AbstractFileSystem.file.impl}), as {@code org.apache.hadoop.fs.local.LocalFs},
 * over {@link ForklessRawLocalFileSystem}: what Spark's checkpoint file manager and the
 * engine's own checkpoint files write through.
 */
public class ForklessLocalFs extends ChecksumFs {
    public ForklessLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(conf));
    }

    @Override
    public int getUriDefaultPort() {
        return -1;
    }

    /** {@code org.apache.hadoop.fs.local.RawLocalFs} over {@link ForklessRawLocalFileSystem}. */
    static final class Raw extends DelegateToFileSystem {
        Raw(Configuration conf) throws IOException, URISyntaxException {
            super(FsConstants.LOCAL_FS_URI, new ForklessRawLocalFileSystem(), conf,
                    FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;
        }
    }
}
