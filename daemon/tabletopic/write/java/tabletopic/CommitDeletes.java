package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.expressions.Expression;
import org.apache.iceberg.expressions.InclusiveMetricsEvaluator;
import org.apache.iceberg.io.CloseableIterable;

/**
 * What a sink commit carries in place of its round's equality deletes: position deletes naming the
 * rows they would remove, found in the table as it is now.
 *
 * <p>Why it is correct: the round's equality deletes would apply to every data file older than the
 * commit, which are the live files of the current snapshot (their spec is unpartitioned, so
 * partitions do not narrow it), and to none of the files the commit adds. Those rows are found here
 * and named by file and position. The commit then must fail if the table changed under them, and
 * {@link SinkWriter#commit} validates exactly that: a data file added after the sink's base snapshot
 * fails it already ({@code validateNoConflictingDataFiles}); a data file named here and replaced
 * since (a compaction) fails it through {@code validateDataFilesExist}; and a rewrite of files
 * holding none of these keys holds none of them either. On such a failure the commit is made again
 * with the equality deletes, which need no positions.
 *
 * <p>Only the data files whose key bounds may hold a deleted key are read: the others hold none of
 * the rows, by their own column statistics.
 */
public final class CommitDeletes {
  private CommitDeletes() {}

  /**
   * A commit's files with its equality deletes resolved to positions.
   *
   * @param files what the commit adds: the data files and the new position delete files
   * @param merged position delete files and deletion vectors of the table whose positions the new
   *     files carry on
   * @param named the data files the new position deletes name, which must still be live
   * @param written the position delete files written here (removed if the commit is found not to
   *     have landed, see {@link CommitLanding})
   * @param replaced the round's equality delete files (removed once the commit lands without them)
   */
  public record AtCommit(
      List<ContentFile<?>> files,
      List<DeleteFile> merged,
      Set<String> named,
      List<DeleteFile> written,
      List<DeleteFile> replaced) {
    /**
     * Removes the round's equality delete files once this commit landed without them. No snapshot
     * can hold them: only a commit of the same round's files could, and it adds the same data files,
     * which this commit's validation (or that one's, whichever commits second) refuses.
     */
    void dropReplaced(Table table) {
      PositionDeletes.removeQuietly(table, replaced);
    }
  }

  /**
   * {@code files} with their equality deletes resolved to positions, or null when the commit should
   * carry the equality deletes as they are: there is none; the data files to read hold more than
   * {@code maxRows} rows (the commit would read too much); or a file is not Parquet, a delete is
   * partitioned or its fields are not plain columns (maintenance's conversion then applies, later).
   */
  public static AtCommit resolve(Table table, List<ContentFile<?>> files, long maxRows)
      throws IOException {
    List<DeleteFile> equality = new ArrayList<>();
    List<ContentFile<?>> kept = new ArrayList<>();
    for (ContentFile<?> file : files) {
      if (file instanceof DeleteFile && file.content() == FileContent.EQUALITY_DELETES) {
        equality.add((DeleteFile) file);
      } else {
        kept.add(file);
      }
    }
    EqualityKeys keys = new EqualityKeys(table);
    List<EqualityKeys.Shape> shapes = shapes(table, keys, equality);
    if (shapes == null) {
      return null;
    }
    table.refresh();
    Snapshot head = table.currentSnapshot();
    if (head == null) {
      // Nothing older to delete: the deletes apply to no row, and the commit carries none.
      return new AtCommit(kept, List.of(), Set.of(), List.of(), equality);
    }
    Set<String> live = new HashSet<>(); // every live data file: merged positions in others are dropped
    List<DataFile> reached = reached(table, head, EqualityKeys.declaredRange(table.schema(), equality), live);
    if (reached == null) {
      return null;
    }
    if (reached.isEmpty()) {
      // No live file's key bounds reach the deletes' own: they delete no row, and no key is read.
      // This is the common case of keys that only grow, an upsert stream that mostly inserts.
      return new AtCommit(kept, List.of(), Set.of(), List.of(), equality);
    }
    for (int index = 0; index < equality.size(); index++) {
      keys.load(equality.get(index), shapes.get(index));
    }
    List<DataFile> searched = searched(table, reached, keys, maxRows);
    if (searched == null) {
      return null;
    }
    BitSet all = new BitSet();
    all.set(0, equality.size());
    PositionDeletes positions = new PositionDeletes(table);
    for (DataFile file : searched) {
      positions.add(file, keys.matches(file, all));
    }
    List<DeleteFile> merged = new ArrayList<>();
    if (!positions.isEmpty()) {
      for (DeleteFile delete : PositionDeletes.live(table, head)) {
        if (positions.mergeInto(delete, live)) {
          merged.add(delete);
        }
      }
    }
    PositionDeletes.Written written = positions.write(head);
    merged.addAll(written.replaced());
    List<ContentFile<?>> carried = new ArrayList<>(kept);
    carried.addAll(written.files());
    return new AtCommit(carried, merged, written.named(), written.files(), equality);
  }

  /** The key shape of each equality delete, by index; null if there is none or one cannot be resolved. */
  private static List<EqualityKeys.Shape> shapes(
      Table table, EqualityKeys keys, List<DeleteFile> equality) {
    if (equality.isEmpty()) {
      return null;
    }
    List<EqualityKeys.Shape> shapes = new ArrayList<>();
    for (DeleteFile delete : equality) {
      Schema keySchema = keys.keySchema(delete);
      if (keySchema == null
          || delete.format() != FileFormat.PARQUET
          || !table.specs().get(delete.specId()).isUnpartitioned()) {
        return null;
      }
      shapes.add(keys.shape(keySchema));
    }
    return shapes;
  }

  /**
   * The live data files of {@code head} whose key bounds reach {@code range}, with their column
   * statistics, each live file added to {@code live}; null when one is not Parquet.
   *
   * <p>A data file whose key bounds leave out every deleted key holds none of their rows, and is not
   * read: Iceberg's own evaluator decides, as for a filtered scan. With keys that grow over time, a
   * commit that updates recent keys reads only the recent files, however big the table.
   */
  private static List<DataFile> reached(Table table, Snapshot head, Expression range, Set<String> live)
      throws IOException {
    InclusiveMetricsEvaluator reaches = new InclusiveMetricsEvaluator(table.schema(), range);
    List<DataFile> reached = new ArrayList<>();
    try (CloseableIterable<FileScanTask> tasks =
        table
            .newScan()
            .useSnapshot(head.snapshotId())
            .includeColumnStats()
            .planWith(SinkWriter.IN_THIS_THREAD)
            .planFiles()) {
      for (FileScanTask task : tasks) {
        DataFile file = task.file();
        if (file.format() != FileFormat.PARQUET) {
          return null;
        }
        if (live.add(file.location()) && reaches.eval(file)) {
          reached.add(file.copy());
        }
      }
    }
    return reached;
  }

  /**
   * The files of {@code reached} whose key bounds reach the loaded keys' own (narrower than the
   * delete files' declared bounds when deletes of several commits are resolved together); null
   * when they hold more than {@code maxRows} rows.
   */
  private static List<DataFile> searched(
      Table table, List<DataFile> reached, EqualityKeys keys, long maxRows) {
    InclusiveMetricsEvaluator holdsKeys = new InclusiveMetricsEvaluator(table.schema(), keys.range());
    List<DataFile> searched = new ArrayList<>();
    long searchedRows = 0;
    for (DataFile file : reached) {
      if (holdsKeys.eval(file)) {
        searchedRows += file.recordCount();
        if (searchedRows > maxRows) {
          return null;
        }
        searched.add(file.copyWithoutStats());
      }
    }
    return searched;
  }
}
