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
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableUtil;
import org.apache.iceberg.data.BaseDeleteLoader;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.BaseDVFileWriter;
import org.apache.iceberg.deletes.PositionDelete;
import org.apache.iceberg.deletes.PositionDeleteWriter;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DeleteSchemaUtil;
import org.apache.iceberg.io.DeleteWriteResult;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.util.ContentFileUtil;

/**
 * The rows to delete by position in a table, per partition, and the files that name them.
 *
 * <p>A v2 table gets one position delete file per partition: the positions found, plus those of
 * the partition's earlier position delete files, which the new file replaces. A v3 table gets a
 * deletion vector per data file instead, as its spec requires: each merges the file's earlier
 * vector and the positions of earlier v2 position delete files (a table upgraded from v2), and
 * replaces them in the same commit, because two live vectors for one data file make readers fail.
 * Each vector has a Puffin file of its own (see {@link #writeVectors}).
 */
final class PositionDeletes {
  private static final Schema PATH_POS = DeleteSchemaUtil.pathPosSchema();

  private final Table table;
  private final Map<String, Partition> partitions = new LinkedHashMap<>();
  private final Map<String, DeleteFile> vectors = new HashMap<>(); // data file -> its live deletion vector
  private long rows = 0;

  PositionDeletes(Table table) {
    this.table = table;
  }

  /**
   * The files written, the data files they name (which must still be live when they commit), and
   * the deletion vectors they merged, which the commit must remove.
   */
  record Written(List<DeleteFile> files, Set<String> named, List<DeleteFile> replaced) {}

  void add(DataFile file, long[] positions) {
    if (positions.length == 0) {
      return;
    }
    partitions
        .computeIfAbsent(FileCensus.partitionKey(table, file), k -> new Partition(file))
        .add(file.location(), positions);
    rows += positions.length;
  }

  boolean isEmpty() {
    return partitions.isEmpty();
  }

  /** Rows found to delete, before any merge. */
  long rows() {
    return rows;
  }

  /**
   * Takes in {@code delete}, one of the table's live delete files: each of them goes through here
   * before {@link #write}, which reads no manifest again.
   *
   * <p>A position delete file of a partition written to: its positions are added to that partition,
   * less those in data files not in {@code live} (a compaction took them); true, so the new file
   * replaces it and each partition keeps one position delete file. A deletion vector is kept, to be
   * merged into its data file's new one if that file gets one ({@link Written#replaced}).
   */
  boolean mergeInto(DeleteFile delete, Set<String> live) throws IOException {
    if (ContentFileUtil.isDV(delete)) {
      vectors.put(delete.referencedDataFile(), delete);
      return false;
    }
    Partition partition = partitions.get(FileCensus.partitionKey(table, delete));
    if (delete.content() != FileContent.POSITION_DELETES
        || delete.format() != FileFormat.PARQUET
        || partition == null) {
      return false;
    }
    try (CloseableIterable<Record> named = EqualityKeys.read(table, delete.location(), PATH_POS)) {
      for (Record row : named) {
        String path = row.get(0, CharSequence.class).toString();
        if (live.contains(path)) {
          partition.add(path, row.get(1, Long.class));
        }
      }
    }
    return true;
  }

  /**
   * One position delete file per partition (v2), or one deletion vector per data file (v3); none is
   * left behind if writing one fails.
   */
  Written write(Snapshot snapshot) throws IOException {
    if (partitions.isEmpty()) {
      return new Written(List.of(), Set.of(), List.of());
    }
    if (TableUtil.formatVersion(table) >= 3) {
      return writeVectors(snapshot);
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
    } catch (RuntimeException | IOException e) {
      removeQuietly(table, added);
      throw e;
    }
    return new Written(added, named, List.of());
  }

  /**
   * One deletion vector per data file, each in a Puffin file of its own. Iceberg's writer would put a
   * commit's vectors in one file, which Spark reads right; but with that layout, in one run of
   * bench/long_upsert.py on a v3 table, DuckDB 1.5.5 missed 12 live rows and showed 2 deleted ones;
   * the missing rows traced sat in data files whose vectors shared a Puffin file. With one file each
   * the same run read right. A vector's file is a few hundred bytes, so this costs readers little.
   */
  private Written writeVectors(Snapshot snapshot) throws IOException {
    BaseDeleteLoader loader = new BaseDeleteLoader(delete -> table.io().newInputFile(delete));
    OutputFileFactory files =
        OutputFileFactory.builderFor(table, 0, snapshot.snapshotId())
            .format(FileFormat.PUFFIN)
            .operationId("dv-" + UUID.randomUUID())
            .build();
    List<DeleteFile> added = new ArrayList<>();
    List<DeleteFile> replaced = new ArrayList<>();
    Set<String> named = new HashSet<>();
    try {
      for (Partition partition : partitions.values()) {
        PartitionSpec spec = table.specs().get(partition.sample.specId());
        StructLike values = spec.isUnpartitioned() ? null : partition.sample.partition();
        for (Map.Entry<String, Positions> entry : partition.positions.entrySet()) {
          String path = entry.getKey();
          DeleteFile previous = vectors.get(path);
          BaseDVFileWriter writer =
              new BaseDVFileWriter(
                  files,
                  p -> previous == null ? null : loader.loadPositionDeletes(List.of(previous), p));
          for (long position : entry.getValue().sorted()) {
            writer.delete(path, position, spec, values);
          }
          writer.close(); // it holds the vector in memory until here: no file if a delete failed
          DeleteWriteResult result = writer.result();
          added.addAll(result.deleteFiles());
          replaced.addAll(result.rewrittenDeleteFiles());
          named.add(path);
        }
      }
    } catch (RuntimeException | IOException e) {
      removeQuietly(table, added);
      throw e;
    }
    return new Written(added, named, replaced);
  }

  /** The live delete files of {@code snapshot}. */
  static List<DeleteFile> live(Table table, Snapshot snapshot) throws IOException {
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

  static void removeQuietly(Table table, List<DeleteFile> files) {
    for (DeleteFile file : files) {
      try {
        table.io().deleteFile(file.location());
      } catch (RuntimeException ignored) {
        // left for orphan removal
      }
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
}
