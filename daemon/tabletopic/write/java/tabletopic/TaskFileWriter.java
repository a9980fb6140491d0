package tabletopic;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.FileWriter;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.spark.data.SparkParquetWriters;
import org.apache.iceberg.util.PropertyUtil;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;

/**
 * Writes one Spark partition's rows into Parquet files of one table, on an executor (or on the
 * driver, for a {@link LocalWrite}).
 *
 * <p>Data rows go to data files; key rows go to equality-delete files. Files roll at the table's
 * target size and fan out by partition. Nothing is committed here: the files travel back to the
 * driver, which commits them together with the source offsets in one snapshot.
 *
 * <p>Each open Parquet writer holds page buffers for every column, so a table with thousands of
 * partitions (say {@code bucket(id, 2000)}) cannot have a writer open per partition: that ran a
 * 1 GB driver out of heap. At most {@link #MAX_OPEN_WRITERS} are open; rows of further partitions
 * wait as compact row copies and are written one partition at a time once the input ends.
 */
final class TaskFileWriter implements FlatMapFunction<Iterator<InternalRow>, ContentFile<?>>, Serializable {
  private static final long serialVersionUID = 1L;
  static final int MAX_OPEN_WRITERS = 32;

  private final Broadcast<Table> table;
  private final StructType sparkSchema;
  private final Schema rowSchema;
  private final int specId;
  private final int[] equalityFieldIds; // null for data files
  private final String operationId;
  private final HashMap<String, String> writeProps;

  TaskFileWriter(
      Broadcast<Table> table,
      StructType sparkSchema,
      Schema rowSchema,
      int specId,
      int[] equalityFieldIds,
      String operationId,
      HashMap<String, String> writeProps) {
    this.table = table;
    this.sparkSchema = sparkSchema;
    this.rowSchema = rowSchema;
    this.specId = specId;
    this.equalityFieldIds = equalityFieldIds;
    this.operationId = operationId;
    this.writeProps = writeProps;
  }

  @Override
  public Iterator<ContentFile<?>> call(Iterator<InternalRow> rows) throws IOException {
    TaskContext task = TaskContext.get();
    return write(table.value(), task.partitionId(), task.taskAttemptId(), rows).iterator();
  }

  /**
   * Writes {@code rows} into files of {@code tbl}; {@code partitionId} and {@code taskId} make their
   * names unique within the operation. Runs in a Spark task, or on the driver for rows too few to
   * be worth a job ({@link LocalWrite}).
   */
  List<ContentFile<?>> write(Table tbl, int partitionId, long taskId, Iterator<InternalRow> rows)
      throws IOException {
    Writers writers = new Writers(tbl, partitionId, taskId);
    try {
      Map<PartitionKey, List<InternalRow>> waiting = writeOrQueue(rows, writers);
      writers.closeAll();
      for (Map.Entry<PartitionKey, List<InternalRow>> entry : waiting.entrySet()) {
        writers.writeAll(entry.getKey(), entry.getValue());
        entry.getValue().clear();
      }
    } catch (RuntimeException | IOException e) {
      writers.abort(e);
      throw e;
    }
    return writers.written;
  }

  /**
   * Writes each row to its partition's open writer, opening one while fewer than {@link
   * #MAX_OPEN_WRITERS} are; the rows of other partitions are returned, copied, in arrival order.
   */
  private Map<PartitionKey, List<InternalRow>> writeOrQueue(Iterator<InternalRow> rows, Writers writers)
      throws IOException {
    Map<PartitionKey, List<InternalRow>> waiting = new LinkedHashMap<>();
    PartitionKey key = new PartitionKey(writers.spec, rowSchema);
    SparkRowPartition view = new SparkRowPartition(sparkSchema, rowSchema.asStruct());
    while (rows.hasNext()) {
      InternalRow row = rows.next();
      key.partition(view.wrap(row));
      if (!writers.isOpen(key)) {
        List<InternalRow> queued = waiting.get(key);
        if (queued != null || writers.open.size() >= MAX_OPEN_WRITERS) {
          if (queued == null) {
            queued = new ArrayList<>();
            waiting.put(key.copy(), queued);
          }
          queued.add(row.copy()); // the input iterator reuses its row object
          continue;
        }
      }
      writers.write(key, row);
    }
    return waiting;
  }

  /** One task's open writers, by partition, and the files they closed; each rolls at the target size. */
  private final class Writers {
    final Table tbl;
    final PartitionSpec spec;
    final OutputFileFactory files;
    final long targetSize;
    final Map<PartitionKey, FileWriter<InternalRow, ?>> open = new HashMap<>();
    final List<ContentFile<?>> written = new ArrayList<>();

    Writers(Table tbl, int partitionId, long taskId) {
      this.tbl = tbl;
      this.spec = tbl.specs().get(specId);
      this.files =
          OutputFileFactory.builderFor(tbl, partitionId, taskId)
              .format(FileFormat.PARQUET)
              .operationId(operationId)
              .build();
      this.targetSize =
          PropertyUtil.propertyAsLong(
              tbl.properties(),
              equalityFieldIds == null
                  ? TableProperties.WRITE_TARGET_FILE_SIZE_BYTES
                  : TableProperties.DELETE_TARGET_FILE_SIZE_BYTES,
              TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT);
    }

    boolean isOpen(PartitionKey key) {
      return open.containsKey(key);
    }

    /** Writes {@code row} to {@code key}'s writer, opening it if needed (the key is copied then). */
    void write(PartitionKey key, InternalRow row) throws IOException {
      FileWriter<InternalRow, ?> writer = open.get(key);
      if (writer == null) {
        PartitionKey copy = key.copy();
        writer = newWriter(tbl, spec, files, copy);
        open.put(copy, writer);
      }
      writer.write(row);
      if (writer.length() >= targetSize) {
        written.add(close(open.remove(key)));
      }
    }

    /** Every row of one partition, through writers opened one at a time. */
    void writeAll(PartitionKey key, List<InternalRow> rows) throws IOException {
      for (InternalRow row : rows) {
        write(key, row);
      }
      FileWriter<InternalRow, ?> last = open.remove(key);
      if (last != null) {
        written.add(close(last));
      }
    }

    void closeAll() throws IOException {
      for (FileWriter<InternalRow, ?> writer : open.values()) {
        written.add(close(writer));
      }
      open.clear();
    }

    void abort(Exception e) {
      for (FileWriter<InternalRow, ?> writer : open.values()) {
        try {
          writer.close();
        } catch (IOException suppressed) {
          e.addSuppressed(suppressed);
        }
      }
    }
  }

  private FileWriter<InternalRow, ?> newWriter(
      Table tbl, PartitionSpec spec, OutputFileFactory files, PartitionKey partition)
      throws IOException {
    EncryptedOutputFile out =
        spec.isUnpartitioned() ? files.newOutputFile() : files.newOutputFile(spec, partition);
    StructLike partitionOrNull = spec.isUnpartitioned() ? null : partition;
    if (equalityFieldIds == null) {
      DataWriter<InternalRow> writer =
          Parquet.writeData(out)
              .forTable(tbl)
              .schema(rowSchema)
              .setAll(writeProps)
              .withSpec(spec)
              .withPartition(partitionOrNull)
              .createWriterFunc(msgType -> SparkParquetWriters.buildWriter(sparkSchema, msgType))
              .overwrite()
              .build();
      return writer;
    }
    List<Integer> ids = new ArrayList<>();
    for (int id : equalityFieldIds) {
      ids.add(id);
    }
    return Parquet.writeDeletes(out)
        .forTable(tbl)
        .rowSchema(rowSchema)
        .setAll(writeProps)
        .withSpec(spec)
        .withPartition(partitionOrNull)
        .equalityFieldIds(ids)
        .createWriterFunc(msgType -> SparkParquetWriters.buildWriter(sparkSchema, msgType))
        .overwrite()
        .buildEqualityWriter();
  }

  private static ContentFile<?> close(FileWriter<InternalRow, ?> writer) throws IOException {
    writer.close();
    Object result = writer.result();
    if (result instanceof org.apache.iceberg.io.DataWriteResult) {
      return ((org.apache.iceberg.io.DataWriteResult) result).dataFiles().get(0);
    }
    return ((org.apache.iceberg.io.DeleteWriteResult) result).deleteFiles().get(0);
  }

}
