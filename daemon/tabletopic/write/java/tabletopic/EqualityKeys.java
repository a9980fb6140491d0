package tabletopic;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.expressions.Expression;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.types.Comparators;
import org.apache.iceberg.types.Conversions;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.TypeUtil;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.StructLikeMap;

/**
 * The keys of a set of equality delete files, indexed so that finding the rows they delete in a data
 * file costs one lookup per row, however many deletes apply to the file.
 *
 * <p>Each delete file is known by an index, given in the order they are loaded. Deletes with the same
 * equality fields share one map (a {@link Shape}): key -> the indexes of the deletes holding it.
 */
final class EqualityKeys {
  private final Table table;
  private final List<Shape> shapes = new ArrayList<>();
  private int loaded = 0;

  EqualityKeys(Table table) {
    this.table = table;
  }

  /** How many delete files were loaded: the next one gets this index. */
  int size() {
    return loaded;
  }

  /**
   * The equality fields of {@code delete} as a projection of the current schema, or null when they
   * are not all primitive columns of it (such a delete is not converted).
   */
  Schema keySchema(DeleteFile delete) {
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

  /** The shape for {@code keySchema}, made the first time it is asked for. */
  Shape shape(Schema keySchema) {
    for (Shape known : shapes) {
      if (known.schema.sameSchema(keySchema)) {
        return known;
      }
    }
    Shape shape = new Shape(keySchema);
    shapes.add(shape);
    return shape;
  }

  /** Reads the keys of {@code delete} into {@code shape}; returns the index it holds them under. */
  int load(DeleteFile delete, Shape shape) throws IOException {
    int index = loaded++;
    try (CloseableIterable<Record> rows = read(table, delete.location(), shape.schema)) {
      for (Record row : rows) {
        shape.add(row, index);
      }
    }
    return index;
  }

  /** Where a data file's column bounds must reach for it to hold any key loaded. */
  Expression range() {
    Expression range = Expressions.alwaysFalse();
    for (Shape shape : shapes) {
      range = Expressions.or(range, shape.range());
    }
    return range;
  }

  /**
   * Where a data file's column bounds must reach for it to hold a key of {@code deletes}, read from
   * the delete files' own statistics, before any key is read. A delete file's bound on a column is
   * used only where it is an int, long or string column of the table's top level and the file
   * holds no null in it (a null key is outside any range); elsewhere that column does not narrow.
   */
  static Expression declaredRange(Schema schema, List<DeleteFile> deletes) {
    Expression range = Expressions.alwaysFalse();
    for (DeleteFile delete : deletes) {
      Expression one = Expressions.alwaysTrue();
      for (int id : delete.equalityFieldIds()) {
        Types.NestedField column = schema.asStruct().field(id);
        Type.TypeID type = column == null ? null : column.type().typeId();
        if (type != Type.TypeID.INTEGER && type != Type.TypeID.LONG && type != Type.TypeID.STRING) {
          continue;
        }
        ByteBuffer lower = delete.lowerBounds() == null ? null : delete.lowerBounds().get(id);
        ByteBuffer upper = delete.upperBounds() == null ? null : delete.upperBounds().get(id);
        Long nulls = delete.nullValueCounts() == null ? null : delete.nullValueCounts().get(id);
        if (lower == null || upper == null || nulls == null || nulls != 0) {
          continue;
        }
        Object least = Conversions.fromByteBuffer(column.type(), lower);
        Object greatest = Conversions.fromByteBuffer(column.type(), upper);
        one =
            Expressions.and(
                one,
                Expressions.and(
                    Expressions.greaterThanOrEqual(column.name(), plain(least)),
                    Expressions.lessThanOrEqual(column.name(), plain(greatest))));
      }
      range = Expressions.or(range, one);
    }
    return range;
  }

  private static Object plain(Object value) {
    return value instanceof CharSequence ? value.toString() : value;
  }

  /** The positions of {@code file}'s rows whose key a delete in {@code applying} holds, in file order per shape. */
  long[] matches(DataFile file, BitSet applying) throws IOException {
    long[] found = new long[16];
    int n = 0;
    for (Shape shape : shapes) {
      long position = 0;
      try (CloseableIterable<Record> rows = read(table, file.location(), shape.schema)) {
        for (Record row : rows) {
          if (shape.heldBy(row, applying)) {
            if (n == found.length) {
              found = Arrays.copyOf(found, n * 2);
            }
            found[n++] = position;
          }
          position++;
        }
      }
    }
    return Arrays.copyOf(found, n);
  }

  static CloseableIterable<Record> read(Table table, String path, Schema projection) {
    // No filter, so no row group is skipped and the n-th row read is the file's position n.
    return Parquet.read(table.io().newInputFile(path))
        .project(projection)
        .createReaderFunc(fileSchema -> GenericParquetReaders.buildReader(projection, fileSchema))
        .build();
  }

  /** The keys of the equality deletes with one set of equality fields. */
  static final class Shape {
    final Schema schema;
    private final StructLikeMap<int[]> holders; // key -> indexes of the equality deletes holding it
    // Per column of the key, the least and greatest key held, where its type has bounds that data
    // files' statistics keep and Expressions take as they are read (ints, longs, strings); no
    // comparator where it has not, and unbounded once a key is null.
    private final List<Comparator<Object>> order = new ArrayList<>();
    private final Object[] least;
    private final Object[] greatest;
    private final boolean[] unbounded;

    Shape(Schema schema) {
      this.schema = schema;
      this.holders = StructLikeMap.create(schema.asStruct());
      List<Types.NestedField> columns = schema.columns();
      for (Types.NestedField column : columns) {
        Type.TypeID type = column.type().typeId();
        boolean comparable =
            type == Type.TypeID.INTEGER || type == Type.TypeID.LONG || type == Type.TypeID.STRING;
        order.add(comparable ? Comparators.forType(column.type().asPrimitiveType()) : null);
      }
      this.least = new Object[columns.size()];
      this.greatest = new Object[columns.size()];
      this.unbounded = new boolean[columns.size()];
    }

    void add(Record key, int index) {
      int[] known = holders.get(key);
      if (known == null) {
        holders.put(key.copy(), new int[] {index});
        widen(key);
      } else if (known[known.length - 1] != index) {
        int[] more = Arrays.copyOf(known, known.length + 1);
        more[known.length] = index;
        holders.put(key, more);
      }
    }

    boolean heldBy(Record row, BitSet applying) {
      int[] indexes = holders.get(row);
      if (indexes != null) {
        for (int index : indexes) {
          if (applying.get(index)) {
            return true;
          }
        }
      }
      return false;
    }

    private void widen(Record key) {
      for (int i = 0; i < least.length; i++) {
        Object value = key.get(i);
        if (value == null) {
          unbounded[i] = true;
        } else if (order.get(i) != null) {
          if (least[i] == null || order.get(i).compare(value, least[i]) < 0) {
            least[i] = value instanceof CharSequence ? value.toString() : value;
          }
          if (greatest[i] == null || order.get(i).compare(value, greatest[i]) > 0) {
            greatest[i] = value instanceof CharSequence ? value.toString() : value;
          }
        }
      }
    }

    private Expression range() {
      Expression range = Expressions.alwaysTrue();
      List<Types.NestedField> columns = schema.columns();
      for (int i = 0; i < least.length; i++) {
        if (least[i] != null && !unbounded[i]) {
          String name = columns.get(i).name();
          range =
              Expressions.and(
                  range,
                  Expressions.and(
                      Expressions.greaterThanOrEqual(name, least[i]),
                      Expressions.lessThanOrEqual(name, greatest[i])));
        }
      }
      return range;
    }
  }
}
