package tabletopic;

import java.nio.ByteBuffer;
import java.util.List;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructType;

/**
 * Shows a Spark InternalRow to Iceberg's PartitionKey in Iceberg's own value classes.
 *
 * <p>Iceberg's equivalent lives package-private in its Spark module, so the partition transforms
 * get their inputs here: strings as CharSequence, decimals as BigDecimal, binary as ByteBuffer.
 * Dates and timestamps already share Iceberg's representation (days and microseconds).
 */
final class SparkRowPartition implements StructLike {
  private final DataType[] sparkTypes;
  private final Type[] icebergTypes;
  private InternalRow row;

  SparkRowPartition(StructType sparkSchema, Types.StructType icebergSchema) {
    List<Types.NestedField> fields = icebergSchema.fields();
    this.sparkTypes = new DataType[fields.size()];
    this.icebergTypes = new Type[fields.size()];
    for (int i = 0; i < fields.size(); i++) {
      sparkTypes[i] = sparkSchema.fields()[i].dataType();
      icebergTypes[i] = fields.get(i).type();
    }
  }

  SparkRowPartition wrap(InternalRow newRow) {
    this.row = newRow;
    return this;
  }

  @Override
  public int size() {
    return sparkTypes.length;
  }

  @Override
  public <T> T get(int pos, Class<T> javaClass) {
    if (row.isNullAt(pos)) {
      return null;
    }
    Object value = row.get(pos, sparkTypes[pos]);
    switch (icebergTypes[pos].typeId()) {
      case STRING:
        return javaClass.cast(value.toString());
      case DECIMAL:
        return javaClass.cast(((Decimal) value).toJavaBigDecimal());
      case BINARY:
      case FIXED:
        return javaClass.cast(ByteBuffer.wrap((byte[]) value));
      case UUID:
        return javaClass.cast(java.util.UUID.fromString(value.toString()));
      case STRUCT:
        // Partition sources are primitives; a nested source is read from its own column.
        throw new UnsupportedOperationException("partition source inside a struct is not supported");
      default:
        if (sparkTypes[pos] instanceof DecimalType) {
          return javaClass.cast(((Decimal) value).toJavaBigDecimal());
        }
        return javaClass.cast(value);
    }
  }

  @Override
  public <T> void set(int pos, T value) {
    throw new UnsupportedOperationException("read-only view of a Spark row");
  }
}
