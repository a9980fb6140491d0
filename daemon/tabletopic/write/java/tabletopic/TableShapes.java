package tabletopic;

import java.io.IOException;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.iceberg.spark.SparkSchemaUtil;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.JsonUtil;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * A table's schema between the Python side's Spark types and Iceberg's, one py4j call each way.
 *
 * <p>A Table Topic connector creates a table per topic, a thousand on its first round: each
 * creation crossed py4j about twenty-four times, mostly to walk Java objects from Python.
 */
public final class TableShapes {
  private TableShapes() {}

  /** The Iceberg schema of a Spark struct type given as JSON (pyspark's {@code StructType.json()}). */
  public static Schema icebergSchema(String sparkStructJson) {
    return SparkSchemaUtil.convert((StructType) DataType.fromJson(sparkStructJson));
  }

  /** Creates table {@code ident}, with table properties given as a JSON object of strings. */
  public static Table create(
      Catalog catalog, TableIdentifier ident, Schema schema, PartitionSpec spec, String propsJson)
      throws IOException {
    return catalog.createTable(ident, schema, spec, SinkWriter.stringMap(propsJson));
  }

  /**
   * {@code {"schema_id": n, "spark": "<the current schema as a Spark struct type's JSON>", "iceberg":
   * {"<dotted path>": "uuid" | "fixed[L]"}, "parquet": {...}}}, the last as {@link
   * EncodedParquet#layout} gives it for write properties {@code writePropsJson} (a JSON object of
   * strings); without "parquet" when {@code writePropsJson} is null (Iceberg's writer encodes the
   * table's files). "iceberg" names the columns whose type Spark's does not tell (a uuid is a string
   * there, a fixed a binary): their values are checked against it before they are written.
   */
  public static String currentJson(Table table, String writePropsJson) throws IOException {
    Schema schema = table.schema();
    ObjectNode out = JsonUtil.mapper().createObjectNode();
    out.put("schema_id", schema.schemaId());
    out.put("spark", SparkSchemaUtil.convert(schema).json());
    ObjectNode hidden = out.putObject("iceberg");
    hiddenTypes(schema.asStruct(), "", hidden);
    if (writePropsJson != null) {
      out.set("parquet", EncodedParquet.layout(table, schema, SinkWriter.stringMap(writePropsJson)));
    }
    return JsonUtil.mapper().writeValueAsString(out);
  }

  private static void hiddenTypes(Types.StructType struct, String prefix, ObjectNode out) {
    for (Types.NestedField field : struct.fields()) {
      Type type = field.type();
      String path = prefix + field.name();
      if (type.typeId() == Type.TypeID.UUID) {
        out.put(path, "uuid");
      } else if (type.typeId() == Type.TypeID.FIXED) {
        out.put(path, "fixed[" + ((Types.FixedType) type).length() + "]");
      } else if (type.isStructType()) {
        hiddenTypes(type.asStructType(), path + ".", out);
      }
    }
  }
}
