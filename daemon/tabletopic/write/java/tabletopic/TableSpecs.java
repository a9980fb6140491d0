package tabletopic;

import java.util.List;
import org.apache.iceberg.PartitionField;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.UpdatePartitionSpec;
import org.apache.iceberg.expressions.Expressions;

/** The partition spec and identifier fields a sink's table needs, added in place. */
public final class TableSpecs {
  private TableSpecs() {}

  /**
   * The id of an unpartitioned spec of {@code table}, adding one if there is none.
   *
   * <p>Upserts write equality deletes in this spec, so that they apply to every partition: a key
   * whose partition value changed (say its day(updated_at)) still has its old row deleted, and the
   * writer never reads the table to find where that row lives. A partitioned table gets the spec by
   * two metadata commits: remove every field (the unpartitioned spec is added), then add them back
   * (Iceberg reuses the original spec id, which is the default again).
   */
  public static int ensureUnpartitionedSpec(Table table) {
    for (PartitionSpec spec : table.specs().values()) {
      if (spec.isUnpartitioned()) {
        return spec.specId();
      }
    }
    PartitionSpec original = table.spec();
    Schema schema = table.schema();
    UpdatePartitionSpec removeAll = table.updateSpec();
    for (PartitionField field : original.fields()) {
      removeAll.removeField(field.name());
    }
    removeAll.commit();
    UpdatePartitionSpec restore = table.updateSpec();
    for (PartitionField field : original.fields()) {
      String source = schema.findColumnName(field.sourceId());
      restore.addField(field.name(), Expressions.transform(source, field.transform()));
    }
    restore.commit();
    table.refresh();
    return ensureUnpartitionedSpec(table);
  }

  /** Sets {@code columns} as the table's identifier fields (they must be required columns). */
  public static void setIdentifierFields(Table table, List<String> columns) {
    table.updateSchema().setIdentifierFields(columns).commit();
    table.refresh();
  }
}
