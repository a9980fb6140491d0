package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;

/**
 * Counts a table's live files per partition from its manifests, for maintenance triggers.
 *
 * <p>Why here and not through py4j: a table holds thousands of files, and one py4j call per file
 * would take longer than the maintenance check it serves.
 */
public final class FileCensus {
  private FileCensus() {}

  /**
   * A table's file counts for the current snapshot; a file is small below the size given to
   * {@link #count}.
   *
   * @param mostDeletesPerFile what Spark's {@code delete-file-threshold} compares, estimated per
   *     partition from its oldest data file: an equality delete applies to data files with a lower
   *     data sequence number (in its partition, or everywhere when its spec is unpartitioned), a
   *     position delete to those with a lower or equal one
   * @param pairedSmallBytes bytes of the small data files of partitions holding two or more
   */
  public record Census(
      long dataFiles,
      long deleteFiles,
      long mostFilesInPartition,
      long mostSmallFilesInPartition,
      long manifests,
      long mostDeletesPerFile,
      long equalityDeletes,
      long pairedSmallBytes) {}

  public static Census count(Table table, long smallBytes) throws IOException {
    Snapshot snapshot = table.currentSnapshot();
    if (snapshot == null) {
      return new Census(0, 0, 0, 0, 0, 0, 0, 0);
    }
    DataCounts data = DataCounts.of(table, snapshot, smallBytes);
    DeleteCounts deletes = DeleteCounts.of(table, snapshot);
    long most = 0;
    long mostSmall = 0;
    long mostDeletes = 0;
    long pairedSmallBytes = 0;
    for (Map.Entry<String, long[]> e : data.perPartition.entrySet()) {
      long[] counts = e.getValue();
      if (counts[1] >= 2) {
        pairedSmallBytes += counts[3];
      }
      most = Math.max(most, counts[0]);
      mostSmall = Math.max(mostSmall, counts[1]);
      mostDeletes = Math.max(mostDeletes, deletes.applyingTo(e.getKey(), counts[2]));
    }
    return new Census(
        data.files,
        deletes.files,
        most,
        mostSmall,
        snapshot.allManifests(table.io()).size(),
        mostDeletes,
        deletes.equality,
        pairedSmallBytes);
  }

  /** The data files of a snapshot, per partition. */
  private static final class DataCounts {
    // per partition: files, small files, oldest data sequence number, bytes of small files
    final Map<String, long[]> perPartition = new HashMap<>();
    long files = 0;

    static DataCounts of(Table table, Snapshot snapshot, long smallBytes) throws IOException {
      DataCounts out = new DataCounts();
      for (ManifestFile manifest : snapshot.dataManifests(table.io())) {
        try (ManifestReader<DataFile> reader = ManifestFiles.read(manifest, table.io(), table.specs())) {
          for (DataFile file : reader) {
            out.files++;
            long[] counts =
                out.perPartition.computeIfAbsent(
                    partitionKey(table, file), k -> new long[] {0, 0, Long.MAX_VALUE, 0});
            counts[0]++;
            if (file.fileSizeInBytes() < smallBytes) {
              counts[1]++;
              counts[3] += file.fileSizeInBytes();
            }
            Long seq = file.dataSequenceNumber();
            counts[2] = Math.min(counts[2], seq == null ? 0 : seq);
          }
        }
      }
      return out;
    }
  }

  /** The delete files of a snapshot: those of unpartitioned specs apply everywhere, the others in their partition. */
  private static final class DeleteCounts {
    final List<long[]> global = new ArrayList<>(); // {sequence number, equality?}
    final Map<String, List<long[]>> local = new HashMap<>();
    long files = 0;
    long equality = 0;

    static DeleteCounts of(Table table, Snapshot snapshot) throws IOException {
      DeleteCounts out = new DeleteCounts();
      for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
        try (ManifestReader<DeleteFile> reader =
            ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
          for (DeleteFile file : reader) {
            out.files++;
            boolean isEquality = file.content() == FileContent.EQUALITY_DELETES;
            if (isEquality) {
              out.equality++;
            }
            Long seq = file.dataSequenceNumber();
            long[] entry = {seq == null ? 0 : seq, isEquality ? 1 : 0};
            if (table.specs().get(file.specId()).isUnpartitioned()) {
              out.global.add(entry);
            } else {
              out.local.computeIfAbsent(partitionKey(table, file), k -> new ArrayList<>()).add(entry);
            }
          }
        }
      }
      return out;
    }

    long applyingTo(String partition, long oldestDataSequence) {
      return applying(global, oldestDataSequence)
          + applying(local.getOrDefault(partition, List.of()), oldestDataSequence);
    }
  }

  private static long applying(List<long[]> deletes, long dataSequence) {
    long n = 0;
    for (long[] d : deletes) {
      if (d[1] == 1 ? d[0] > dataSequence : d[0] >= dataSequence) {
        n++;
      }
    }
    return n;
  }

  /** A file's spec and partition, as one string: the scope of a partition's position deletes. */
  static String partitionKey(Table table, ContentFile<?> file) {
    return file.specId() + "/" + table.specs().get(file.specId()).partitionToPath(file.partition());
  }

  /**
   * Removes delete files that can no longer apply to any live data file, in one snapshot carrying
   * {@code summary}; returns how many, or -1 if the table moved on while they were found (the next
   * run tries again).
   *
   * <p>Why not Spark's remove-dangling-deletes: it matches delete files to data files of the same
   * spec and partition, so the equality deletes of an upsert table partitioned by something other
   * than its key (written in an unpartitioned spec, to apply everywhere) look dangling while they
   * still apply, and removing them brings deleted rows back. Here an equality delete is compared
   * with the oldest data file of the whole table, which is never wrong: it applies only to data
   * with a lower data sequence number, and data committed later always gets a higher one. A
   * position delete applies only to data files of its own spec and partition with a lower or equal
   * number (Iceberg's DeleteFileIndex), so it is compared with the oldest data file there.
   */
  public static int removeDanglingDeletes(Table table, Map<String, String> summary) throws IOException {
    table.refresh();
    Snapshot snapshot = table.currentSnapshot();
    if (snapshot == null) {
      return 0;
    }
    long oldestData = Long.MAX_VALUE;
    Map<String, Long> oldestIn = new HashMap<>();
    for (ManifestFile manifest : snapshot.dataManifests(table.io())) {
      try (ManifestReader<DataFile> reader = ManifestFiles.read(manifest, table.io(), table.specs())) {
        for (DataFile file : reader) {
          Long seq = file.dataSequenceNumber();
          long number = seq == null ? 0 : seq;
          oldestData = Math.min(oldestData, number);
          oldestIn.merge(partitionKey(table, file), number, Math::min);
        }
      }
    }
    List<DeleteFile> dangling = new ArrayList<>();
    for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
      try (ManifestReader<DeleteFile> reader =
          ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
        for (DeleteFile file : reader) {
          long seq = file.dataSequenceNumber() == null ? Long.MAX_VALUE : file.dataSequenceNumber();
          boolean equality = file.content() == FileContent.EQUALITY_DELETES;
          long oldestHere = oldestIn.getOrDefault(partitionKey(table, file), Long.MAX_VALUE);
          if (equality ? seq <= oldestData : seq < oldestHere) {
            dangling.add(file.copyWithoutStats());
          }
        }
      }
    }
    if (dangling.isEmpty()) {
      return 0;
    }
    table.refresh();
    if (table.currentSnapshot().snapshotId() != snapshot.snapshotId()) {
      return -1;
    }
    RewriteFiles rewrite = table.newRewrite().validateFromSnapshot(snapshot.snapshotId());
    dangling.forEach(rewrite::deleteFile);
    summary.forEach(rewrite::set);
    rewrite.commit();
    return dangling.size();
  }
}
