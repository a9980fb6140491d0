package tabletopic;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;
import org.apache.iceberg.BaseTable;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.encryption.EncryptionManager;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.inmemory.InMemoryCatalog;
import org.apache.iceberg.inmemory.InMemoryFileIO;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.LocationProvider;
import org.apache.iceberg.types.Types;

/** Tables in Iceberg's in-memory catalog, and content files whose bytes its in-memory storage holds. */
final class TestTables {
  static final Schema SCHEMA =
      new Schema(
          Types.NestedField.required(1, "id", Types.LongType.get()),
          Types.NestedField.optional(2, "v", Types.LongType.get()));

  private final InMemoryCatalog catalog = new InMemoryCatalog();
  private final InMemoryFileIO io = new InMemoryFileIO();

  TestTables() {
    catalog.initialize("test", Map.of("warehouse", "mem://warehouse-" + UUID.randomUUID()));
    catalog.createNamespace(Namespace.of("db"));
  }

  /** A new unpartitioned table of format {@code version}, keyed on id. */
  Table create(int version) {
    return catalog.createTable(
        TableIdentifier.of("db", "t" + UUID.randomUUID().toString().replace("-", "")),
        SCHEMA,
        PartitionSpec.unpartitioned(),
        Map.of("format-version", Integer.toString(version)));
  }

  boolean exists(String location) {
    return io.fileExists(location);
  }

  /** A data file of {@code rows} rows, its bytes stored. */
  DataFile dataFile(Table table, long rows) {
    String path = stored(table, "data", ".parquet");
    return DataFiles.builder(table.spec())
        .withPath(path)
        .withFormat(FileFormat.PARQUET)
        .withFileSizeInBytes(bytes(path))
        .withRecordCount(rows)
        .build();
  }

  /** An equality delete file on id, its bytes stored. */
  DeleteFile equalityDeletes(Table table) {
    String path = stored(table, "eq", ".parquet");
    return FileMetadata.deleteFileBuilder(table.spec())
        .ofEqualityDeletes(1)
        .withPath(path)
        .withFormat(FileFormat.PARQUET)
        .withFileSizeInBytes(bytes(path))
        .withRecordCount(1)
        .build();
  }

  /** A deletion vector of one row for {@code data}, in a Puffin file of its own, its bytes stored. */
  DeleteFile deletionVector(Table table, DataFile data) {
    String path = stored(table, "dv", ".puffin");
    return FileMetadata.deleteFileBuilder(table.spec())
        .ofPositionDeletes()
        .withPath(path)
        .withFormat(FileFormat.PUFFIN)
        .withFileSizeInBytes(bytes(path))
        .withRecordCount(1)
        .withReferencedDataFile(data.location())
        .withContentOffset(4)
        .withContentSizeInBytes(8)
        .build();
  }

  private String stored(Table table, String kind, String suffix) {
    String path = table.location() + "/data/" + kind + "-" + UUID.randomUUID() + suffix;
    io.addFile(path, ("bytes of " + path).getBytes(StandardCharsets.UTF_8));
    return path;
  }

  private static long bytes(String path) {
    return ("bytes of " + path).getBytes(StandardCharsets.UTF_8).length;
  }

  /** {@code table} through operations that fail as a catalog may (see {@link FaultyOperations}). */
  static FaultyOperations faulty(Table table) {
    return new FaultyOperations(((HasTableOperations) table).operations());
  }

  static Table through(FaultyOperations ops, Table table) {
    return new BaseTable(ops, table.name());
  }

  /**
   * A catalog's operations that raise where a real one can: when the metadata is read just after a
   * commit landed (a Hadoop table read while another writer removes old metadata files), or instead
   * of a commit, with the catalog gone.
   */
  static final class FaultyOperations implements TableOperations {
    private final TableOperations ops;
    private boolean failNextRefreshAfterCommit = false;
    private boolean refreshFails = false;
    private boolean refuseCommit = false;
    private boolean metadataUnreadable = false;
    private Runnable beforeNextCommit = null;

    FaultyOperations(TableOperations ops) {
      this.ops = ops;
    }

    /** The next commit lands, and the first read of the metadata after it raises. */
    FaultyOperations refreshFailsOnceAfterCommit() {
      failNextRefreshAfterCommit = true;
      return this;
    }

    /** Another writer's commit, made just before the next commit reaches the catalog. */
    FaultyOperations beforeNextCommit(Runnable otherWriter) {
      beforeNextCommit = otherWriter;
      return this;
    }

    /** Every commit raises without landing, and the metadata can no longer be read after it. */
    FaultyOperations downAfterCommit() {
      refuseCommit = true;
      return this;
    }

    @Override
    public TableMetadata current() {
      return ops.current();
    }

    @Override
    public TableMetadata refresh() {
      if (metadataUnreadable) {
        throw new IllegalStateException("catalog down");
      }
      if (refreshFails) {
        refreshFails = false;
        throw new UncheckedIOException(new IOException("the metadata file went while it was read"));
      }
      return ops.refresh();
    }

    @Override
    public void commit(TableMetadata base, TableMetadata metadata) {
      if (refuseCommit) {
        metadataUnreadable = true;
        throw new CommitFailedException("catalog down");
      }
      Runnable other = beforeNextCommit;
      beforeNextCommit = null;
      if (other != null) {
        other.run();
      }
      ops.commit(base, metadata);
      refreshFails = failNextRefreshAfterCommit;
      failNextRefreshAfterCommit = false;
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
    public long newSnapshotId() {
      return ops.newSnapshotId();
    }
  }
}
