package streamdedup.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.UnsupportedFileSystemException;

/**
 * Small text files under a checkpoint, on any Hadoop file system, each read or written in one
 * call from the Python driver: the files a micro-batch reads and writes on its critical path
 * (its offsets entry, the watermark table before it and the watermarks after it). The same
 * operations through py4j, one Hadoop call at a time ({@code checkpoint._hadoop_files.HadoopPath}),
 * cost some ten round trips a file.
 *
 * A write replaces the file atomically where the file system can, as {@code HadoopPath.write_text}
 * does: the text goes to a hidden file beside it ({@code .NAME.<random>.partial}), renamed over the
 * target with {@code FileContext.rename(..., OVERWRITE)}; a scheme without a {@code FileContext}
 * deletes the target, then renames.
 */
public final class CheckpointText {
    private final Path root;
    private final FileSystem fs;
    private final Configuration conf;
    private FileContext context;

    /** Files under {@code location} (a Hadoop URI or path, resolved as Spark resolves a checkpoint's). */
    public CheckpointText(String location, Configuration conf) throws IOException {
        Path path = new Path(location);
        this.fs = path.getFileSystem(conf);
        this.root = fs.makeQualified(path);
        this.conf = conf;
    }

    /** The text of {@code relative} (a path under the root, {@code /}-separated), or null when it does not exist. */
    public String read(String relative) throws IOException {
        try (InputStream in = fs.open(new Path(root, relative))) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (FileNotFoundException missing) {
            return null;
        }
    }

    /** Replaces {@code relative}'s content with {@code text} (see the class's text). */
    public void write(String relative, String text) throws IOException {
        Path target = new Path(root, relative);
        Path partial = new Path(target.getParent(),
                "." + target.getName() + "." + UUID.randomUUID().toString().substring(0, 8) + ".partial");
        try (FSDataOutputStream out = fs.create(partial, true)) {
            out.write(text.getBytes(StandardCharsets.UTF_8));
        }
        FileContext files = fileContext();
        if (files == null) {
            fs.delete(target, false);
            fs.rename(partial, target);
        } else {
            files.rename(partial, target, Options.Rename.OVERWRITE);
        }
    }

    /** Deletes {@code relative}; whether it was there. */
    public boolean delete(String relative) throws IOException {
        return fs.delete(new Path(root, relative), false);
    }

    /** The names in the directory {@code relative}; none when it does not exist. */
    public String[] list(String relative) throws IOException {
        try {
            FileStatus[] statuses = fs.listStatus(new Path(root, relative));
            String[] names = new String[statuses.length];
            for (int i = 0; i < statuses.length; i++) names[i] = statuses[i].getPath().getName();
            return names;
        } catch (FileNotFoundException missing) {
            return new String[0];
        }
    }

    /** Creates the directory {@code relative} and its parents. */
    public void mkdirs(String relative) throws IOException {
        fs.mkdirs(new Path(root, relative));
    }

    private FileContext fileContext() throws IOException {
        if (context == null) {
            try {
                context = FileContext.getFileContext(fs.getUri(), conf);
            } catch (UnsupportedFileSystemException unsupported) {
                return null;
            }
        }
        return context;
    }
}
