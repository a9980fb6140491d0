package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.io.CloseableIterable;

/**
 * Turns a table's equality deletes into position deletes, without rewriting any data file.
 *
 * <p>Why: an equality delete makes every reader compare each row of every older data file with
 * its keys, and a reader pays that on every read (DuckDB about a second per file over 200,000
 * rows). A position delete names the rows it removes, which readers apply almost for free. A
 * worker writes equality deletes, because it cannot know where an older row lives without reading
 * the table; this finds those rows once, reading only the key columns of the data files the
 * deletes apply to, so it costs a fraction of a compaction. It runs in two places: in maintenance,
 * on the equality deletes a table holds ({@link #convert}), and in the sink's commit itself, on
 * the round's equality deletes before they ever reach a snapshot ({@link CommitDeletes}).
 *
 * <p>Why it is correct beside other writers, in one RowDelta validated from the snapshot it read:
 *
 * <ul>
 *   <li>Which rows an equality delete removes is taken from Iceberg's own scan planning of that
 *       snapshot (the deletes of each file scan task), so sequence numbers and partitions are
 *       Iceberg's rules, not ours. The rows found are then named by file and position, which no
 *       later commit can change, and the equality delete is removed in the same commit.
 *   <li>{@code validateDataFilesExist} fails the commit if a compaction (ours or anyone's) replaced
 *       a data file the new position deletes name: the equality delete then stays, and the
 *       rewritten rows still get it, because a rewrite keeps its starting sequence number. The
 *       next conversion takes it against the new files.
 *   <li>A compaction that commits after this one and replaced a file named here fails on its
 *       side: a rewrite refuses new position deletes against the files it replaces.
 *   <li>The sink's commits add files, with equality deletes, which apply to data older than
 *       themselves, or with position deletes for rows older still ({@link CommitDeletes}); nothing a
 *       concurrent sink commit adds is touched here. Its own validation may see this commit's new
 *       delete files and retry once.
 *   <li>When a sink commit and this one both merge a partition's position delete file, each new
 *       file carries all of its positions, so whichever way Iceberg settles the two removals, no
 *       position is lost; at worst a row is named twice, which readers take as one delete.
 * </ul>
 */
public final class DeleteConversion {
  private DeleteConversion() {}

  /**
   * What a conversion did: equality delete files removed, position delete files added, rows deleted
   * by position; or refused, when a compaction replaced a data file it named (the next conversion
   * tries again, from the new files).
   */
  public record Conversion(
      long equalityDeletesRemoved, long positionDeleteFilesAdded, long rowsDeleted, boolean refused) {
    static final Conversion NONE = new Conversion(0, 0, 0, false);
    static final Conversion REFUSED = new Conversion(0, 0, 0, true);
  }

  /**
   * Converts the equality deletes of the current snapshot of main, committing with {@code summary}.
   *
   * <p>An equality delete is left alone when a data file it applies to is not Parquet, or when its
   * equality fields are not plain columns of the current schema.
   */
  public static Conversion convert(Table table, Map<String, String> summary) throws IOException {
    table.refresh();
    Snapshot snapshot = table.currentSnapshot();
    if (snapshot == null) {
      return Conversion.NONE;
    }
    return convert(table, summary, snapshot.snapshotId());
  }

  /**
   * Converts the equality deletes of snapshot {@code snapshotId}, as a conversion that read it would:
   * if the table moved on meanwhile, the commit is validated from that snapshot, so a compaction
   * since then that replaced a file named here makes it refused.
   */
  public static Conversion convert(Table table, Map<String, String> summary, long snapshotId)
      throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    Planned planned = Planned.of(table, snapshot);
    EqualityKeys keys = new EqualityKeys(table);
    Map<String, Integer> converted = load(keys, planned);
    if (converted.isEmpty()) {
      return Conversion.NONE;
    }
    PositionDeletes positions = new PositionDeletes(table);
    for (Map.Entry<String, List<String>> entry : planned.targetsOf.entrySet()) {
      BitSet applying = new BitSet();
      for (String path : entry.getValue()) {
        Integer index = converted.get(path);
        if (index != null) {
          applying.set(index);
        }
      }
      if (!applying.isEmpty()) {
        DataFile file = planned.live.get(entry.getKey());
        positions.add(file, keys.matches(file, applying));
      }
    }
    // The partitions written to keep one position delete file each: the ones they hold are merged
    // in, less the positions of data files no longer live (a compaction took them). Equality
    // deletes that apply to nothing go in the same commit.
    List<DeleteFile> removed = new ArrayList<>();
    for (DeleteFile delete : PositionDeletes.live(table, snapshot)) {
      if (delete.content() == FileContent.EQUALITY_DELETES
          && !planned.equality.containsKey(delete.location())) {
        // Planning attached it to no live data file: it applies to none (all are newer, or their
        // key ranges miss its keys), nor to a rewrite of them under way.
        removed.add(delete);
      } else if (positions.mergeInto(delete, planned.live.keySet())) {
        removed.add(delete);
      }
    }
    for (String path : converted.keySet()) {
      removed.add(planned.equality.get(path));
    }
    PositionDeletes.Written written = positions.write(snapshot);
    removed.addAll(written.replaced());
    if (!commit(table, snapshot, summary, written, removed)) {
      return Conversion.REFUSED;
    }
    return new Conversion(converted.size(), written.files().size(), positions.rows(), false);
  }

  /** The equality deletes of {@code planned} that can be converted, loaded into {@code keys}: path -> index. */
  private static Map<String, Integer> load(EqualityKeys keys, Planned planned) throws IOException {
    Map<String, Integer> converted = new LinkedHashMap<>();
    for (DeleteFile delete : planned.equality.values()) {
      Schema keySchema = keys.keySchema(delete);
      if (keySchema != null && !planned.blocked.contains(delete.location())) {
        converted.put(delete.location(), keys.load(delete, keys.shape(keySchema)));
      }
    }
    return converted;
  }

  /** One RowDelta, validated from {@code snapshot}; false when that validation refused it. */
  private static boolean commit(
      Table table,
      Snapshot snapshot,
      Map<String, String> summary,
      PositionDeletes.Written written,
      List<DeleteFile> removed) {
    try {
      table.refresh();
      RowDelta delta =
          table
              .newRowDelta()
              .validateFromSnapshot(snapshot.snapshotId())
              .validateDataFilesExist(written.named())
              .validateDeletedFiles();
      written.files().forEach(delta::addDeletes);
      removed.forEach(delta::removeDeletes);
      summary.forEach(delta::set);
      delta.commit();
      return true;
    } catch (CommitStateUnknownException e) {
      throw e; // the files may be in the table now: orphan removal decides later, from the metadata
    } catch (RuntimeException e) {
      if (written.files().isEmpty()) {
        if (e instanceof ValidationException) {
          return false;
        }
        throw e;
      }
      CommitLanding.Found found =
          CommitLanding.find(table, null, snapshot.snapshotId(), written.files(), summary);
      if (found.landed()) {
        return true;
      }
      CommitLanding.removeUnlanded(table, found, written.files(), "a conversion of equality deletes");
      if (e instanceof ValidationException) {
        return false;
      }
      throw e;
    }
  }

  /** What Iceberg's scan planning of a snapshot says about its equality deletes. */
  private static final class Planned {
    final Map<String, DeleteFile> equality = new LinkedHashMap<>();
    final Map<String, List<String>> targetsOf = new HashMap<>(); // data file -> equality deletes applying
    final Map<String, DataFile> live = new HashMap<>(); // every live data file
    final Set<String> blocked = new HashSet<>(); // equality deletes we cannot convert entirely

    static Planned of(Table table, Snapshot snapshot) throws IOException {
      Planned planned = new Planned();
      try (CloseableIterable<FileScanTask> tasks =
          table.newScan().useSnapshot(snapshot.snapshotId()).planWith(SinkWriter.IN_THIS_THREAD).planFiles()) {
        for (FileScanTask task : tasks) {
          DataFile file = task.file();
          planned.live.putIfAbsent(file.location(), file.copyWithoutStats());
          for (DeleteFile delete : task.deletes()) {
            if (delete.content() == FileContent.EQUALITY_DELETES) {
              planned.applies(delete, file);
            }
          }
        }
      }
      return planned;
    }

    private void applies(DeleteFile delete, DataFile file) {
      String path = delete.location();
      equality.putIfAbsent(path, delete);
      if (file.format() != FileFormat.PARQUET || delete.format() != FileFormat.PARQUET) {
        blocked.add(path);
      }
      targetsOf.computeIfAbsent(file.location(), k -> new ArrayList<>()).add(path);
    }
  }
}
