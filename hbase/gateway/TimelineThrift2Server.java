// HBase's Thrift2 gateway with its timeline-consistent reads served by
// HBase's asynchronous client instead of its blocking one. Every other call
// (writes, strong reads, scanners kept open, the admin calls) is HBase's own
// handler's, unchanged.
//
// Why: the blocking client (HBase 2.6) drops a region's cached locations
// whenever the losing call of a timeline read is cancelled, and the next
// read of that region looks them up again in hbase:meta under one lock per
// connection (hbase/README.md, "Timeline reads and the meta holder"). Under
// load that is tens of lookups a second per gateway, each of which fails
// while meta's server is dead. In the asynchronous client a cancelled losing
// call gives up without touching the cache, so a live region's location
// stays cached, and regions are looked up concurrently, with no
// connection-wide lock.
//
// A multi-get is a timeline get per row, all at once (the asynchronous
// client's batch has no timeline logic); a scan asked for its first rows
// (getScannerResults) is the asynchronous client's timeline scan with that
// limit.

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.AdvancedScanResultConsumer;
import org.apache.hadoop.hbase.client.AsyncConnection;
import org.apache.hadoop.hbase.client.AsyncTable;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.security.UserProvider;
import org.apache.hadoop.hbase.thrift.HBaseServiceHandler;
import org.apache.hadoop.hbase.thrift2.ThriftHBaseServiceHandler;
import org.apache.hadoop.hbase.thrift2.ThriftServer;
import org.apache.hadoop.hbase.thrift2.ThriftUtilities;
import org.apache.hadoop.hbase.thrift2.generated.TConsistency;
import org.apache.hadoop.hbase.thrift2.generated.TGet;
import org.apache.hadoop.hbase.thrift2.generated.TIOError;
import org.apache.hadoop.hbase.thrift2.generated.TResult;
import org.apache.hadoop.hbase.thrift2.generated.TScan;
import org.apache.hadoop.util.ToolRunner;
import org.apache.thrift.TException;

public class TimelineThrift2Server extends ThriftServer {
  public TimelineThrift2Server(Configuration conf) {
    super(conf);
  }

  @Override
  protected HBaseServiceHandler createHandler(Configuration conf, UserProvider userProvider) throws IOException {
    return new Handler(conf, userProvider);
  }

  public static void main(String[] args) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    System.exit(ToolRunner.run(conf, new TimelineThrift2Server(conf), args));
  }

  /** HBase's Thrift2 handler, but for its timeline reads. */
  static final class Handler extends ThriftHBaseServiceHandler {
    /** How long a timeline read may take in all, retries included. */
    static final String TIMELINE_READ_TIMEOUT_KEY = "reviews.thrift2.timeline.read.timeout.ms";
    static final int TIMELINE_READ_TIMEOUT_MS = 3_000;

    private final int timelineReadTimeoutMs;
    /**
     * The asynchronous connection: begun at start and awaited by the first
     * timeline read. A gateway may start before the cluster it serves is up,
     * so a connection that failed is begun again by the next read.
     */
    private final AtomicReference<CompletableFuture<AsyncConnection>> connection = new AtomicReference<>();

    Handler(Configuration conf, UserProvider userProvider) throws IOException {
      super(conf, userProvider);
      this.timelineReadTimeoutMs = conf.getInt(TIMELINE_READ_TIMEOUT_KEY, TIMELINE_READ_TIMEOUT_MS);
      CompletableFuture<AsyncConnection> first = new CompletableFuture<>();
      connection.set(first);
      connect(first);
    }

    /** Completes `made` with a new asynchronous connection, or its failure. */
    private void connect(CompletableFuture<AsyncConnection> made) {
      try {
        ConnectionFactory.createAsyncConnection(conf).whenComplete((connected, error) -> {
          if (error == null) {
            made.complete(connected);
          } else {
            made.completeExceptionally(error);
          }
        });
      } catch (RuntimeException e) {
        // Failed before a future existed.
        made.completeExceptionally(e);
      }
    }

    private AsyncConnection async() throws TIOError {
      for (;;) {
        CompletableFuture<AsyncConnection> current = connection.get();
        if (current != null && !current.isCompletedExceptionally()) {
          return await(current);
        }
        CompletableFuture<AsyncConnection> next = new CompletableFuture<>();
        if (connection.compareAndSet(current, next)) {
          connect(next);
          return await(next);
        }
      }
    }

    /**
     * The table, for timeline reads: a get, and each call of a scan, gives up
     * after {@value #TIMELINE_READ_TIMEOUT_KEY} (3 s by default), its retries
     * of a dead primary included. Its caller, query-api, gives up on a read
     * sooner (its HBase deadline), and a read of a dead primary retried for
     * the client's 20 s, as writes are, would keep looking the region up in
     * hbase:meta long after anyone waits for it.
     */
    private AsyncTable<AdvancedScanResultConsumer> table(ByteBuffer name) throws TIOError {
      byte[] bytes = new byte[name.remaining()];
      name.duplicate().get(bytes);
      return async().getTableBuilder(TableName.valueOf(bytes))
        .setOperationTimeout(timelineReadTimeoutMs, TimeUnit.MILLISECONDS)
        .setScanTimeout(timelineReadTimeoutMs, TimeUnit.MILLISECONDS)
        .build();
    }

    @Override
    public TResult get(ByteBuffer table, TGet tget) throws TIOError, TException {
      if (tget.getConsistency() != TConsistency.TIMELINE) {
        return super.get(table, tget);
      }
      return ThriftUtilities.resultFromHBase(await(table(table).get(fromThrift(tget))));
    }

    @Override
    public List<TResult> getMultiple(ByteBuffer table, List<TGet> tgets) throws TIOError, TException {
      if (tgets.stream().noneMatch(tget -> tget.getConsistency() == TConsistency.TIMELINE)) {
        return super.getMultiple(table, tgets);
      }
      AsyncTable<AdvancedScanResultConsumer> async = table(table);
      List<CompletableFuture<Result>> pending = new ArrayList<>(tgets.size());
      for (TGet tget : tgets) {
        pending.add(async.get(fromThrift(tget)));
      }
      Result[] results = new Result[pending.size()];
      for (int i = 0; i < results.length; i++) {
        results[i] = await(pending.get(i));
      }
      return ThriftUtilities.resultsFromHBase(results);
    }

    @Override
    public List<TResult> getScannerResults(ByteBuffer table, TScan tscan, int numRows) throws TIOError, TException {
      if (tscan.getConsistency() != TConsistency.TIMELINE) {
        return super.getScannerResults(table, tscan, numRows);
      }
      if (numRows <= 0) {
        // As HBase's handler answers (its scanner's next(0)); a limit of 0 would mean none.
        return new ArrayList<>();
      }
      Scan scan;
      try {
        scan = ThriftUtilities.scanFromThrift(tscan);
      } catch (IOException e) {
        throw ioError(e);
      }
      if (scan.getLimit() <= 0 || scan.getLimit() > numRows) {
        scan.setLimit(numRows);
      }
      List<Result> rows = await(table(table).scanAll(scan));
      return ThriftUtilities.resultsFromHBase(rows.toArray(new Result[0]));
    }

    private static Get fromThrift(TGet tget) throws TIOError {
      try {
        return ThriftUtilities.getFromThrift(tget);
      } catch (IOException e) {
        throw ioError(e);
      }
    }

    private static <T> T await(CompletableFuture<T> future) throws TIOError {
      try {
        return future.get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw ioError(new IOException("interrupted", e));
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        throw ioError(cause instanceof IOException ? (IOException) cause : new IOException(cause));
      }
    }

    /** The error HBase's own handler answers for `e`. */
    private static TIOError ioError(IOException e) {
      TIOError error = new TIOError();
      error.setMessage(e.getMessage());
      error.setCanRetry(!(e instanceof DoNotRetryIOException));
      // The gateway's metrics classify a failure by its cause.
      error.initCause(e);
      return error;
    }
  }
}
