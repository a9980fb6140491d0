package tabletopic;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.SnapshotRef;
import org.apache.iceberg.Table;
import org.apache.iceberg.util.JsonUtil;

/**
 * A table's head and snapshot summaries, read for the offsets they record: each answer is one py4j
 * call, where reading the same through the Table's own methods took one per value.
 */
public final class TableHeads {
  private TableHeads() {}

  /**
   * Refreshes {@code table} and answers its head on {@code branch} (null for main) as a JSON object:
   * the snapshot's {@code id} (-1 when there is none) and its {@code summary}, in one py4j call where
   * a commit took three.
   */
  public static String refreshedHeadJson(Table table, String branch) throws IOException {
    table.refresh();
    long id = headSnapshotId(table, branch);
    Map<String, Object> head = new HashMap<>();
    head.put("id", id);
    head.put("summary", id < 0 ? null : table.snapshot(id).summary());
    return JsonUtil.mapper().writeValueAsString(head);
  }

  /**
   * The summary of snapshot {@code snapshotId} as a JSON object, or null when the table has no such
   * snapshot (expired): one py4j call where reading it key by key took one per key.
   */
  public static String summaryJson(Table table, long snapshotId) throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    return snapshot == null ? null : JsonUtil.mapper().writeValueAsString(snapshot.summary());
  }

  /** The id of the head snapshot of {@code branch} (null for main), or -1 when there is none. */
  public static long headSnapshotId(Table table, String branch) {
    SnapshotRef ref = table.refs().get(branch == null ? SnapshotRef.MAIN_BRANCH : branch);
    return ref == null ? -1L : ref.snapshotId();
  }
}
