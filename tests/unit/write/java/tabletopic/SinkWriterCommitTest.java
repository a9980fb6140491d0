package tabletopic;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.exceptions.ValidationException;
import org.junit.jupiter.api.Test;

/**
 * The sink's commit never removes a file that a snapshot may hold: a commit that raised is read back
 * from the metadata before anything it wrote is removed, and the snapshots a commit expires go only
 * once it has landed.
 */
class SinkWriterCommitTest {
  private final TestTables tables = new TestTables();

  /** A round's files resolved to a deletion vector, as CommitDeletes.resolve answers them. */
  private record Round(DataFile data, DeleteFile equality, DeleteFile vector, CommitDeletes.AtCommit resolved) {
    List<ContentFile<?>> files() {
      return List.of(data, equality);
    }
  }

  private Round round(Table table, DataFile older) {
    DataFile data = tables.dataFile(table, 10);
    DeleteFile equality = tables.equalityDeletes(table);
    DeleteFile vector = tables.deletionVector(table, older);
    CommitDeletes.AtCommit resolved =
        new CommitDeletes.AtCommit(
            List.of(data, vector), List.of(), Set.of(), List.of(vector), List.of(equality));
    return new Round(data, equality, vector, resolved);
  }

  private Table withOneFile(DataFile[] older) {
    Table table = tables.create(3);
    older[0] = tables.dataFile(table, 10);
    table.newAppend().appendFile(older[0]).commit();
    return table;
  }

  @Test
  void aCommitThatLandedAndRaisedStandsAndKeepsItsVectors() {
    DataFile[] older = new DataFile[1];
    Table table = withOneFile(older);
    long base = table.currentSnapshot().snapshotId();
    Round round = round(table, older[0]);
    TestTables.FaultyOperations ops = TestTables.faulty(table).refreshFailsOnceAfterCommit();

    long id =
        SinkWriter.commitWith(
            TestTables.through(ops, table), null, round.files(), round.resolved(), Map.of("k", "v"), base, Map.of());

    table.refresh();
    assertEquals(table.currentSnapshot().snapshotId(), id);
    List<String> added = new ArrayList<>();
    table.currentSnapshot().addedDeleteFiles(table.io()).forEach(f -> added.add(f.location()));
    assertEquals(List.of(round.vector().location()), added);
    assertTrue(tables.exists(round.vector().location()), "the landed snapshot's vector was removed");
    assertFalse(tables.exists(round.equality().location()), "the equality deletes it replaced stayed");
  }

  @Test
  void aCommitRefusedByAnotherWritersFilesRemovesTheVectorsItWrote() {
    DataFile[] older = new DataFile[1];
    Table table = withOneFile(older);
    long base = table.currentSnapshot().snapshotId();
    Round round = round(table, older[0]);
    table.newAppend().appendFile(tables.dataFile(table, 1)).commit(); // another writer, after the base

    assertThrows(
        ValidationException.class,
        () ->
            SinkWriter.commitWith(
                table, null, round.files(), round.resolved(), Map.of("k", "v"), base, Map.of()));

    assertFalse(tables.exists(round.vector().location()), "a vector no snapshot holds was left");
    assertTrue(tables.exists(round.equality().location()), "the worker's own file is not the commit's");
  }

  @Test
  void aCommitWhoseFateCannotBeReadLeavesItsVectorsToOrphanRemoval() {
    DataFile[] older = new DataFile[1];
    Table table = withOneFile(older);
    long base = table.currentSnapshot().snapshotId();
    Round round = round(table, older[0]);
    TestTables.FaultyOperations ops = TestTables.faulty(table).downAfterCommit();

    assertThrows(
        IllegalStateException.class,
        () ->
            SinkWriter.commitWith(
                TestTables.through(ops, table),
                null,
                round.files(),
                round.resolved(),
                Map.of("k", "v"),
                base,
                Map.of()));

    assertTrue(tables.exists(round.vector().location()), "a vector was removed with its commit's fate unknown");
  }

  @Test
  void aFileLessCommitThatLandedAndRaisedIsFoundByItsSummary() {
    Table table = tables.create(3);
    table.newAppend().appendFile(tables.dataFile(table, 1)).commit();
    long base = table.currentSnapshot().snapshotId();
    TestTables.FaultyOperations ops = TestTables.faulty(table).refreshFailsOnceAfterCommit();

    long id =
        SinkWriter.commitWith(
            TestTables.through(ops, table), null, List.of(), null, Map.of("commit-id", "c1"), base, Map.of());

    table.refresh();
    assertEquals(table.currentSnapshot().snapshotId(), id);
    assertEquals("c1", table.currentSnapshot().summary().get("commit-id"));
  }

  @Test
  void snapshotsPastTheBoundGoOnlyOnceTheCommitLanded() {
    Table table = tables.create(2);
    DataFile gone = tables.dataFile(table, 1);
    table.newAppend().appendFile(gone).commit();
    table.newDelete().deleteFile(gone).commit(); // from here only the first snapshot holds it
    for (int i = 0; i < 3; i++) {
      table.newAppend().appendFile(tables.dataFile(table, 1)).commit();
    }
    long base = table.currentSnapshot().snapshotId();
    // Another writer commits while the sink's commit is under way: the commit's retry is refused.
    TestTables.FaultyOperations ops =
        TestTables.faulty(table)
            .beforeNextCommit(() -> table.newAppend().appendFile(tables.dataFile(table, 1)).commit());

    // Five snapshots past a bound of 4: a commit would expire all but 2.
    assertThrows(
        ValidationException.class,
        () ->
            SinkWriter.commit(
                TestTables.through(ops, table),
                null,
                List.of(tables.dataFile(table, 1)),
                Map.of(),
                base,
                Map.of(),
                0,
                4));
    table.refresh();
    assertEquals(6, count(table.snapshots()));
    assertTrue(tables.exists(gone.location()), "a refused commit deleted a file its snapshots still hold");

    long head = table.currentSnapshot().snapshotId();
    SinkWriter.commit(table, null, List.of(tables.dataFile(table, 1)), Map.of(), head, Map.of(), 0, 4);
    table.refresh();
    assertEquals(2, count(table.snapshots()));
    assertFalse(tables.exists(gone.location()), "the expired snapshot's own file stayed");
  }

  private static int count(Iterable<Snapshot> snapshots) {
    int n = 0;
    for (Snapshot ignored : snapshots) {
      n++;
    }
    return n;
  }
}
