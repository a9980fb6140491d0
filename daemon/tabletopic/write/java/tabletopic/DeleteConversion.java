package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.deletes.PositionDelete;
import org.apache.iceberg.deletes.PositionDeleteWriter;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.expressions.Expression;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.expressions.InclusiveMetricsEvaluator;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DeleteSchemaUtil;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.types.Comparators;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.TypeUtil;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.StructLikeMap;

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
 * the round's equality deletes before they ever reach a snapshot ({@link #forCommit}).
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
 *       themselves, or with position deletes for rows older still ({@link #forCommit}); nothing a
 *       concurrent sink commit adds is touched here. Its own validation may see this commit's new
 *       delete files and retry once.
 *   <li>When a sink commit and this one both merge a partition's position delete file, each new
 *       file carries all of its positions, so whichever way Iceberg settles the two removals, no
 *       position is lost; at worst a row is named twice, which readers take as one delete.
 * </ul>
 */
public final class DeleteConversion {
  private static final Schema PATH_POS = DeleteSchemaUtil.pathPosSchema();

  private DeleteConversion() {}

  /**
   * Converts the equality deletes of the current snapshot of main, committing with {@code
   * summary}; returns {equality delete files removed, position delete files added, rows deleted by
   * position}, or {-1, 0, 0} when the table moved on (the next conversion tries again).
   *
   * <p>An equality delete is left alone when a data file it applies to is not Parquet, or when its
   * equality fields are not plain columns of the current schema.
   */
  public static long[] convert(Table table, Map<String, String> summary) throws IOException {
    table.refresh();
    Snapshot snapshot = table.currentSnapshot();
    if (snapshot == null) {
      return new long[] {0, 0, 0};
    }
    return convert(table, summary, snapshot.snapshotId());
  }

  /**
   * Converts the equality deletes of snapshot {@code snapshotId}, as a conversion that read it
   * would: if the table moved on meanwhile, the commit is validated from that snapshot, so a
   * compaction since then that replaced a file named here makes it return {-1, 0, 0}.
   */
  public static long[] convert(Table table, Map<String, String> summary, long snapshotId)
      throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    Map<String, DeleteFile> equality = new LinkedHashMap<>();
    Map<String, List<String>> targetsOf = new HashMap<>(); // data file -> equality deletes applying
    Map<String, DataFile> live = new HashMap<>(); // every live data file
    Set<String> blocked = new HashSet<>(); // equality deletes we cannot convert entirely
    try (CloseableIterable<FileScanTask> tasks = table.newScan().useSnapshot(snapshot.snapshotId()).planFiles()) {
      for (FileScanTask task : tasks) {
        DataFile file = task.file();
        live.putIfAbsent(file.location(), file.copyWithoutStats());
        for (DeleteFile delete : task.deletes()) {
          if (delete.content() != FileContent.EQUALITY_DELETES) {
            continue;
          }
          String path = delete.location();
          equality.putIfAbsent(path, delete);
          if (file.format() != FileFormat.PARQUET || delete.format() != FileFormat.PARQUET) {
            blocked.add(path);
          }
          targetsOf.computeIfAbsent(file.location(), k -> new ArrayList<>()).add(path);
        }
      }
    }
    // Each key shape (set of equality fields) gets one map: key -> the equality deletes holding it,
    // so a data row costs one lookup however many deletes apply to its file.
    List<KeyShape> shapes = new ArrayList<>();
    Map<String, Integer> converted = new LinkedHashMap<>(); // equality delete -> its index
    for (DeleteFile delete : equality.values()) {
      Schema keySchema = keySchema(table, delete);
      if (keySchema == null || blocked.contains(delete.location())) {
        continue;
      }
      KeyShape shape = null;
      for (KeyShape known : shapes) {
        if (known.schema.sameSchema(keySchema)) {
          shape = known;
        }
      }
      if (shape == null) {
        shape = new KeyShape(keySchema);
        shapes.add(shape);
      }
      int index = converted.size();
      converted.put(delete.location(), index);
      try (CloseableIterable<Record> rows = read(table, delete.location(), keySchema)) {
        for (Record row : rows) {
          shape.add(row, index);
        }
      }
    }
    if (converted.isEmpty()) {
      return new long[] {0, 0, 0};
    }

    // Per partition, the positions to delete in each data file, in path order: the order a
    // position delete file must have.
    Map<String, Partition> partitions = new LinkedHashMap<>();
    long rows = 0;
    for (Map.Entry<String, List<String>> entry : targetsOf.entrySet()) {
      BitSet applying = new BitSet();
      for (String path : entry.getValue()) {
        Integer index = converted.get(path);
        if (index != null) {
          applying.set(index);
        }
      }
      if (applying.isEmpty()) {
        continue;
      }
      DataFile file = live.get(entry.getKey());
      long[] found = matches(table, file, applying, shapes);
      if (found.length > 0) {
        partitions
            .computeIfAbsent(FileCensus.partitionKey(table, file), k -> new Partition(file))
            .add(file.location(), found);
        rows += found.length;
      }
    }
    // The partitions written to keep one position delete file each: the ones they hold are merged
    // in, less the positions of data files no longer live (a compaction took them). Equality
    // deletes that apply to nothing go in the same commit.
    List<DeleteFile> merged = new ArrayList<>();
    for (DeleteFile delete : deleteFiles(table, snapshot)) {
      if (delete.content() == FileContent.EQUALITY_DELETES && !equality.containsKey(delete.location())) {
        // Planning attached it to no live data file: it applies to none (all are newer, or their
        // key ranges miss its keys), nor to a rewrite of them under way.
        merged.add(delete);
      } else if (mergeInto(table, delete, partitions, live.keySet())) {
        merged.add(delete);
      }
    }

    List<DeleteFile> added = new ArrayList<>();
    Set<String> named = new HashSet<>();
    try {
      write(table, snapshot, partitions, added, named);
      table.refresh();
      RowDelta delta =
          table
              .newRowDelta()
              .validateFromSnapshot(snapshot.snapshotId())
              .validateDataFilesExist(named)
              .validateDeletedFiles();
      added.forEach(delta::addDeletes);
      merged.forEach(delta::removeDeletes);
      for (String path : converted.keySet()) {
        delta.removeDeletes(equality.get(path));
      }
      summary.forEach(delta::set);
      delta.commit();
    } catch (ValidationException e) {
      removeQuietly(table, added);
      return new long[] {-1, 0, 0};
    } catch (CommitStateUnknownException e) {
      throw e; // the files may be in the table now: orphan removal decides later, from the metadata
    } catch (RuntimeException | IOException e) {
      removeQuietly(table, added);
      throw e;
    }
    return new long[] {converted.size(), added.size(), rows};
  }

  /**
   * What a sink commit carries in place of its round's equality deletes: position deletes naming
   * the rows they would remove, found in the table as it is now, or null when the commit should
   * carry the equality deletes as they are.
   *
   * <p>Why it is correct: the round's equality deletes would apply to every data file older than
   * the commit, which are the live files of the current snapshot (their spec is unpartitioned, so
   * partitions do not narrow it), and to none of the files the commit adds. Those rows are found
   * here and named by file and position. The commit then must fail if the table changed under
   * them, and {@link SinkWriter#commit} validates exactly that: a data file added after the
   * sink's base snapshot fails it already ({@code validateNoConflictingDataFiles}); a data file
   * named here and replaced since (a compaction) fails it through {@code validateDataFilesExist};
   * and a rewrite of files holding none of these keys holds none of them either. On such a failure
   * the commit is made again with the equality deletes, which need no positions.
   *
   * <p>Only the data files whose key bounds may hold a deleted key are read: the others hold none of
   * the rows, by their own column statistics.
   *
   * <p>Null when: there is no equality delete; those files hold more than {@code maxRows} rows (the
   * commit would read too much); or a file is not Parquet, a delete is partitioned or its fields
   * are not plain columns (the general rules of {@link #convert} then apply, later).
   */
  public static AtCommit forCommit(Table table, List<ContentFile<?>> files, long maxRows)
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
    if (equality.isEmpty()) {
      return null;
    }
    List<KeyShape> shapes = new ArrayList<>();
    List<KeyShape> shapeOf = new ArrayList<>(); // the shape of each equality delete, by index
    for (DeleteFile delete : equality) {
      Schema keySchema = keySchema(table, delete);
      if (keySchema == null
          || delete.format() != FileFormat.PARQUET
          || !table.specs().get(delete.specId()).isUnpartitioned()) {
        return null;
      }
      KeyShape shape = null;
      for (KeyShape known : shapes) {
        if (known.schema.sameSchema(keySchema)) {
          shape = known;
        }
      }
      if (shape == null) {
        shape = new KeyShape(keySchema);
        shapes.add(shape);
      }
      shapeOf.add(shape);
    }
    table.refresh();
    Snapshot head = table.currentSnapshot();
    if (head == null) {
      // Nothing older to delete: the deletes apply to no row, and the commit carries none.
      return new AtCommit(kept, List.of(), Set.of(), List.of(), equality);
    }
    for (int index = 0; index < equality.size(); index++) {
      KeyShape shape = shapeOf.get(index);
      try (CloseableIterable<Record> rows = read(table, equality.get(index).location(), shape.schema)) {
        for (Record row : rows) {
          shape.add(row, index);
        }
      }
    }
    // A data file whose key bounds leave out every deleted key holds none of their rows, and is not
    // read: Iceberg's own evaluator decides, as for a filtered scan. With keys that grow over time,
    // a commit that updates recent keys reads only the recent files, however big the table.
    Expression mayHoldKeys = Expressions.alwaysFalse();
    for (KeyShape shape : shapes) {
      mayHoldKeys = Expressions.or(mayHoldKeys, shape.range());
    }
    InclusiveMetricsEvaluator holdsKeys = new InclusiveMetricsEvaluator(table.schema(), mayHoldKeys);
    Set<String> live = new HashSet<>(); // every live data file: merged positions in others are dropped
    List<DataFile> searched = new ArrayList<>();
    long searchedRows = 0;
    try (CloseableIterable<FileScanTask> tasks =
        table.newScan().useSnapshot(head.snapshotId()).includeColumnStats().planFiles()) {
      for (FileScanTask task : tasks) {
        DataFile file = task.file();
        if (file.format() != FileFormat.PARQUET) {
          return null;
        }
        if (live.add(file.location()) && holdsKeys.eval(file)) {
          searchedRows += file.recordCount();
          if (searchedRows > maxRows) {
            return null;
          }
          searched.add(file.copyWithoutStats());
        }
      }
    }
    BitSet all = new BitSet();
    all.set(0, equality.size());
    Map<String, Partition> partitions = new LinkedHashMap<>();
    for (DataFile file : searched) {
      long[] found = matches(table, file, all, shapes);
      if (found.length > 0) {
        partitions
            .computeIfAbsent(FileCensus.partitionKey(table, file), k -> new Partition(file))
            .add(file.location(), found);
      }
    }
    List<DeleteFile> merged = new ArrayList<>();
    if (!partitions.isEmpty()) {
      for (DeleteFile delete : deleteFiles(table, head)) {
        if (mergeInto(table, delete, partitions, live)) {
          merged.add(delete);
        }
      }
    }
    List<DeleteFile> added = new ArrayList<>();
    Set<String> named = new HashSet<>();
    try {
      write(table, head, partitions, added, named);
    } catch (RuntimeException | IOException e) {
      removeQuietly(table, added);
      throw e;
    }
    List<ContentFile<?>> carried = new ArrayList<>(kept);
    carried.addAll(added);
    return new AtCommit(carried, merged, named, added, equality);
  }

  /**
   * A commit's files with its equality deletes resolved to positions.
   *
   * @param files what the commit adds: the data files and the new position delete files
   * @param merged position delete files of the table whose positions the new files carry on
   * @param named the data files the new position deletes name, which must still be live
   * @param written the position delete files written here (removed if the commit falls back)
   * @param replaced the round's equality delete files (removed once the commit lands without them)
   */
  public record AtCommit(
      List<ContentFile<?>> files,
      List<DeleteFile> merged,
      Set<String> named,
      List<DeleteFile> written,
      List<DeleteFile> replaced) {
    /** Removes files no snapshot will reference: the ones {@code commit} left out. */
    void dropWritten(Table table) {
      removeQuietly(table, written);
    }

    void dropReplaced(Table table) {
      removeQuietly(table, replaced);
    }
  }

  /** The live delete files of {@code snapshot}. */
  private static List<DeleteFile> deleteFiles(Table table, Snapshot snapshot) throws IOException {
    List<DeleteFile> files = new ArrayList<>();
    for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> reader =
          ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
        for (DeleteFile delete : reader) {
          files.add(delete.copyWithoutStats());
        }
      }
    }
    return files;
  }

  /**
   * Adds the positions of {@code delete}, a position delete file of a partition written to, to
   * that partition, less those in data files not in {@code live} (a compaction took them); true
   * when it did, so the new file replaces it and each partition keeps one position delete file.
   */
  private static boolean mergeInto(
      Table table, DeleteFile delete, Map<String, Partition> partitions, Set<String> live)
      throws IOException {
    Partition partition = partitions.get(FileCensus.partitionKey(table, delete));
    if (delete.content() != FileContent.POSITION_DELETES
        || delete.format() != FileFormat.PARQUET
        || partition == null) {
      return false;
    }
    try (CloseableIterable<Record> named = read(table, delete.location(), PATH_POS)) {
      for (Record row : named) {
        String path = row.get(0, CharSequence.class).toString();
        if (live.contains(path)) {
          partition.add(path, row.get(1, Long.class));
        }
      }
    }
    return true;
  }

  /** Writes one position delete file per partition into {@code added}, and their data files into {@code named}. */
  private static void write(
      Table table,
      Snapshot snapshot,
      Map<String, Partition> partitions,
      List<DeleteFile> added,
      Set<String> named)
      throws IOException {
    OutputFileFactory files =
        OutputFileFactory.builderFor(table, 0, snapshot.snapshotId())
            .format(FileFormat.PARQUET)
            .operationId("convert-" + UUID.randomUUID())
            .suffix("deletes")
            .build();
    for (Partition partition : partitions.values()) {
      added.add(partition.write(table, files));
      named.addAll(partition.positions.keySet());
    }
  }

  /** The positions to delete in one partition's data files. */
  private static final class Partition {
    private final DataFile sample; // any data file of the partition: its spec and partition values
    private final TreeMap<String, Positions> positions = new TreeMap<>();

    Partition(DataFile sample) {
      this.sample = sample;
    }

    void add(String path, long... more) {
      positions.computeIfAbsent(path, k -> new Positions()).add(more);
    }

    /** One position delete file, sorted by path then position, each position once. */
    DeleteFile write(Table table, OutputFileFactory files) throws IOException {
      PartitionSpec spec = table.specs().get(sample.specId());
      StructLike partition = spec.isUnpartitioned() ? null : sample.partition();
      EncryptedOutputFile out =
          spec.isUnpartitioned() ? files.newOutputFile() : files.newOutputFile(spec, partition);
      PositionDeleteWriter<Record> writer =
          Parquet.writeDeletes(out)
              .forTable(table)
              .rowSchema(null) // positions only: no copy of the deleted rows
              .withSpec(spec)
              .withPartition(partition)
              .overwrite()
              .buildPositionWriter();
      PositionDelete<Record> delete = PositionDelete.create();
      try (PositionDeleteWriter<Record> closing = writer) {
        for (Map.Entry<String, Positions> entry : positions.entrySet()) {
          long[] sorted = entry.getValue().sorted();
          for (int i = 0; i < sorted.length; i++) {
            if (i == 0 || sorted[i] != sorted[i - 1]) {
              closing.write(delete.set(entry.getKey(), sorted[i]));
            }
          }
        }
      }
      return writer.toDeleteFile();
    }
  }

  /** Positions in one data file, in a growing array: a merge adds them one by one. */
  private static final class Positions {
    private long[] values = new long[16];
    private int size = 0;

    void add(long[] more) {
      if (size + more.length > values.length) {
        values = Arrays.copyOf(values, Math.max(size + more.length, 2 * values.length));
      }
      System.arraycopy(more, 0, values, size, more.length);
      size += more.length;
    }

    long[] sorted() {
      long[] copy = Arrays.copyOf(values, size);
      Arrays.sort(copy);
      return copy;
    }
  }

  /** The equality fields of {@code delete} as a projection of the current schema, or null. */
  private static Schema keySchema(Table table, DeleteFile delete) {
    List<Integer> ids = delete.equalityFieldIds();
    if (ids == null || ids.isEmpty()) {
      return null;
    }
    for (int id : ids) {
      if (table.schema().findField(id) == null || !table.schema().findType(id).isPrimitiveType()) {
        return null;
      }
    }
    return TypeUtil.select(table.schema(), new HashSet<>(ids));
  }

  private static CloseableIterable<Record> read(Table table, String path, Schema projection) {
    // No filter, so no row group is skipped and the n-th row read is the file's position n.
    return Parquet.read(table.io().newInputFile(path))
        .project(projection)
        .createReaderFunc(fileSchema -> GenericParquetReaders.buildReader(projection, fileSchema))
        .build();
  }

  /** The keys of the equality deletes with one set of equality fields. */
  private static final class KeyShape {
    private final Schema schema;
    private final StructLikeMap<int[]> holders; // key -> indexes of the equality deletes holding it
    // Per column of the key, the least and greatest key held, where its type has bounds that data
    // files' statistics keep and Expressions take as they are read (ints, longs, strings); no
    // comparator where it has not, and unbounded once a key is null.
    private final List<Comparator<Object>> order = new ArrayList<>();
    private final Object[] least;
    private final Object[] greatest;
    private final boolean[] unbounded;

    KeyShape(Schema schema) {
      this.schema = schema;
      this.holders = StructLikeMap.create(schema.asStruct());
      List<Types.NestedField> columns = schema.columns();
      for (Types.NestedField column : columns) {
        Type.TypeID type = column.type().typeId();
        boolean comparable =
            type == Type.TypeID.INTEGER || type == Type.TypeID.LONG || type == Type.TypeID.STRING;
        order.add(comparable ? Comparators.forType(column.type().asPrimitiveType()) : null);
      }
      this.least = new Object[columns.size()];
      this.greatest = new Object[columns.size()];
      this.unbounded = new boolean[columns.size()];
    }

    void add(Record key, int index) {
      int[] known = holders.get(key);
      if (known == null) {
        holders.put(key.copy(), new int[] {index});
        widen(key);
      } else if (known[known.length - 1] != index) {
        int[] more = Arrays.copyOf(known, known.length + 1);
        more[known.length] = index;
        holders.put(key, more);
      }
    }

    private void widen(Record key) {
      for (int i = 0; i < least.length; i++) {
        Object value = key.get(i);
        if (value == null) {
          unbounded[i] = true;
        } else if (order.get(i) != null) {
          if (least[i] == null || order.get(i).compare(value, least[i]) < 0) {
            least[i] = value instanceof CharSequence ? value.toString() : value;
          }
          if (greatest[i] == null || order.get(i).compare(value, greatest[i]) > 0) {
            greatest[i] = value instanceof CharSequence ? value.toString() : value;
          }
        }
      }
    }

    /** Where a data file's column bounds must reach for it to hold one of these keys. */
    Expression range() {
      Expression range = Expressions.alwaysTrue();
      List<Types.NestedField> columns = schema.columns();
      for (int i = 0; i < least.length; i++) {
        if (least[i] != null && !unbounded[i]) {
          String name = columns.get(i).name();
          range =
              Expressions.and(
                  range,
                  Expressions.and(
                      Expressions.greaterThanOrEqual(name, least[i]),
                      Expressions.lessThanOrEqual(name, greatest[i])));
        }
      }
      return range;
    }
  }

  /** The positions of {@code file}'s rows whose key an equality delete in {@code applying} holds. */
  private static long[] matches(Table table, DataFile file, BitSet applying, List<KeyShape> shapes)
      throws IOException {
    long[] found = new long[16];
    int n = 0;
    for (KeyShape shape : shapes) {
      long position = 0;
      try (CloseableIterable<Record> rows = read(table, file.location(), shape.schema)) {
        for (Record row : rows) {
          int[] holders = shape.holders.get(row);
          if (holders != null) {
            for (int index : holders) {
              if (applying.get(index)) {
                if (n == found.length) {
                  found = Arrays.copyOf(found, n * 2);
                }
                found[n++] = position;
                break;
              }
            }
          }
          position++;
        }
      }
    }
    return Arrays.copyOf(found, n);
  }

  private static void removeQuietly(Table table, List<DeleteFile> files) {
    for (DeleteFile file : files) {
      try {
        table.io().deleteFile(file.location());
      } catch (RuntimeException ignored) {
        // left for orphan removal
      }
    }
  }
}
