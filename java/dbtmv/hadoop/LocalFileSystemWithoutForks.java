package dbtmv.hadoop;

import java.io.File;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
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
 * java.nio instead of a new {@code chmod} process per file, and renaming a file without ever
 * replacing an existing one.
 *
 * <p>Iceberg's Hadoop catalog commits a table by renaming its new metadata file to the next
 * version's name, after checking that name is free under a lock held in its own JVM only.
 * Hadoop's FileSystem contract says a rename onto an existing file fails; RawLocalFileSystem's
 * (java.io.File.renameTo, POSIX rename) replaces it instead, so two processes committing the same
 * table at once could both "win" version N+1, and one commit was lost. Here a file is renamed
 * by a hard link to the new name (which fails if the name exists: atomic) and the removal of the
 * old one: the loser's rename returns false, Iceberg raises CommitFailedException and retries or
 * reports a lost race. Directories, and file systems without hard links, keep Hadoop's rename.
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

  /** The raw local file system whose setPermission calls java.nio and whose rename never replaces a file. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public boolean rename(Path src, Path dst) throws IOException {
      File from = pathToFile(src);
      File to = pathToFile(dst);
      if (!from.isFile() || to.isDirectory()) {
        return super.rename(src, dst);
      }
      try {
        Files.createLink(to.toPath(), from.toPath());
      } catch (FileAlreadyExistsException exists) {
        return false;  // the contract: never replace an existing file
      } catch (UnsupportedOperationException | IOException noHardLinks) {
        if (to.exists()) {
          return false;
        }
        return super.rename(src, dst);
      }
      try {
        Files.delete(from.toPath());
      } catch (IOException leftBehind) {
        // the file has its new name (the commit happened); the old name is only litter
      }
      return true;
    }

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
