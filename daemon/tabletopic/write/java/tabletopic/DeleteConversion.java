package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
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
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DeleteSchemaUtil;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.types.TypeUtil;
import org.apache.iceberg.util.StructLikeSet;

/**
 * Turns a table's equality deletes into position deletes, without rewriting any data file.
 *
 * <p>Why: an equality delete makes every reader compare each row of every older data file with
 * its keys, and a reader pays that on every read (DuckDB about a second per file over 200,000
 * rows). A position delete names the rows it removes, which readers apply almost for free. The
 * sink keeps writing equality deletes, because it cannot know where an older row lives without
 * reading the table; this finds those rows once, here, off the write path. It reads only the key
 * columns of the data files the deletes apply to, so it costs a fraction of a compaction and can
 * run at every maintenance look.
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
 *       next look converts it against the new files.
 *   <li>A compaction that commits after this one and replaced a file named here fails on its
 *       side: a rewrite refuses new position deletes against the files it replaces.
 *   <li>The sink's commits only add files and equality deletes, which apply to data older than
 *       themselves; the rows found here are older still, so nothing a concurrent sink commit adds
 *       is touched. Its own validation may see this commit's new delete files and retry once.
 * </ul>
 */
public final class DeleteConversion {
  private static final Schema PATH_POS = DeleteSchemaUtil.pathPosSchema();

  private DeleteConversion() {}

  /**
   * Converts the equality deletes of the current snapshot of main, committing with {@code
   * summary}; returns {equality delete files removed, position delete files added, rows deleted by
   * position}, or {-1, 0, 0} when the table moved on (the next look tries again).
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
    Map<String, StructLikeSet> keys = new HashMap<>();
    Map<String, Schema> keySchemas = new HashMap<>();
    for (DeleteFile delete : equality.values()) {
      Schema keySchema = keySchema(table, delete);
      if (keySchema == null || blocked.contains(delete.location())) {
        continue;
      }
      StructLikeSet set = StructLikeSet.create(keySchema.asStruct());
      try (CloseableIterable<Record> rows = read(table, delete.location(), keySchema)) {
        for (Record row : rows) {
          set.add(row.copy());
        }
      }
      keys.put(delete.location(), set);
      keySchemas.put(delete.location(), keySchema);
    }
    if (keys.isEmpty()) {
      return new long[] {0, 0, 0};
    }

    // Per partition, the positions to delete in each data file, in path order: the order a
    // position delete file must have.
    Map<String, Partition> partitions = new LinkedHashMap<>();
    long rows = 0;
    for (Map.Entry<String, List<String>> entry : targetsOf.entrySet()) {
      List<String> applying = new ArrayList<>();
      for (String path : entry.getValue()) {
        if (keys.containsKey(path)) {
          applying.add(path);
        }
      }
      if (applying.isEmpty()) {
        continue;
      }
      DataFile file = live.get(entry.getKey());
      long[] found = matches(table, file, applying, keys, keySchemas);
      if (found.length > 0) {
        partitions.computeIfAbsent(group(table, file), k -> new Partition(file)).add(file.location(), found);
        rows += found.length;
      }
    }
    // The partitions written to keep one position delete file each: the ones they hold are merged
    // in, less the positions of data files no longer live (a compaction took them).
    List<DeleteFile> merged = new ArrayList<>();
    for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> reader =
          ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
        for (DeleteFile delete : reader) {
          Partition partition = partitions.get(group(table, delete));
          if (delete.content() != FileContent.POSITION_DELETES
              || delete.format() != FileFormat.PARQUET
              || partition == null) {
            continue;
          }
          try (CloseableIterable<Record> named = read(table, delete.location(), PATH_POS)) {
            for (Record row : named) {
              String path = row.get(0, CharSequence.class).toString();
              if (live.containsKey(path)) {
                partition.add(path, new long[] {row.get(1, Long.class)});
              }
            }
          }
          merged.add(delete.copyWithoutStats());
        }
      }
    }

    OutputFileFactory files =
        OutputFileFactory.builderFor(table, 0, snapshot.snapshotId())
            .format(FileFormat.PARQUET)
            .operationId("convert-" + UUID.randomUUID())
            .suffix("deletes")
            .build();
    List<DeleteFile> added = new ArrayList<>();
    Set<String> named = new HashSet<>();
    try {
      for (Partition partition : partitions.values()) {
        added.add(partition.write(table, files));
        named.addAll(partition.positions.keySet());
      }
      table.refresh();
      RowDelta delta =
          table
              .newRowDelta()
              .validateFromSnapshot(snapshot.snapshotId())
              .validateDataFilesExist(named)
              .validateDeletedFiles();
      added.forEach(delta::addDeletes);
      merged.forEach(delta::removeDeletes);
      for (String path : keys.keySet()) {
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
    return new long[] {keys.size(), added.size(), rows};
  }

  private static String group(Table table, ContentFile<?> file) {
    return file.specId() + "/" + table.specs().get(file.specId()).partitionToPath(file.partition());
  }

  /** The positions to delete in one partition's data files. */
  private static final class Partition {
    private final DataFile sample; // any data file of the partition: its spec and partition values
    private final TreeMap<String, long[]> positions = new TreeMap<>();

    Partition(DataFile sample) {
      this.sample = sample;
    }

    void add(String path, long[] more) {
      long[] known = positions.get(path);
      if (known == null) {
        positions.put(path, more);
        return;
      }
      long[] both = Arrays.copyOf(known, known.length + more.length);
      System.arraycopy(more, 0, both, known.length, more.length);
      positions.put(path, both);
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
        for (Map.Entry<String, long[]> entry : positions.entrySet()) {
          long[] sorted = entry.getValue().clone();
          Arrays.sort(sorted);
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

  /** The positions of {@code file}'s rows whose keys one of {@code applying} holds. */
  private static long[] matches(
      Table table,
      DataFile file,
      List<String> applying,
      Map<String, StructLikeSet> keys,
      Map<String, Schema> keySchemas)
      throws IOException {
    Map<Schema, List<StructLikeSet>> bySchema = new LinkedHashMap<>();
    for (String path : applying) {
      Schema schema = keySchemas.get(path);
      Schema same = null;
      for (Schema known : bySchema.keySet()) {
        if (known.sameSchema(schema)) {
          same = known;
        }
      }
      bySchema.computeIfAbsent(same == null ? schema : same, k -> new ArrayList<>()).add(keys.get(path));
    }
    long[] found = new long[16];
    int n = 0;
    for (Map.Entry<Schema, List<StructLikeSet>> entry : bySchema.entrySet()) {
      long position = 0;
      try (CloseableIterable<Record> rows = read(table, file.location(), entry.getKey())) {
        for (Record row : rows) {
          for (StructLikeSet set : entry.getValue()) {
            if (set.contains(row)) {
              if (n == found.length) {
                found = Arrays.copyOf(found, n * 2);
              }
              found[n++] = position;
              break;
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
