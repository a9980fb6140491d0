package tabletopic;

import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.exceptions.CommitStateUnknownException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors;
import org.apache.iceberg.util.JsonUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sink's commits: a round's files, deletes and source offsets as one snapshot, called through py4j.
 *
 * <p>Why a compiled class rather than Spark's DataFrame writer: a sink has to put data files,
 * equality-delete files and its source offsets into ONE snapshot, and has to refuse that commit
 * when another writer moved the table on. Spark's writer commits by itself, and its only
 * non-committing path is an internal rewrite hook. Here the executors only write files
 * (Parquet.writeData / writeDeletes through SparkParquetWriters, all public Iceberg API) and the
 * driver commits one RowDelta that carries the offsets in its summary and validates against the
 * snapshot the offsets were read from.
 */
public final class SinkWriter {
  private static final Logger LOG = LoggerFactory.getLogger(SinkWriter.class);

  /**
   * Runs a commit's manifest work in the committing thread. Iceberg hands that work (a few small
   * manifests for a sink's commit) to its worker pool and polls for it every 10 ms: three or four
   * polls were most of a commit's time, about 30 ms of a 40 ms commit, idle. Commits of many tables
   * run side by side on the coordinator's own threads instead. A scan's planning over several
   * manifests polls the same way, and is run here too.
   */
  static final ExecutorService IN_THIS_THREAD = MoreExecutors.newDirectExecutorService();

  private SinkWriter() {}

  /**
   * Commits files and summary properties as one snapshot on {@code branch} (null for main).
   *
   * <p>With {@code positionsUpToRows > 0}, a commit to main whose search reads at most that many
   * rows carries position deletes in place of its equality deletes (see {@link
   * CommitDeletes#resolve}): readers then never meet them. If the rows cannot be found, or
   * the table changed under them before the commit, the equality deletes go in as they are.
   *
   * <p>With {@code maxSnapshots > 0}, a commit to main that leaves more snapshots than that expires
   * the oldest once it has landed, down to half of it: each snapshot is a part of the metadata file
   * every commit rewrites. A reader sees at most {@code maxSnapshots + 1}, between the two commits. The expiry is a commit of its own, whose clean-up runs only once it
   * landed; in the sink's transaction, a transaction that failed would have deleted the files of the
   * snapshots it meant to expire, which stayed in the table.
   */
  public static long commit(
      Table table,
      String branch,
      List<ContentFile<?>> files,
      Map<String, String> summary,
      long baseSnapshotId,
      Map<String, String> tableProps,
      long positionsUpToRows,
      int maxSnapshots) {
    int retain = branch == null ? expiryRetains(table, maxSnapshots) : 0;
    CommitDeletes.AtCommit resolved = null;
    if (positionsUpToRows > 0 && branch == null) {
      try {
        resolved = CommitDeletes.resolve(table, files, positionsUpToRows);
      } catch (RuntimeException | IOException e) {
        // Reading the table for positions is an optimisation: a failure of it must not stop the
        // commit, which is tried with the equality deletes (and fails there if storage is down).
        LOG.warn("commit to {} carries its equality deletes: finding their rows failed", table.name(), e);
      }
    }
    long id = commitWith(table, branch, files, resolved, summary, baseSnapshotId, tableProps);
    if (retain > 0) {
      expireOldest(table, retain);
    }
    return id;
  }

  /**
   * How many snapshots an expiry after the commit keeps: half of {@code maxSnapshots} when the commit
   * leaves more than that (it adds one to those counted here); 0: no expiry.
   */
  private static int expiryRetains(Table table, int maxSnapshots) {
    if (maxSnapshots <= 0) {
      return 0;
    }
    int count = 0;
    for (Snapshot ignored : table.snapshots()) {
      count++;
    }
    return count + 1 > maxSnapshots ? Math.max(1, maxSnapshots / 2) : 0;
  }

  /**
   * Expires every snapshot of main older than its newest {@code retain} (other refs keep theirs).
   * Iceberg deletes the files they alone reference once the expiry has landed. A failure leaves the
   * snapshots for the next commit: the one that landed stands.
   */
  private static void expireOldest(Table table, int retain) {
    try {
      table.expireSnapshots().expireOlderThan(Long.MAX_VALUE).retainLast(retain).commit();
    } catch (RuntimeException e) {
      LOG.warn("expiring the oldest snapshots of {} failed; the next commit tries again", table.name(), e);
    }
  }

  /**
   * Commits {@code resolved} (see {@link CommitDeletes#resolve}) if it is not null, else
   * {@code files}. With {@code baseSnapshotId >= 0}, the commit fails with a ValidationException
   * if any data or delete file was added after that snapshot; with -1 (an empty table) if any was
   * added at all. Iceberg re-runs this validation on every internal retry, so a writer that loses a
   * race can never commit on top of the winner. Returns the new snapshot id.
   *
   * <p>A resolved commit is also validated against the data files its position deletes name: if
   * one was replaced since they were found, it is made again from {@code files}, whose equality
   * deletes apply to the rewritten rows as well (a rewrite keeps its starting sequence number).
   *
   * <p>A commit that raises is read back from the table's metadata ({@link CommitLanding}): if it
   * landed all the same, its snapshot is the answer; the position deletes written for a resolved
   * commit are removed only when it did not.
   *
   * <p>{@code tableProps} are set in the same metadata commit (a transaction), so they can never
   * disagree with the snapshot: the sink mirrors its offsets there, where someone else's
   * snapshot expiry cannot remove them.
   */
  public static long commitWith(
      Table table,
      String branch,
      List<ContentFile<?>> files,
      CommitDeletes.AtCommit resolved,
      Map<String, String> summary,
      long baseSnapshotId,
      Map<String, String> tableProps) {
    if (resolved != null) {
      try {
        long id = commitOnce(table, branch, resolved, resolved.files(), summary, baseSnapshotId, tableProps);
        resolved.dropReplaced(table);
        return id;
      } catch (CommitStateUnknownException e) {
        throw e; // the files may be in the table now: orphan removal decides later, from the metadata
      } catch (RuntimeException e) {
        CommitLanding.Found found = CommitLanding.find(table, branch, baseSnapshotId, resolved.files(), summary);
        if (found.landed()) {
          LOG.warn("commit to {} raised, but landed as snapshot {}: it stands", table.name(), found.snapshotId(), e);
          resolved.dropReplaced(table);
          return found.snapshotId();
        }
        CommitLanding.removeUnlanded(table, found, resolved.written(), "a commit carrying position deletes");
        if (!(e instanceof ValidationException) && !(e instanceof IllegalArgumentException)) {
          throw e;
        }
        // Replaced under the positions, or the table went from v2 to v3 since they were written (it
        // then refuses position delete files): the equality deletes need neither.
      }
    }
    try {
      return commitOnce(table, branch, null, files, summary, baseSnapshotId, tableProps);
    } catch (CommitStateUnknownException e) {
      throw e;
    } catch (RuntimeException e) {
      CommitLanding.Found found = CommitLanding.find(table, branch, baseSnapshotId, files, summary);
      if (found.landed()) {
        LOG.warn("commit to {} raised, but landed as snapshot {}: it stands", table.name(), found.snapshotId(), e);
        return found.snapshotId();
      }
      throw e;
    }
  }

  private static long commitOnce(
      Table table,
      String branch,
      CommitDeletes.AtCommit resolved,
      List<ContentFile<?>> files,
      Map<String, String> summary,
      long baseSnapshotId,
      Map<String, String> tableProps) {
    Transaction txn = CommittedOperations.newTransaction(table);
    RowDelta delta = txn.newRowDelta().scanManifestsWith(IN_THIS_THREAD);
    for (ContentFile<?> file : files) {
      if (file instanceof DataFile) {
        delta.addRows((DataFile) file);
      } else {
        delta.addDeletes((DeleteFile) file);
      }
    }
    summary.forEach(delta::set);
    if (branch != null) {
      delta.toBranch(branch);
    }
    if (baseSnapshotId >= 0) {
      delta.validateFromSnapshot(baseSnapshotId);
    }
    delta.conflictDetectionFilter(Expressions.alwaysTrue());
    delta.validateNoConflictingDataFiles();
    delta.validateNoConflictingDeleteFiles();
    if (resolved != null) {
      resolved.merged().forEach(delta::removeDeletes);
      if (!resolved.named().isEmpty()) {
        // A replace (compaction) since the base is no conflict for equality deletes, but it is one
        // for positions in the files it replaced; a delete of them too.
        delta.validateDataFilesExist(resolved.named());
        delta.validateDeletedFiles();
      }
    }
    delta.commit();
    if (!tableProps.isEmpty()) {
      org.apache.iceberg.UpdateProperties props = txn.updateProperties();
      tableProps.forEach(props::set);
      props.commit();
    }
    // On a conflict the transaction re-applies the RowDelta to fresh metadata, validation included.
    txn.commitTransaction();
    // The transaction's own view: the table's head may already be a later writer's snapshot.
    Table committed = txn.table();
    long id = (branch == null ? committed.currentSnapshot() : committed.snapshot(branch)).snapshotId();
    table.refresh();
    return id;
  }

  /**
   * {@link #commit(Table, String, List, Map, long, Map, long, int)} with the files as the content
   * files' JSON array (see {@link #filesFromJson}), and the summary and the table properties as JSON
   * objects of strings: a Python dict crosses py4j one entry per call, a string in one. Answers, as a JSON object, what the caller reports of the commit: the new snapshot's
   * {@code id} and {@code summary}, and the {@code files} and data {@code records} committed. Each
   * was one more py4j call a commit, and with a table per topic a round makes thousands.
   */
  public static String commitJson(
      Table table,
      String branch,
      String filesJson,
      String summaryJson,
      long baseSnapshotId,
      String tablePropsJson,
      long positionsUpToRows,
      int maxSnapshots)
      throws IOException {
    List<ContentFile<?>> files = ContentFiles.filesFromJson(table, filesJson);
    long id =
        commit(
            table,
            branch,
            files,
            stringMap(summaryJson),
            baseSnapshotId,
            stringMap(tablePropsJson),
            positionsUpToRows,
            maxSnapshots);
    Map<String, Object> report = new HashMap<>();
    report.put("id", id);
    report.put("summary", table.snapshot(id).summary());
    report.put("files", files.size());
    report.put("records", ContentFiles.recordCount(files, false));
    return JsonUtil.mapper().writeValueAsString(report);
  }

  /** A JSON object of strings, as the Python side sends a dict in one py4j call. */
  static Map<String, String> stringMap(String json) throws IOException {
    Map<String, String> map = new HashMap<>();
    JsonUtil.mapper().readTree(json).fields().forEachRemaining(e -> map.put(e.getKey(), e.getValue().asText()));
    return map;
  }
}
