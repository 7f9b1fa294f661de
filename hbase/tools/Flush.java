// hbasectl flush: writes the memstores of the user tables whose names start
// with a prefix to store files, through HBase's own Admin API, and returns
// once each table's flush has completed.
//
// Why a load is flushed before a crash test: a region replica opened on a
// new server after a crash serves only what its primary has flushed, so
// rows loaded seconds earlier and never flushed read as missing there until
// the primary flushes. A shop's reviews are months old and long flushed; a
// test that kills a server right after loading would otherwise measure only
// the rows written in the last minute.
//
// Compiled by hbasectl at its first run and run on HBase's classpath
// (hbase-site.xml first): java -cp CONF:CLASSES:JARS Flush [PREFIX].

import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;

public class Flush {
  public static void main(String[] args) throws Exception {
    String prefix = args.length > 0 ? args[0] : "";
    int flushed = 0;
    try (Connection connection = ConnectionFactory.createConnection(HBaseConfiguration.create());
        Admin admin = connection.getAdmin()) {
      for (TableName table : admin.listTableNames()) {
        if (table.getNameAsString().startsWith(prefix)) {
          admin.flush(table);
          System.out.println("flushed " + table.getNameAsString());
          flushed++;
        }
      }
    }
    if (flushed == 0) {
      System.err.println("no table's name starts with '" + prefix + "'");
      System.exit(1);
    }
  }
}
