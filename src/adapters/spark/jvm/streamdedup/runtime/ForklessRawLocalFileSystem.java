package streamdedup.runtime;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system without the processes it starts when its native library is not
 * loaded (pyspark ships none). Without it, {@link RawLocalFileSystem} runs {@code chmod} for
 * every file it creates, {@code readlink} for every rename through {@code FileContext}, and
 * {@code ls -ld} for every file whose permission a listing reports: 6–45 ms each, so every
 * checkpoint file Spark writes to a local directory (offset log, commit log, a state store's
 * changelog, the engine's watermarks) cost tens of milliseconds on a micro-batch's critical path.
 *
 * Here the same calls are made through {@code java.nio.file}, with the same results: a
 * permission is set with {@code Files.setPosixFilePermissions}; a status (of a file or of a
 * link, and each of a listing's) carries the owner, group and permission bits of
 * {@code Files.readAttributes}. What {@code java.nio} cannot express (a sticky bit, a
 * symbolic link's status, a file system without POSIX attributes) goes to Hadoop's own code.
 */
public class ForklessRawLocalFileSystem extends RawLocalFileSystem {

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        if (permission.getStickyBit()) {
            super.setPermission(p, permission);
            return;
        }
        try {
            Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission));
        } catch (UnsupportedOperationException notPosix) {
            super.setPermission(p, permission);
        }
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
        return withAttributes(super.getFileStatus(f));
    }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
        FileStatus[] listed = super.listStatus(f);
        for (int i = 0; i < listed.length; i++) {
            listed[i] = withAttributes(listed[i]);
        }
        return listed;
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
        java.nio.file.Path file = pathToFile(f).toPath();
        PosixFileAttributes link;
        try {
            link = Files.readAttributes(file, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException missing) {
            throw new FileNotFoundException("File " + f + " does not exist");
        } catch (UnsupportedOperationException notPosix) {
            return super.getFileLinkStatus(f);
        }
        if (link.isSymbolicLink()) {
            return super.getFileLinkStatus(f);
        }
        return status(link, f.makeQualified(getUri(), getWorkingDirectory()), getDefaultBlockSize(f));
    }

    /** {@code status} with the owner, group and permission of its file, read without a process. */
    private FileStatus withAttributes(FileStatus status) throws IOException {
        java.nio.file.Path file = pathToFile(status.getPath()).toPath();
        try {
            PosixFileAttributes attributes = Files.readAttributes(file, PosixFileAttributes.class);
            return status(attributes, status.getPath(), status.getBlockSize());
        } catch (NoSuchFileException | UnsupportedOperationException gone) {
            return status;  // deleted since, or no POSIX attributes: Hadoop's own status (read lazily)
        }
    }

    private static FileStatus status(PosixFileAttributes a, Path path, long blockSize) {
        return new FileStatus(a.size(), a.isDirectory(), 1, blockSize, a.lastModifiedTime().toMillis(),
                a.lastAccessTime().toMillis(), permission(a.permissions()), a.owner().getName(),
                a.group().getName(), path);
    }

    private static final PosixFilePermission[][] BITS = {
        {PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE},
        {PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE},
        {PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE},
    };

    static Set<PosixFilePermission> posix(FsPermission permission) {
        FsAction[] actions = {permission.getUserAction(), permission.getGroupAction(), permission.getOtherAction()};
        Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
        for (int who = 0; who < 3; who++) {
            if (actions[who].implies(FsAction.READ)) set.add(BITS[who][0]);
            if (actions[who].implies(FsAction.WRITE)) set.add(BITS[who][1]);
            if (actions[who].implies(FsAction.EXECUTE)) set.add(BITS[who][2]);
        }
        return set;
    }

    static FsPermission permission(Set<PosixFilePermission> set) {
        FsAction[] actions = new FsAction[3];
        for (int who = 0; who < 3; who++) {
            FsAction action = FsAction.NONE;
            if (set.contains(BITS[who][0])) action = action.or(FsAction.READ);
            if (set.contains(BITS[who][1])) action = action.or(FsAction.WRITE);
            if (set.contains(BITS[who][2])) action = action.or(FsAction.EXECUTE);
            actions[who] = action;
        }
        return new FsPermission(actions[0], actions[1], actions[2]);
    }
}
