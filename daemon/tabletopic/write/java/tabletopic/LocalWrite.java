package tabletopic;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.Table;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Writes the rows of an Arrow IPC stream on the calling thread of the driver, with no Spark job.
 *
 * <p>Rows that fit one task were written by a job of one task all the same, and a job's planning,
 * scheduling and serialisation cost the driver tens of milliseconds however few rows it holds:
 * with hundreds of tables, a round was mostly that. The rows are read as Spark's own Arrow path reads
 * them (an {@link ArrowColumnVector} per column, a {@link ColumnarBatch} per record batch), so the
 * files are the ones a task would write.
 */
final class LocalWrite {
  private LocalWrite() {}

  /**
   * Each thread's projections by row type, most recently used last. Making one generates its code
   * again (only the compiled class is cached by Spark): with a table per topic, one write of a few
   * rows each, that was about a fifth of a local write. A projection reuses its row, so it is not
   * shared between threads; a thread writes one file at a time, so it reuses its own.
   */
  private static final int PROJECTIONS_KEPT = 64;

  private static final ThreadLocal<Map<StructType, UnsafeProjection>> PROJECTIONS =
      ThreadLocal.withInitial(
          () ->
              new LinkedHashMap<>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<StructType, UnsafeProjection> eldest) {
                  return size() > PROJECTIONS_KEPT;
                }
              });

  private static UnsafeProjection projection(StructType sparkSchema) {
    return PROJECTIONS.get().computeIfAbsent(sparkSchema, UnsafeProjection::create);
  }

  static List<ContentFile<?>> write(
      TaskFileWriter task,
      StructType sparkSchema,
      Table table,
      int partitionId,
      long taskId,
      String arrowPath)
      throws IOException {
    try (BufferAllocator allocator = new RootAllocator();
        InputStream in = Files.newInputStream(Paths.get(arrowPath));
        ArrowStreamReader reader = new ArrowStreamReader(in, allocator)) {
      try {
        return task.write(table, partitionId, taskId, new Rows(reader, sparkSchema));
      } catch (UncheckedIOException e) {
        throw e.getCause();
      }
    }
  }

  /**
   * The rows of every record batch of a stream, one batch loaded at a time, each as an UnsafeRow (the
   * one object reused), as a Spark task gets them: a column row's getter reads a null of a nested
   * struct's field as a value, and Arrow refuses that.
   */
  private static final class Rows implements Iterator<InternalRow> {
    private final ArrowStreamReader reader;
    private final UnsafeProjection unsafe;
    private Iterator<InternalRow> batch = Collections.emptyIterator();

    Rows(ArrowStreamReader reader, StructType sparkSchema) {
      this.reader = reader;
      this.unsafe = projection(sparkSchema);
    }

    @Override
    public boolean hasNext() {
      try {
        while (!batch.hasNext()) {
          if (!reader.loadNextBatch()) {
            return false;
          }
          VectorSchemaRoot root = reader.getVectorSchemaRoot();
          ColumnVector[] columns =
              root.getFieldVectors().stream().map(ArrowColumnVector::new).toArray(ColumnVector[]::new);
          batch = new ColumnarBatch(columns, root.getRowCount()).rowIterator();
        }
        return true;
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public InternalRow next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      return unsafe.apply(batch.next());
    }
  }
}
