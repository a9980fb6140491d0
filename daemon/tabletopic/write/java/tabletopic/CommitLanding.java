package tabletopic;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.SnapshotRef;
import org.apache.iceberg.Table;
import org.apache.iceberg.io.FileIO;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether a commit that raised landed all the same, read back from the table's metadata; and the one
 * way the sink removes a file it wrote for a commit.
 *
 * <p>An exception says that a commit failed, not that it did not land. A catalog can raise after its
 * metadata was written: Hadoop's commit turns any {@code IOException} of its rename into a {@code
 * CommitFailedException}, and Iceberg then retries the commit, whose validation fails on the files it
 * has just added itself. Had the sink removed its files on that exception, the table's current
 * snapshot would name files that are gone, and every reader would fail.
 *
 * <p>The rule, which every path that removes a file of the sink's holds to (docs/design/files.md): a
 * file written for a commit is removed only when the table's metadata, read again after the commit
 * raised, shows that no snapshot since the commit's base added it, along an unbroken chain of parents
 * from the head of the commit's branch back to that base. When the metadata cannot be read, or a
 * snapshot of that chain is gone (expired), nothing is removed: orphan removal takes the files later,
 * if no snapshot references them once they are older than its guard. A commit found to have landed
 * is taken as committed.
 */
final class CommitLanding {
  private static final Logger LOG = LoggerFactory.getLogger(CommitLanding.class);

  private CommitLanding() {}

  enum Fate {
    /** A snapshot since the base added the commit's files (or, with none, carries its summary). */
    LANDED,
    /** The whole chain since the base was read, and none of its snapshots is the commit. */
    NOT_LANDED,
    /** The metadata could not tell: nothing may be removed. */
    UNKNOWN
  }

  /** What the metadata says of a commit: its fate, the snapshot it landed as (or -1), and why. */
  record Found(Fate fate, long snapshotId, String why) {
    boolean landed() {
      return fate == Fate.LANDED;
    }
  }

  /**
   * The fate of a commit based on {@code baseSnapshotId} (-1: the table had no snapshot) to {@code
   * branch} (null: main) that adds {@code added}; with no file added, the commit is told by its
   * {@code summary} (every entry of it, the sink's commit id among them).
   */
  static Found find(
      Table table,
      String branch,
      long baseSnapshotId,
      Collection<? extends ContentFile<?>> added,
      Map<String, String> summary) {
    Set<String> paths = new HashSet<>();
    for (ContentFile<?> file : added) {
      paths.add(file.location());
    }
    try {
      table.refresh();
      SnapshotRef ref = table.refs().get(branch == null ? SnapshotRef.MAIN_BRANCH : branch);
      Long id = ref == null ? null : ref.snapshotId();
      while (id != null && id != baseSnapshotId) {
        Snapshot snapshot = table.snapshot(id);
        if (snapshot == null) {
          return new Found(Fate.UNKNOWN, -1, "snapshot " + id + " since the base is gone (expired)");
        }
        if (paths.isEmpty() ? carries(snapshot, summary) : adds(snapshot, table.io(), paths)) {
          return new Found(Fate.LANDED, id, "snapshot " + id + " holds it");
        }
        id = snapshot.parentId();
      }
      if (id == null && baseSnapshotId >= 0) {
        return new Found(Fate.UNKNOWN, -1, "the base snapshot " + baseSnapshotId + " is no longer an ancestor");
      }
      return new Found(Fate.NOT_LANDED, -1, "no snapshot since the base holds it");
    } catch (RuntimeException e) {
      return new Found(Fate.UNKNOWN, -1, "the table's metadata cannot be read: " + e);
    }
  }

  /**
   * Removes {@code files}, written for a commit, when {@code found} says the commit did not land;
   * otherwise leaves them to orphan removal.
   */
  static void removeUnlanded(Table table, Found found, List<? extends ContentFile<?>> files, String what) {
    if (files.isEmpty()) {
      return;
    }
    if (found.fate() != Fate.NOT_LANDED) {
      LOG.warn(
          "left {} files written for {} of {} to orphan removal: {}", files.size(), what, table.name(), found.why());
      return;
    }
    List<String> failed = new ArrayList<>();
    for (ContentFile<?> file : files) {
      try {
        table.io().deleteFile(file.location());
      } catch (RuntimeException e) {
        failed.add(file.location()); // orphan removal takes it later
      }
    }
    if (!failed.isEmpty()) {
      LOG.warn("{} files written for {} of {} could not be removed: {}", failed.size(), what, table.name(), failed);
    }
  }

  private static boolean adds(Snapshot snapshot, FileIO io, Set<String> paths) {
    for (DataFile file : snapshot.addedDataFiles(io)) {
      if (paths.contains(file.location())) {
        return true;
      }
    }
    for (DeleteFile file : snapshot.addedDeleteFiles(io)) {
      if (paths.contains(file.location())) {
        return true;
      }
    }
    return false;
  }

  private static boolean carries(Snapshot snapshot, Map<String, String> summary) {
    return !summary.isEmpty() && snapshot.summary().entrySet().containsAll(summary.entrySet());
  }
}
