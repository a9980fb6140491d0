package tabletopic;

import org.apache.iceberg.BaseTable;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.Transaction;
import org.apache.iceberg.Transactions;
import org.apache.iceberg.encryption.EncryptionManager;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.LocationProvider;

/**
 * A table's operations that, once a commit through them succeeded, answer {@link #current} with
 * the metadata they committed instead of reading it back.
 *
 * <p>A transaction, once committed, looks up the manifests of the snapshots it added, to keep them
 * from the clean-up of files its operations replaced. It asks {@link #current} for them, and a
 * catalog's operations then read the metadata file just written and each new snapshot's manifest
 * list again: with a table per topic, about a quarter of a commit's time went there (JFR, 1,000
 * tables). The metadata committed holds the same snapshots, whose manifests the snapshot's own
 * commit has already read. A {@link #refresh} (a retry) forgets it and reads again.
 */
final class CommittedOperations implements TableOperations {
  private final TableOperations ops;
  private TableMetadata committed;

  private CommittedOperations(TableOperations ops) {
    this.ops = ops;
  }

  /** A transaction on {@code table}, reporting as the table's own do. */
  static Transaction newTransaction(Table table) {
    if (!(table instanceof BaseTable)) {
      return table.newTransaction();
    }
    BaseTable base = (BaseTable) table;
    return Transactions.newTransaction(
        base.name(), new CommittedOperations(((HasTableOperations) table).operations()), base.reporter());
  }

  @Override
  public TableMetadata current() {
    return committed != null ? committed : ops.current();
  }

  @Override
  public TableMetadata refresh() {
    committed = null;
    return ops.refresh();
  }

  @Override
  public void commit(TableMetadata base, TableMetadata metadata) {
    committed = null;
    ops.commit(base, metadata);
    committed = metadata;
  }

  @Override
  public FileIO io() {
    return ops.io();
  }

  @Override
  public EncryptionManager encryption() {
    return ops.encryption();
  }

  @Override
  public String metadataFileLocation(String fileName) {
    return ops.metadataFileLocation(fileName);
  }

  @Override
  public LocationProvider locationProvider() {
    return ops.locationProvider();
  }

  @Override
  public TableOperations temp(TableMetadata uncommittedMetadata) {
    return ops.temp(uncommittedMetadata);
  }

  @Override
  public long newSnapshotId() {
    return ops.newSnapshotId();
  }

  @Override
  public boolean requireStrictCleanup() {
    return ops.requireStrictCleanup();
  }
}
