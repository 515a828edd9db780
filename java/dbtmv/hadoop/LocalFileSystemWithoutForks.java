package dbtmv.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (with its .crc checksum files), setting permissions through
 * java.nio instead of a new {@code chmod} process per file.
 *
 * <p>Without Hadoop's native library (PySpark ships none), RawLocalFileSystem sets the
 * permissions of every file and directory it creates by running {@code chmod} through
 * Shell.execCommand: 10-13 ms per file here. The permissions set are the same (the mode's
 * owner, group and other bits); a file system without POSIX attributes falls back to Hadoop's.
 * See dbt_incremental_mv/local_fs.py.
 */
public class LocalFileSystemWithoutForks extends LocalFileSystem {
  public LocalFileSystemWithoutForks() {
    super(new Raw());
  }

  /** The raw local file system whose setPermission calls java.nio. */
  public static class Raw extends RawLocalFileSystem {
    // bit i of a mode (0 = others' execute, ..., 8 = owner's read)
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      Set<PosixFilePermission> granted = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) {
          granted.add(BITS[bit]);
        }
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), granted);
      } catch (UnsupportedOperationException notPosix) {
        super.setPermission(p, permission);
      }
    }
  }
}
