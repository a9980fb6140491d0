package tabletopic;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.MetricsConfig;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.encryption.PlaintextEncryptionManager;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.io.OutputFileFactory;
import org.apache.iceberg.io.PositionOutputStream;
import org.apache.iceberg.parquet.ParquetUtil;
import org.apache.iceberg.relocated.com.google.common.collect.ImmutableSet;
import org.apache.iceberg.shaded.org.apache.parquet.ParquetReadOptions;
import org.apache.iceberg.shaded.org.apache.parquet.conf.PlainParquetConfiguration;
import org.apache.iceberg.shaded.org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.iceberg.shaded.org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.iceberg.shaded.org.apache.parquet.io.LocalInputFile;
import org.apache.iceberg.shaded.org.apache.parquet.io.SeekableInputStream;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.JsonUtil;
import org.apache.iceberg.util.PropertyUtil;

/**
 * Data and equality-delete files whose Parquet the daemon's Python side encoded with Arrow: which
 * files of a table can be, and taking them in.
 *
 * <p>Turning Arrow columns into Spark rows and rows into Parquet pages was most of the JVM's CPU per
 * record, and its compiled code most of what the JIT compiled. Arrow's C++ writer encodes the same
 * columns at a fraction of that. Here the JVM keeps what makes a file Iceberg's: where it goes (the
 * table's FileIO and location provider), and its metrics, read from the footer by Iceberg's own code
 * under the table's metrics settings, as for a file Iceberg wrote.
 *
 * <p>Only files Arrow writes as Iceberg's writer would qualify: of tables not encrypted, of types
 * whose Parquet form both agree on, with no Parquet setting Arrow lacks; data files of unpartitioned
 * tables only, since Arrow does not fan rows out by partition. The rest keep Iceberg's writer
 * ({@link TaskFileWriter}).
 */
public final class EncodedParquet {
  private EncodedParquet() {}

  private static final String PARQUET_PREFIX = "write.parquet.";
  private static final String DELETE_PARQUET_PREFIX = "write.delete.parquet.";
  /** The Parquet settings Arrow's writer can follow; any other one sends a table to Iceberg's writer. */
  private static final Set<String> FOLLOWED =
      ImmutableSet.of(
          "compression-codec",
          "compression-level",
          "row-group-size-bytes",
          "page-size-bytes",
          "page-row-limit",
          "dict-size-bytes",
          "row-group-check-min-record-count",
          "row-group-check-max-record-count");
  /** Codecs named alike by both writers; parquet-mr's "lz4" is Hadoop's framing, which Arrow does not write. */
  private static final Set<String> CODECS = ImmutableSet.of("zstd", "snappy", "gzip", "brotli", "uncompressed");
  /** parquet-mr's level when the table names none (Arrow's own default differs). */
  private static final int ZSTD_DEFAULT_LEVEL = 3;

  /**
   * How Arrow is to write files of {@code schema} for {@code table}, with {@code writeProps} over the
   * table's properties as Iceberg's writer takes them: {@code {"field_ids": [...], "data": {...},
   * "deletes": {...}}}, where data or deletes may be {@code {"refused": why}}; or only {@code
   * {"refused": why}} when Iceberg's writer must write every file.
   *
   * <p>{@code "field_ids"} are the schema's field ids in the order of a depth-first walk: a field,
   * then its type's children (a list's element, a map's key then value), as Arrow nests them.
   * Equality deletes take the ids of their columns from it.
   */
  public static ObjectNode layout(Table table, Schema schema, Map<String, String> writeProps) {
    ObjectNode out = JsonUtil.mapper().createObjectNode();
    Map<String, String> props = new HashMap<>(table.properties());
    props.putAll(writeProps);
    ArrayNode ids = JsonUtil.mapper().createArrayNode();
    String refused = table.encryption() instanceof PlaintextEncryptionManager ? null : "encrypted";
    if (refused == null) {
      refused = walk(schema.asStruct(), ids);
    }
    if (refused != null) {
      out.put("refused", refused);
      return out;
    }
    out.set("field_ids", ids);
    out.set(
        "data",
        table.spec().isUnpartitioned()
            ? files(props, PARQUET_PREFIX, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
            : JsonUtil.mapper().createObjectNode().put("refused", "partitioned"));
    // Equality deletes go to the unpartitioned spec whatever the table's (TableSpecs.ensureUnpartitionedSpec).
    out.set("deletes", files(props, DELETE_PARQUET_PREFIX, TableProperties.DELETE_TARGET_FILE_SIZE_BYTES,
        TableProperties.DELETE_TARGET_FILE_SIZE_BYTES_DEFAULT));
    return out;
  }

  /** {@link #settings}, or a refusal where a number is malformed: Iceberg's writer then says so, as before. */
  private static ObjectNode files(Map<String, String> props, String prefix, String targetKey, long targetDefault) {
    try {
      return settings(props, prefix, targetKey, targetDefault);
    } catch (NumberFormatException e) {
      return JsonUtil.mapper().createObjectNode().put("refused", "a malformed number: " + e.getMessage());
    }
  }

  /**
   * The settings of one kind of file ({@code prefix}: data's, or deletes', which fall back on data's,
   * as Iceberg's writer takes them); or {@code {"refused": why}}.
   */
  private static ObjectNode settings(
      Map<String, String> props, String prefix, String targetKey, long targetDefault) {
    ObjectNode out = JsonUtil.mapper().createObjectNode();
    for (String key : props.keySet()) {
      boolean unfollowed =
          (key.startsWith(PARQUET_PREFIX) && !FOLLOWED.contains(key.substring(PARQUET_PREFIX.length())))
              || (key.startsWith(prefix) && !FOLLOWED.contains(key.substring(prefix.length())))
              || key.startsWith("parquet.");
      if (unfollowed) {
        return out.put("refused", "sets " + key);
      }
    }
    String codec = setting(props, prefix, "compression-codec");
    codec = (codec == null ? TableProperties.PARQUET_COMPRESSION_DEFAULT : codec).toLowerCase(Locale.ROOT);
    if (!CODECS.contains(codec)) {
      return out.put("refused", "compression codec " + codec);
    }
    String level = setting(props, prefix, "compression-level");
    out.put("codec", codec.equals("uncompressed") ? "none" : codec);
    if (level != null) {
      out.put("level", Integer.parseInt(level));
    } else if (codec.equals("zstd")) {
      out.put("level", ZSTD_DEFAULT_LEVEL);
    }
    out.put("row_group_bytes", size(props, prefix, "row-group-size-bytes",
        TableProperties.PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT));
    out.put("page_bytes", size(props, prefix, "page-size-bytes", TableProperties.PARQUET_PAGE_SIZE_BYTES_DEFAULT));
    out.put("page_rows", size(props, prefix, "page-row-limit", TableProperties.PARQUET_PAGE_ROW_LIMIT_DEFAULT));
    out.put("dict_bytes", size(props, prefix, "dict-size-bytes", TableProperties.PARQUET_DICT_SIZE_BYTES_DEFAULT));
    out.put("file_bytes", PropertyUtil.propertyAsLong(props, targetKey, targetDefault));
    return out;
  }

  /** A setting under {@code prefix}, or, for deletes, the data files' one. */
  private static String setting(Map<String, String> props, String prefix, String name) {
    String value = props.get(prefix + name);
    return value != null ? value : props.get(PARQUET_PREFIX + name);
  }

  private static long size(Map<String, String> props, String prefix, String name, long fallback) {
    String value = setting(props, prefix, name);
    return value == null ? fallback : Long.parseLong(value);
  }

  /** Adds the ids of {@code struct}'s fields, depth first; or says which type Arrow cannot write as Iceberg does. */
  private static String walk(Types.StructType struct, ArrayNode ids) {
    for (Types.NestedField field : struct.fields()) {
      ids.add(field.fieldId());
      String refused = walk(field.type(), ids);
      if (refused != null) {
        return refused;
      }
    }
    return null;
  }

  private static String walk(Type type, ArrayNode ids) {
    switch (type.typeId()) {
      case BOOLEAN:
      case INTEGER:
      case LONG:
      case FLOAT:
      case DOUBLE:
      case DATE:
      case STRING:
      case BINARY:
      case DECIMAL: // as integers up to 18 digits, as Iceberg's writer stores them
        return null;
      case TIMESTAMP: // microseconds, with or without a zone; Spark's Arrow types say which
        return null;
      case STRUCT:
        return walk(type.asStructType(), ids);
      case LIST:
        Types.ListType list = type.asListType();
        ids.add(list.elementId());
        return walk(list.elementType(), ids);
      case MAP:
        Types.MapType map = type.asMapType();
        ids.add(map.keyId());
        String refused = walk(map.keyType(), ids);
        if (refused != null) {
          return refused;
        }
        ids.add(map.valueId());
        return walk(map.valueType(), ids);
      default: // uuid and fixed reach Arrow as strings and binaries; time, nanos, variant, geo not at all
        return "has a " + type + " column";
    }
  }

  /**
   * Takes the Parquet files at {@code localPaths} (one per line) into {@code table} as equality-delete
   * files on {@code fieldIds}, in spec {@code specId}, as {@link #place} takes data files.
   */
  static List<ContentFile<?>> placeDeletes(
      Table table, String localPaths, int specId, int[] fieldIds, int partitionId, long taskId, String operationId)
      throws IOException {
    PartitionSpec spec = table.specs().get(specId);
    return copied(table, localPaths, partitionId, taskId, operationId, (location, size, metrics, splits) ->
        FileMetadata.deleteFileBuilder(spec)
            .ofEqualityDeletes(fieldIds)
            .withPath(location)
            .withFormat(FileFormat.PARQUET)
            .withFileSizeInBytes(size)
            .withMetrics(metrics)
            .withSplitOffsets(splits)
            .build());
  }

  /** What a copied file is, from where it went, its size and the metrics of its footer. */
  private interface Described {
    ContentFile<?> file(String location, long size, Metrics metrics, List<Long> splitOffsets);
  }

  /**
   * Takes the Parquet files at {@code localPaths} (one per line) into {@code table} as data files:
   * each is copied to a new file of the table's and described by its footer. The local files are the
   * caller's to remove.
   */
  static List<ContentFile<?>> place(
      Table table, String localPaths, int partitionId, long taskId, String operationId) throws IOException {
    return copied(table, localPaths, partitionId, taskId, operationId, (location, size, metrics, splits) ->
        DataFiles.builder(table.spec())
            .withPath(location)
            .withFormat(FileFormat.PARQUET)
            .withFileSizeInBytes(size)
            .withMetrics(metrics)
            .withSplitOffsets(splits)
            .build());
  }

  /**
   * Options for reading a footer, made once: {@code ParquetUtil.fileMetrics} made them for every file,
   * from a new Hadoop configuration that parses Hadoop's default XML files again, most of a small file's
   * placing.
   */
  private static final ParquetReadOptions FOOTER_ONLY =
      ParquetReadOptions.builder(new PlainParquetConfiguration()).build();

  private static ParquetMetadata footer(String path) throws IOException {
    LocalInputFile file = new LocalInputFile(Paths.get(path));
    try (SeekableInputStream in = file.newStream()) {
      return ParquetFileReader.readFooter(file, FOOTER_ONLY, in);
    }
  }

  private static List<ContentFile<?>> copied(
      Table table, String localPaths, int partitionId, long taskId, String operationId, Described described)
      throws IOException {
    OutputFileFactory names =
        OutputFileFactory.builderFor(table, partitionId, taskId)
            .format(FileFormat.PARQUET)
            .operationId(operationId)
            .build();
    MetricsConfig metrics = MetricsConfig.forTable(table);
    List<ContentFile<?>> placed = new ArrayList<>();
    for (String path : localPaths.split("\n")) {
      OutputFile target = names.newOutputFile().encryptingOutputFile();
      long size;
      try (InputStream in = Files.newInputStream(Paths.get(path));
          PositionOutputStream out = target.createOrOverwrite()) {
        in.transferTo(out);
        size = out.getPos();
      }
      ParquetMetadata footer = footer(path);
      placed.add(
          described.file(
              target.location(),
              size,
              ParquetUtil.footerMetrics(footer, Stream.empty(), metrics),
              ParquetUtil.getSplitOffsets(footer)));
    }
    return placed;
  }
}
