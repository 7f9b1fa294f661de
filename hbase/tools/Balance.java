// hbasectl balance: has the master's balancer bring the cluster to balance
// now, through HBase's own Admin API, and returns once a balancer run finds
// nothing to move (or says what it last found after the timeout, and exits 1).
//
// Why a crash test asks for it: a region server started again after its
// crash holds nothing, and the master's balancer chore (every 5 minutes)
// moves regions back to it whenever it next runs. Asked at once, the moves
// happen while the restart that caused them is being measured, not in
// whatever is measured next.
//
// One request is not enough: the master refuses to balance while a region
// is in transition (the chore may be moving regions already) or a dead
// server is being processed, and a run moves regions one at a time within
// a time budget, so it may stop short. So the request is repeated, once
// nothing is in transition, until a run finds no move worth making. The
// master answers a request only once it has started its last move, 10 to
// 20 s for a restarted server's share: so a request may take a minute, and
// one that times out all the same, or a failed look at the cluster, is
// asked again (the moves go on at the master).
//
// Compiled by hbasectl at its first run and run on HBase's classpath
// (hbase-site.xml first): java -cp CONF:CLASSES:JARS Balance [TIMEOUT_SECS].

import java.util.List;
import java.util.stream.Collectors;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BalanceRequest;
import org.apache.hadoop.hbase.client.BalanceResponse;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;

public class Balance {
  public static void main(String[] args) throws Exception {
    long timeoutMs = 1000L * (args.length > 0 ? Integer.parseInt(args[0]) : 120);
    long deadline = System.currentTimeMillis() + timeoutMs;
    int runs = 0;
    String last = "no balancer run yet";
    Configuration conf = HBaseConfiguration.create();
    conf.setInt("hbase.rpc.timeout", 60_000);
    conf.setInt("hbase.client.operation.timeout", 60_000);
    try (Connection connection = ConnectionFactory.createConnection(conf);
        Admin admin = connection.getAdmin()) {
      String before = regionsPerServer(admin);
      while (System.currentTimeMillis() < deadline) {
        int inTransition;
        try {
          inTransition = admin.getClusterMetrics().getRegionStatesInTransition().size();
        } catch (IOException e) {
          last = "the last look at the cluster failed: " + e;
          Thread.sleep(250);
          continue;
        }
        if (inTransition > 0) {
          last = inTransition + " region(s) in transition";
          Thread.sleep(250);
          continue;
        }
        BalanceResponse response;
        try {
          response = admin.balance(BalanceRequest.defaultInstance());
        } catch (IOException e) {
          last = "the last request failed: " + e;
          Thread.sleep(250);
          continue;
        }
        if (!response.isBalancerRan()) {
          last = "the master did not run the balancer (a region in transition, a dead server being processed, or the balancer off)";
          Thread.sleep(250);
          continue;
        }
        runs++;
        if (response.getMovesCalculated() == 0) {
          System.out.println("balanced after " + runs + " balancer run(s): regions per server "
              + before + " before, " + regionsPerServer(admin) + " after");
          return;
        }
        last = "the last run moved " + response.getMovesExecuted() + " of " + response.getMovesCalculated();
        // A run whose moves failed (or a master in maintenance) leaves
        // nothing in transition: without a pause the plan would be
        // computed again at once, over and over.
        Thread.sleep(250);
      }
    }
    System.out.println("not balanced after " + timeoutMs / 1000 + " s: " + last);
    System.exit(1);
  }

  /**
   * How many region replicas each live server holds, fewest first (a run
   * may move many while the master answers the request late: the client
   * retries it, and the retry finds nothing left to move).
   */
  static String regionsPerServer(Admin admin) {
    try {
      List<Integer> counts = admin.getClusterMetrics().getLiveServerMetrics().values().stream()
          .map(server -> server.getRegionMetrics().size()).sorted().collect(Collectors.toList());
      return counts.toString();
    } catch (IOException e) {
      return "(unknown: " + e.getMessage() + ")";
    }
  }
}
