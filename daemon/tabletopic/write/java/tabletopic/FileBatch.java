package tabletopic;

import java.io.IOException;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.Schema;
import org.apache.iceberg.SerializableTable;
import org.apache.iceberg.Table;
import org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonGenerator;
import org.apache.iceberg.util.JsonUtil;
import org.apache.spark.api.java.JavaFutureAction;
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
 *
 * <p>Nothing is written before {@link #write}. It starts the job, then writes the driver's parts
 * while the executors write, side by side on the driver's cores: an upsert's keys and its rows, each
 * one write of the driver, then take the time of the larger alone.
 */
public final class FileBatch {
  private final String operationId;
  private final HashMap<String, String> writeProps;
  private final List<JavaRDD<Tuple2<Integer, ContentFile<?>>>> parts = new ArrayList<>();
  private final List<Broadcast<Table>> shared = new ArrayList<>();
  private final List<List<ContentFile<?>>> files = new ArrayList<>(); // by part, filled by write()
  private final List<Callable<List<ContentFile<?>>>> local = new ArrayList<>(); // part index -> null if a job's
  private final List<Table> tables = new ArrayList<>(); // part index -> its table, whose specs name its files
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
   * in the shape of schema {@code schemaId}) as data files on the driver, in {@link #write}, which
   * must come before the file is removed.
   */
  public int addLocalData(String arrowPath, String sparkSchemaJson, Table table, int schemaId) {
    Schema schema = table.schemas().get(schemaId);
    if (schema == null) {
      throw new IllegalArgumentException("table " + table.name() + " has no schema " + schemaId);
    }
    return addLocal(arrowPath, sparkSchemaJson, table, schema, table.spec().specId(), null);
  }

  /**
   * Takes the Parquet files at {@code localPaths} (one per line, encoded for {@code table} as {@link
   * EncodedParquet#layout} says) in as data files, in {@link #write}, which must come before the
   * files are removed.
   */
  public int addEncodedData(String localPaths, Table table) {
    return addDriverPart(
        table, (index, taskId) -> EncodedParquet.place(table, localPaths, index, taskId, operationId));
  }

  /** Takes Parquet files of keys in as equality-delete files on {@code fieldIds}, as {@link #addEncodedData}. */
  public int addEncodedEqualityDeletes(String localPaths, Table table, int specId, List<Integer> fieldIds) {
    int[] ids = fieldIds.stream().mapToInt(Integer::intValue).toArray();
    return addDriverPart(
        table,
        (index, taskId) ->
            EncodedParquet.placeDeletes(table, localPaths, specId, ids, index, taskId, operationId));
  }

  /** Writes the keys of the Arrow IPC stream at {@code arrowPath} as equality-delete files, as {@link #addLocalData}. */
  public int addLocalEqualityDeletes(
      String arrowPath, String sparkSchemaJson, Table table, int specId, List<Integer> fieldIds) {
    StructType sparkSchema = (StructType) DataType.fromJson(sparkSchemaJson);
    Schema deleteSchema = table.schema().select(sparkSchema.fieldNames());
    int[] ids = fieldIds.stream().mapToInt(Integer::intValue).toArray();
    return addLocal(arrowPath, sparkSchemaJson, table, deleteSchema, specId, ids);
  }

  private int addLocal(
      String arrowPath, String sparkSchemaJson, Table table, Schema rowSchema, int specId, int[] ids) {
    StructType sparkSchema = (StructType) DataType.fromJson(sparkSchemaJson);
    TaskFileWriter task =
        new TaskFileWriter(null, sparkSchema, rowSchema, specId, ids, operationId, writeProps);
    return addDriverPart(
        table, (index, taskId) -> LocalWrite.write(task, sparkSchema, table, index, taskId, arrowPath));
  }

  /** What a part written on the driver does in {@link #write}, given its index and task id. */
  private interface DriverPart {
    List<ContentFile<?>> write(int index, long taskId) throws IOException;
  }

  /** Adds a part written on the driver; returns its index. */
  private int addDriverPart(Table table, DriverPart part) {
    int index = files.size();
    files.add(null);
    tables.add(table);
    // The part's index names its files apart from the other parts' (a job's tasks are numbered
    // from 0 too, so local parts count from far above them).
    local.add(() -> part.write(index, LOCAL_TASK_IDS + index));
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
    tables.add(table);
    local.add(null);
    TaskFileWriter task =
        new TaskFileWriter(
            copy, rows.schema(), rowSchema, specId, equalityFieldIds, operationId, writeProps);
    parts.add(rows.queryExecution().toRdd().toJavaRDD().mapPartitions(new Tagged(index, task)));
    return index;
  }

  /**
   * Writes every part: the Dataset parts in one job, the driver's parts while it runs. The files of
   * part {@code i} are at {@code i}. Once only.
   */
  // Spark's union takes its RDDs as a varargs array, which Java cannot make of a generic type.
  @SuppressWarnings({"unchecked", "rawtypes"})
  public List<List<ContentFile<?>>> write() throws InterruptedException {
    JavaFutureAction<List<Tuple2<Integer, ContentFile<?>>>> job = null;
    try {
      if (!parts.isEmpty()) {
        JavaRDD<Tuple2<Integer, ContentFile<?>>> all =
            parts.size() == 1 ? parts.get(0) : context.union(parts.toArray(new JavaRDD[0]));
        job = all.collectAsync();
      }
      writeLocal();
      if (job != null) {
        List<Tuple2<Integer, ContentFile<?>>> written;
        try {
          written = job.get();
        } catch (ExecutionException e) {
          // The job's own failure, as a collect() throws it: callers read the causes it carries.
          throw FileBatch.<RuntimeException>rethrown(e.getCause());
        }
        job = null;
        for (Tuple2<Integer, ContentFile<?>> file : written) {
          files.get(file._1()).add(file._2());
        }
      }
      return files;
    } finally {
      if (job != null) {
        job.cancel(true); // its files, if any were written, are orphans that maintenance removes
      }
      abandon();
    }
  }

  /**
   * {@link #write}, answering each part's files as a JSON array of Iceberg's content files (as {@link
   * ContentFiles#writeFiles} writes them), all parts in one array: one py4j call for a round's tables.
   * Taking each part's list, its size and its JSON were three calls a table, and with a thousand
   * tables each waited for the Python interpreter's lock behind the event loop.
   */
  public String writeJson() throws InterruptedException, IOException {
    List<List<ContentFile<?>>> written = write();
    StringWriter out = new StringWriter();
    try (JsonGenerator json = JsonUtil.factory().createGenerator(out)) {
      json.writeStartArray();
      for (int i = 0; i < written.size(); i++) {
        ContentFiles.writeFiles(json, tables.get(i), written.get(i));
      }
      json.writeEndArray();
    }
    return out.toString();
  }

  /**
   * The driver's parts, on this thread and the common pool's: each thread takes the next part not
   * yet taken. The first failure is thrown once every part taken is done.
   */
  private void writeLocal() throws InterruptedException {
    List<Integer> queued = new ArrayList<>();
    for (int i = 0; i < local.size(); i++) {
      if (local.get(i) != null) {
        queued.add(i);
      }
    }
    AtomicInteger next = new AtomicInteger();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    Runnable drain =
        () -> {
          for (int n; (n = next.getAndIncrement()) < queued.size() && failed.get() == null; ) {
            int index = queued.get(n);
            try {
              files.set(index, local.get(index).call());
            } catch (Throwable e) {
              failed.compareAndSet(null, e);
            }
          }
        };
    int helpers = Math.min(queued.size() - 1, ForkJoinPool.getCommonPoolParallelism());
    List<Future<?>> helping = new ArrayList<>();
    for (int i = 0; i < helpers; i++) {
      helping.add(ForkJoinPool.commonPool().submit(drain));
    }
    drain.run();
    for (Future<?> helper : helping) {
      try {
        helper.get();
      } catch (ExecutionException e) {
        failed.compareAndSet(null, e.getCause());
      }
    }
    if (failed.get() != null) {
      throw FileBatch.<RuntimeException>rethrown(failed.get());
    }
  }

  /** Releases what the parts added so far hold (their broadcast tables); the batch writes nothing more. */
  public void abandon() {
    local.clear();
    for (Broadcast<Table> copy : shared) {
      copy.destroy();
    }
    shared.clear();
    parts.clear();
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E rethrown(Throwable cause) throws E {
    throw (E) cause;
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
