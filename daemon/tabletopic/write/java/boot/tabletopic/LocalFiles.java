package tabletopic;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system ({@code file:} paths), checksums and all, with permissions set by a
 * system call instead of a process.
 *
 * <p>Without Hadoop's native library (no wheel ships it), Hadoop sets the mode of every file and
 * directory it creates by starting {@code chmod}: about twelve processes for each table's write and
 * commit (JFR's process-start events showed them), about half of a commit's 70 ms on a local
 * warehouse. Java sets the same mode without one.
 */
public final class LocalFiles extends LocalFileSystem {
  public LocalFiles() {
    super(new Raw());
  }

  /** The raw file system under the checksums; only {@link #setPermission} differs from Hadoop's. */
  public static final class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      Set<PosixFilePermission> mode = EnumSet.noneOf(PosixFilePermission.class);
      add(mode, permission.getUserAction(), PosixFilePermission.OWNER_READ,
          PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
      add(mode, permission.getGroupAction(), PosixFilePermission.GROUP_READ,
          PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
      add(mode, permission.getOtherAction(), PosixFilePermission.OTHERS_READ,
          PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
      Files.setPosixFilePermissions(pathToFile(path).toPath(), mode);
    }

    private static void add(
        Set<PosixFilePermission> mode,
        FsAction action,
        PosixFilePermission read,
        PosixFilePermission write,
        PosixFilePermission execute) {
      if (action.implies(FsAction.READ)) {
        mode.add(read);
      }
      if (action.implies(FsAction.WRITE)) {
        mode.add(write);
      }
      if (action.implies(FsAction.EXECUTE)) {
        mode.add(execute);
      }
    }
  }
}
