package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.Schema;
import org.apache.iceberg.SerializableTable;
import org.apache.iceberg.Table;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;

/**
 * The files of many writes, of one table or many: those given as Datasets made by one Spark job,
 * those given as Arrow files written at once on the driver ({@link LocalWrite}).
 *
 * <p>Each write was its own job, and a job costs the driver tens of milliseconds however few rows it
 * holds: a round of 200 small tables spent most of its time starting jobs. Tables with few rows are
 * written on the driver; the rest share one job, whose tasks are the union of theirs. A union's
 * tasks each carry the whole union's plan, so it suits a few large writes, not hundreds of small.
 */
public final class FileBatch {
  private final String operationId;
  private final HashMap<String, String> writeProps;
  private final List<JavaRDD<Tuple2<Integer, ContentFile<?>>>> parts = new ArrayList<>();
  private final List<Broadcast<Table>> shared = new ArrayList<>();
  private final List<List<ContentFile<?>>> files = new ArrayList<>(); // by part; a job's filled by write()
  private JavaSparkContext context;
  private static final long LOCAL_TASK_IDS = 1L << 40;

  public FileBatch(String operationId, Map<String, String> writeProps) {
    this.operationId = operationId;
    this.writeProps = new HashMap<>(writeProps);
  }

  /**
   * Adds the rows of {@code rows} (already in the shape of schema {@code schemaId}) as data files;
   * returns the part's index in {@link #write}'s answer.
   *
   * <p>The schema is named, not taken from the table: the table may evolve while the files are
   * written, and the rows keep the shape they were given.
   */
  public int addData(Dataset<Row> rows, Table table, int schemaId) {
    Schema schema = table.schemas().get(schemaId);
    if (schema == null) {
      throw new IllegalArgumentException("table " + table.name() + " has no schema " + schemaId);
    }
    return add(rows, table, schema, table.spec().specId(), null);
  }

  /**
   * Adds {@code keys} as equality-delete files on {@code fieldIds}, in spec {@code specId}; the
   * columns of {@code keys} are the delete file's row schema.
   */
  public int addEqualityDeletes(Dataset<Row> keys, Table table, int specId, List<Integer> fieldIds) {
    Schema deleteSchema = table.schema().select(keys.columns()); // id columns never change type
    int[] ids = fieldIds.stream().mapToInt(Integer::intValue).toArray();
    return add(keys, table, deleteSchema, specId, ids);
  }

  /**
   * Writes the rows of the Arrow IPC stream at {@code arrowPath} (of Spark type {@code sparkSchemaJson},
   * in the shape of schema {@code schemaId}) as data files, now, on this thread.
   */
  public int addLocalData(String arrowPath, String sparkSchemaJson, Table table, int schemaId)
      throws IOException {
    Schema schema = table.schemas().get(schemaId);
    if (schema == null) {
      throw new IllegalArgumentException("table " + table.name() + " has no schema " + schemaId);
    }
    return addLocal(arrowPath, sparkSchemaJson, table, schema, table.spec().specId(), null);
  }

  /** Writes the keys of the Arrow IPC stream at {@code arrowPath} as equality-delete files, now. */
  public int addLocalEqualityDeletes(
      String arrowPath, String sparkSchemaJson, Table table, int specId, List<Integer> fieldIds)
      throws IOException {
    StructType sparkSchema = (StructType) DataType.fromJson(sparkSchemaJson);
    Schema deleteSchema = table.schema().select(sparkSchema.fieldNames());
    int[] ids = fieldIds.stream().mapToInt(Integer::intValue).toArray();
    return addLocal(arrowPath, sparkSchemaJson, table, deleteSchema, specId, ids);
  }

  private int addLocal(
      String arrowPath, String sparkSchemaJson, Table table, Schema rowSchema, int specId, int[] ids)
      throws IOException {
    StructType sparkSchema = (StructType) DataType.fromJson(sparkSchemaJson);
    TaskFileWriter task =
        new TaskFileWriter(null, sparkSchema, rowSchema, specId, ids, operationId, writeProps);
    int index = files.size();
    // The part's index names its files apart from the other parts' (a job's tasks are numbered
    // from 0 too, so local parts count from far above them).
    files.add(LocalWrite.write(task, sparkSchema, table, index, LOCAL_TASK_IDS + index, arrowPath));
    return index;
  }

  private int add(Dataset<Row> rows, Table table, Schema rowSchema, int specId, int[] equalityFieldIds) {
    if (context == null) {
      context = JavaSparkContext.fromSparkContext(rows.sparkSession().sparkContext());
    }
    Broadcast<Table> copy = context.broadcast(SerializableTable.copyOf(table));
    shared.add(copy);
    int index = files.size();
    files.add(new ArrayList<>());
    TaskFileWriter task =
        new TaskFileWriter(
            copy, rows.schema(), rowSchema, specId, equalityFieldIds, operationId, writeProps);
    parts.add(rows.queryExecution().toRdd().toJavaRDD().mapPartitions(new Tagged(index, task)));
    return index;
  }

  /** Writes every Dataset part in one job; the files of part {@code i} are at {@code i}. Once only. */
  @SuppressWarnings("unchecked")
  public List<List<ContentFile<?>>> write() {
    try {
      if (parts.isEmpty()) {
        return files;
      }
      JavaRDD<Tuple2<Integer, ContentFile<?>>> all =
          parts.size() == 1 ? parts.get(0) : context.union(parts.toArray(new JavaRDD[0]));
      for (Tuple2<Integer, ContentFile<?>> file : all.collect()) {
        files.get(file._1()).add(file._2());
      }
      return files;
    } finally {
      abandon();
    }
  }

  /** Releases what the parts added so far hold (their broadcast tables); the batch writes nothing more. */
  public void abandon() {
    for (Broadcast<Table> copy : shared) {
      copy.destroy();
    }
    shared.clear();
    parts.clear();
  }

  /** One part's task: its files, each with the part's index. */
  private static final class Tagged
      implements FlatMapFunction<Iterator<InternalRow>, Tuple2<Integer, ContentFile<?>>> {
    private static final long serialVersionUID = 1L;
    private final int index;
    private final TaskFileWriter task;

    Tagged(int index, TaskFileWriter task) {
      this.index = index;
      this.task = task;
    }

    @Override
    public Iterator<Tuple2<Integer, ContentFile<?>>> call(Iterator<InternalRow> rows) throws Exception {
      List<Tuple2<Integer, ContentFile<?>>> tagged = new ArrayList<>();
      Iterator<ContentFile<?>> files = task.call(rows);
      while (files.hasNext()) {
        tagged.add(new Tuple2<>(index, files.next()));
      }
      return tagged.iterator();
    }
  }
}
