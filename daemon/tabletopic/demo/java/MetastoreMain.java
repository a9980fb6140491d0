import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;

/**
 * Hive 2.3's metastore, as the pyspark wheel ships it, with its transaction tables made first.
 *
 * <p>Iceberg's HiveCatalog locks a table in the metastore for each commit, and the lock tables are not
 * among those DataNucleus makes: a metastore installed by hand gets them from Hive's schema scripts,
 * which the wheel lacks. On Derby, {@code TxnDbUtil.prepDb} makes them; on PostgreSQL, the statements
 * below do, with the tables and columns Hive 2.3's transaction handler reads and writes.
 */
public final class MetastoreMain {
  private static final String[] POSTGRES = {
    "CREATE TABLE IF NOT EXISTS TXNS (TXN_ID bigint PRIMARY KEY, TXN_STATE char(1) NOT NULL,"
        + " TXN_STARTED bigint NOT NULL, TXN_LAST_HEARTBEAT bigint NOT NULL, TXN_USER varchar(128) NOT NULL,"
        + " TXN_HOST varchar(128) NOT NULL, TXN_AGENT_INFO varchar(128), TXN_META_INFO varchar(128),"
        + " TXN_HEARTBEAT_COUNT integer)",
    "CREATE TABLE IF NOT EXISTS TXN_COMPONENTS (TC_TXNID bigint REFERENCES TXNS (TXN_ID),"
        + " TC_DATABASE varchar(128) NOT NULL, TC_TABLE varchar(128), TC_PARTITION varchar(767),"
        + " TC_OPERATION_TYPE char(1) NOT NULL)",
    "CREATE TABLE IF NOT EXISTS COMPLETED_TXN_COMPONENTS (CTC_TXNID bigint, CTC_DATABASE varchar(128) NOT NULL,"
        + " CTC_TABLE varchar(256), CTC_PARTITION varchar(767))",
    "CREATE TABLE IF NOT EXISTS NEXT_TXN_ID (NTXN_NEXT bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS HIVE_LOCKS (HL_LOCK_EXT_ID bigint NOT NULL, HL_LOCK_INT_ID bigint NOT NULL,"
        + " HL_TXNID bigint, HL_DB varchar(128) NOT NULL, HL_TABLE varchar(128), HL_PARTITION varchar(767),"
        + " HL_LOCK_STATE char(1) NOT NULL, HL_LOCK_TYPE char(1) NOT NULL, HL_LAST_HEARTBEAT bigint NOT NULL,"
        + " HL_ACQUIRED_AT bigint, HL_USER varchar(128) NOT NULL, HL_HOST varchar(128) NOT NULL,"
        + " HL_HEARTBEAT_COUNT integer, HL_AGENT_INFO varchar(128), HL_BLOCKEDBY_EXT_ID bigint,"
        + " HL_BLOCKEDBY_INT_ID bigint, PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID))",
    "CREATE TABLE IF NOT EXISTS NEXT_LOCK_ID (NL_NEXT bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS COMPACTION_QUEUE (CQ_ID bigint PRIMARY KEY, CQ_DATABASE varchar(128) NOT NULL,"
        + " CQ_TABLE varchar(128) NOT NULL, CQ_PARTITION varchar(767), CQ_STATE char(1) NOT NULL,"
        + " CQ_TYPE char(1) NOT NULL, CQ_TBLPROPERTIES varchar(2048), CQ_WORKER_ID varchar(128), CQ_START bigint,"
        + " CQ_RUN_AS varchar(128), CQ_HIGHEST_TXN_ID bigint, CQ_META_INFO bytea, CQ_HADOOP_JOB_ID varchar(32))",
    "CREATE TABLE IF NOT EXISTS NEXT_COMPACTION_QUEUE_ID (NCQ_NEXT bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS COMPLETED_COMPACTIONS (CC_ID bigint PRIMARY KEY,"
        + " CC_DATABASE varchar(128) NOT NULL, CC_TABLE varchar(128) NOT NULL, CC_PARTITION varchar(767),"
        + " CC_STATE char(1) NOT NULL, CC_TYPE char(1) NOT NULL, CC_TBLPROPERTIES varchar(2048),"
        + " CC_WORKER_ID varchar(128), CC_START bigint, CC_END bigint, CC_RUN_AS varchar(128),"
        + " CC_HIGHEST_TXN_ID bigint, CC_META_INFO bytea, CC_HADOOP_JOB_ID varchar(32))",
    "CREATE TABLE IF NOT EXISTS AUX_TABLE (MT_KEY1 varchar(128) NOT NULL, MT_KEY2 bigint NOT NULL,"
        + " MT_COMMENT varchar(255), PRIMARY KEY (MT_KEY1, MT_KEY2))",
    "CREATE TABLE IF NOT EXISTS WRITE_SET (WS_DATABASE varchar(128) NOT NULL, WS_TABLE varchar(128) NOT NULL,"
        + " WS_PARTITION varchar(767), WS_TXNID bigint NOT NULL, WS_COMMIT_ID bigint NOT NULL,"
        + " WS_OPERATION_TYPE char(1) NOT NULL)",
  };
  private static final String[][] COUNTERS = {
    {"NEXT_TXN_ID", "NTXN_NEXT"}, {"NEXT_LOCK_ID", "NL_NEXT"}, {"NEXT_COMPACTION_QUEUE_ID", "NCQ_NEXT"}
  };

  private MetastoreMain() {}

  public static void main(String[] args) throws Throwable {
    HiveConf conf = new HiveConf();
    String url = conf.get("javax.jdo.option.ConnectionURL");
    if (url.startsWith("jdbc:postgresql:")) {
      try (Connection db = DriverManager.getConnection(url, conf.get("javax.jdo.option.ConnectionUserName"),
              conf.get("javax.jdo.option.ConnectionPassword"));
          Statement statement = db.createStatement()) {
        for (String create : POSTGRES) {
          statement.execute(create);
        }
        for (String[] counter : COUNTERS) {
          try (ResultSet rows = statement.executeQuery("SELECT count(*) FROM " + counter[0])) {
            rows.next();
            if (rows.getLong(1) == 0) {
              statement.execute("INSERT INTO " + counter[0] + " (" + counter[1] + ") VALUES (1)");
            }
          }
        }
      }
    } else {
      TxnDbUtil.prepDb(conf);
    }
    HiveMetaStore.main(args);
  }
}
