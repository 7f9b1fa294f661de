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
//
// A region with a replica on a server that refuses connections is read from
// one of its other replicas alone (DownServers). The client asks the primary
// first on every timeline read, and a failed call drops the region's
// location, so while a server is dead each read of its regions looks them up
// in hbase:meta again, is told the same server and fails there again, until
// HBase has reopened them elsewhere (hbase/README.md gives what that cost).
//
// A timeline read of a region whose locations the client has not cached
// also asks the first secondary by its replica id (SecondaryHedge): the
// client's own timeline read asks the secondaries only after looking the
// region up in hbase:meta, and that lookup fails for as long as a moving
// primary is assigned nowhere, so the read waits for the primary's new home.

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.AdvancedScanResultConsumer;
import org.apache.hadoop.hbase.client.AsyncConnection;
import org.apache.hadoop.hbase.client.AsyncTable;
import org.apache.hadoop.hbase.client.AsyncTableRegionLocator;
import org.apache.hadoop.hbase.client.Consistency;
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
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.util.ToolRunner;
import org.apache.hbase.thirdparty.com.google.common.util.concurrent.RateLimiter;
import org.apache.thrift.TException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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

    /** Timeline reads slower than this are logged ({@link SlowReads}). */
    static final String SLOW_READ_KEY = "reviews.thrift2.slow.read.ms";
    static final int SLOW_READ_MS = 1_000;
    /** How often a table still seen replicated has its time in {@link #replicatedSeenNs} renewed. */
    private static final long REPLICATED_REFRESH_NS = TimeUnit.SECONDS.toNanos(1);

    private final int timelineReadTimeoutMs;
    private final SlowReads slowReads;
    /**
     * The asynchronous connection: begun at start and awaited by the first
     * timeline read. A gateway may start before the cluster it serves is up,
     * so a connection that failed is begun again by the next read.
     */
    private final AtomicReference<CompletableFuture<AsyncConnection>> connection = new AtomicReference<>();
    private final DownServers downServers = new DownServers();
    /**
     * When each table's regions were last seen cached with more than one
     * replica (System.nanoTime, refreshed at most once a second): a table is
     * read as replicated ({@link #hedged}) until a minute after, so one
     * whose replicas were dropped is forgotten. Not at the first region
     * seen cached with its primary alone: the client may cache a region
     * without a secondary it finds no server for, as while a dead server's
     * secondaries are reassigned, when the second read matters most.
     */
    private final ConcurrentHashMap<TableName, Long> replicatedSeenNs = new ConcurrentHashMap<>();
    /** HBase's own waits before a timeline get, and a scan, ask the secondaries (microseconds). */
    private final long getHedgeAfterMicros;
    private final long scanHedgeAfterMicros;

    Handler(Configuration conf, UserProvider userProvider) throws IOException {
      super(conf, userProvider);
      this.timelineReadTimeoutMs = conf.getInt(TIMELINE_READ_TIMEOUT_KEY, TIMELINE_READ_TIMEOUT_MS);
      this.slowReads = new SlowReads(conf.getInt(SLOW_READ_KEY, SLOW_READ_MS));
      // HBase's defaults: 10 ms for a get, 1 s for a scan.
      this.getHedgeAfterMicros = conf.getLong("hbase.client.primaryCallTimeout.get", 10_000);
      this.scanHedgeAfterMicros = conf.getLong("hbase.client.replicaCallTimeout.scan", 1_000_000);
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
     * the client's 30 s, as writes are, would keep looking the region up in
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

    /**
     * A timeline get: from one replica alone when a server of the region's
     * replicas is down ({@link DownServers#replicaToRead}), otherwise the
     * client's (the primary, then the secondaries too if it is slow). An
     * answer from a secondary has the primary's server probed. A strong get
     * (a multi-get may mix them) is the client's.
     */
    private CompletableFuture<Result> timelineGet(AsyncTable<?> table, Get get) {
      if (get.getConsistency() != Consistency.TIMELINE || get.getReplicaId() >= 0) {
        return table.get(get);
      }
      long startedNs = System.nanoTime();
      AsyncTableRegionLocator locator = table.getRegionLocator();
      List<HRegionLocation> replicas = cachedReplicas(locator, get.getRow());
      int replica = downServers.replicaToRead(locator, replicas);
      CompletableFuture<Result> read;
      try {
        if (replica >= 0) {
          read = table.get(get.setReplicaId(replica));
        } else if (hedged(table.getName(), replicas)) {
          Get toSecondary = new Get(get).setReplicaId(1);
          read = SecondaryHedge.ask(table.get(get), () -> table.get(toSecondary), getHedgeAfterMicros);
        } else {
          read = table.get(get).thenApply(result -> {
            if (result.isStale()) {
              downServers.suspectPrimary(replicas);
            }
            return result;
          });
        }
      } catch (RuntimeException e) {
        // Thrown before a future existed: failed like any other read, and logged.
        read = CompletableFuture.failedFuture(e);
      }
      read.whenComplete((result, failure) -> slowReads.note("get", table.getName(), get.getRow(), replica, replicas,
        startedNs, result != null && result.isStale(), failure));
      return read;
    }

    /**
     * The locations of the replicas of the region holding `row`, primary
     * first (a secondary's may be null or name no server), when the client
     * has them cached and the region has a secondary; null otherwise, and
     * the read takes the client's way. A location not cached is looked up
     * meanwhile, as the read itself would, but not waited for: the read
     * keeps its own deadline. A table seen here with a secondary is
     * remembered as replicated ({@link #replicatedSeenNs}).
     */
    private List<HRegionLocation> cachedReplicas(AsyncTableRegionLocator locator, byte[] row) {
      CompletableFuture<List<HRegionLocation>> located = locator.getRegionLocations(row, false);
      if (!located.isDone() || located.isCompletedExceptionally()) {
        return null;
      }
      List<HRegionLocation> locations = located.join();
      boolean usable = locations.size() >= 2 && locations.get(0) != null && locations.get(0).getServerName() != null;
      if (usable) {
        long now = System.nanoTime();
        Long seen = replicatedSeenNs.get(locator.getName());
        if (seen == null || now - seen >= REPLICATED_REFRESH_NS) {
          replicatedSeenNs.put(locator.getName(), now);
        }
      }
      return usable ? locations : null;
    }

    /**
     * Whether a timeline read of `table` taking the client's way, whose
     * region's replicas are at `replicas` (null: not cached), is hedged
     * ({@link SecondaryHedge}).
     */
    private boolean hedged(TableName table, List<HRegionLocation> replicas) {
      Long seen = replicatedSeenNs.get(table);
      return replicas == null && seen != null && System.nanoTime() - seen < DownServers.FORGET_AFTER_NS;
    }

    @Override
    public TResult get(ByteBuffer table, TGet tget) throws TIOError, TException {
      if (tget.getConsistency() != TConsistency.TIMELINE) {
        return super.get(table, tget);
      }
      return ThriftUtilities.resultFromHBase(await(timelineGet(table(table), fromThrift(tget))));
    }

    @Override
    public List<TResult> getMultiple(ByteBuffer table, List<TGet> tgets) throws TIOError, TException {
      if (tgets.stream().noneMatch(tget -> tget.getConsistency() == TConsistency.TIMELINE)) {
        return super.getMultiple(table, tgets);
      }
      AsyncTable<AdvancedScanResultConsumer> async = table(table);
      List<CompletableFuture<Result>> pending = new ArrayList<>(tgets.size());
      for (TGet tget : tgets) {
        pending.add(timelineGet(async, fromThrift(tget)));
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
      AsyncTable<AdvancedScanResultConsumer> async = table(table);
      // Timed from here, as a get is: after the gateway's connection is up.
      long startedNs = System.nanoTime();
      AsyncTableRegionLocator locator = async.getRegionLocator();
      // A reversed scan, whose first region HBase finds another way, and a
      // scan that names its replica take the client's way.
      List<HRegionLocation> replicas =
        scan.getReplicaId() >= 0 || scan.isReversed() ? null : cachedReplicas(locator, scan.getStartRow());
      // A scan's replica id holds for every region it crosses, and another
      // region's replica may be on the dead server: only a scan that ends in
      // its first region is sent to one replica.
      int replica =
        replicas != null && endsIn(replicas.get(0), scan) ? downServers.replicaToRead(locator, replicas) : -1;
      if (replica >= 0) {
        scan.setReplicaId(replica);
      }
      List<Result> rows;
      try {
        rows = await(scanAll(async, scan, replicas));
      } catch (TIOError | RuntimeException e) {
        slowReads.note("scan", async.getName(), scan.getStartRow(), replica, replicas, startedNs, false, e);
        throw e;
      }
      boolean stale = rows.stream().anyMatch(Result::isStale);
      slowReads.note("scan", async.getName(), scan.getStartRow(), replica, replicas, startedNs, stale, null);
      if (replica < 0 && replicas != null && stale) {
        downServers.suspectPrimary(replicas);
      }
      return ThriftUtilities.resultsFromHBase(rows.toArray(new Result[0]));
    }

    /**
     * The rows of `scan`, hedged ({@link SecondaryHedge}) when it takes the
     * client's way (no replica named, not reversed) on a region not cached.
     */
    private CompletableFuture<List<Result>> scanAll(AsyncTable<AdvancedScanResultConsumer> async, Scan scan,
      List<HRegionLocation> replicas) throws TIOError {
      if (scan.getReplicaId() >= 0 || scan.isReversed() || !hedged(async.getName(), replicas)) {
        return async.scanAll(scan);
      }
      Scan toSecondaries;
      try {
        toSecondaries = new Scan(scan).setReplicaId(1);
      } catch (IOException e) {
        throw ioError(e);
      }
      return SecondaryHedge.ask(async.scanAll(scan), () -> async.scanAll(toSecondaries), scanHedgeAfterMicros);
    }

    /** Whether `scan` (forward) stops within the region at `location`. */
    private static boolean endsIn(HRegionLocation location, Scan scan) {
      byte[] end = location.getRegion().getEndKey();
      if (end.length == 0) {
        return true;
      }
      byte[] stop = scan.getStopRow();
      if (stop.length == 0) {
        return false;
      }
      int order = Bytes.compareTo(stop, end);
      return order < 0 || (order == 0 && !scan.includeStopRow());
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

  /**
   * What `failure` says went wrong (null: nothing): a failure that came
   * through a stage of a future, or as the gateway's Thrift error, is wrapped.
   */
  static Throwable causeOf(Throwable failure) {
    boolean wrapped = failure instanceof CompletionException || failure instanceof TIOError;
    return wrapped && failure.getCause() != null ? failure.getCause() : failure;
  }

  /**
   * A second read, addressed to the first secondary, of a timeline read
   * whose region's locations the client has not cached: asked once HBase's
   * own wait before the secondaries ({@code hbase.client.primaryCallTimeout.get}
   * for a get, {@code hbase.client.replicaCallTimeout.scan} for a scan) has
   * passed without an answer, or at once when the client's read fails first.
   * The first answer wins; the read fails only when both have (with the
   * client's read's failure), or at once when the client's read was refused
   * as wrong in itself ({@code DoNotRetryIOException}). A table is hedged
   * only once its regions were seen with a second replica. Regions read for
   * the first time are not cached either, so when one of them is slower
   * than the wait, its secondary is read too.
   */
  static final class SecondaryHedge {
    private static final ScheduledThreadPoolExecutor TIMER = new ScheduledThreadPoolExecutor(1, runnable -> {
      Thread thread = new Thread(runnable, "timeline-secondary-hedge");
      thread.setDaemon(true);
      return thread;
    });

    static {
      // A read answered before its wait is over drops its timer task, and
      // with it the read it holds.
      TIMER.setRemoveOnCancelPolicy(true);
    }

    private SecondaryHedge() {
    }

    static <T> CompletableFuture<T> ask(CompletableFuture<T> clientsWay, Supplier<CompletableFuture<T>> secondary,
      long afterMicros) {
      CompletableFuture<T> answer = new CompletableFuture<>();
      AtomicBoolean asked = new AtomicBoolean();
      // Both reads, the second counted before it is asked: it is asked
      // unless the first answers, so the answer fails only once both have.
      AtomicInteger unsettled = new AtomicInteger(2);
      AtomicReference<Throwable> secondaryFailure = new AtomicReference<>();
      AtomicReference<Throwable> clientsFailure = new AtomicReference<>();
      Runnable askSecondary = () -> {
        if (answer.isDone() || !asked.compareAndSet(false, true)) {
          return;
        }
        CompletableFuture<T> second;
        try {
          second = secondary.get();
        } catch (Throwable e) {
          second = CompletableFuture.failedFuture(e);
        }
        second.whenComplete((result, failure) -> {
          if (failure == null) {
            answer.complete(result);
          } else {
            secondaryFailure.set(failure);
            failed(answer, unsettled, clientsFailure, secondaryFailure);
          }
        });
      };
      clientsWay.whenComplete((result, failure) -> {
        if (failure == null) {
          answer.complete(result);
          return;
        }
        clientsFailure.set(failure);
        if (causeOf(failure) instanceof DoNotRetryIOException) {
          // The request itself is wrong (a family the table lacks): a
          // secondary would say the same.
          answer.completeExceptionally(failure);
          return;
        }
        try {
          askSecondary.run();
        } finally {
          failed(answer, unsettled, clientsFailure, secondaryFailure);
        }
      });
      if (!answer.isDone()) {
        ScheduledFuture<?> wait = TIMER.schedule(askSecondary, afterMicros, TimeUnit.MICROSECONDS);
        answer.whenComplete((result, failure) -> wait.cancel(false));
      }
      return answer;
    }

    /**
     * One read failed: once both have, the answer fails with the client's
     * read's failure, the secondary's attached to it (the client's names the
     * primary, which the caller asked about).
     */
    private static <T> void failed(CompletableFuture<T> answer, AtomicInteger unsettled,
      AtomicReference<Throwable> clientsFailure, AtomicReference<Throwable> secondaryFailure) {
      if (unsettled.decrementAndGet() == 0) {
        Throwable failure = clientsFailure.get();
        Throwable other = secondaryFailure.get();
        if (failure == null) {
          failure = other;
        } else if (other != null && other != failure) {
          failure.addSuppressed(other);
        }
        answer.completeExceptionally(failure);
      }
    }
  }

  /**
   * Timeline reads that failed, or took {@value Handler#SLOW_READ_KEY} or
   * longer (1 s by default), logged at WARN with what the gateway chose for
   * them: the table, the row (a scan's start row), the replica asked alone
   * (-1: the client's way, the primary first and the secondaries too when it
   * is slow, and the first secondary by its id when the region's locations
   * were not cached: {@link SecondaryHedge}), the replicas' servers as the
   * client's cache had them (primary first; "uncached" when it had none, or
   * the region has one replica), whether a secondary answered, and the time
   * and the failure. A read that names its replica is the client's and is
   * not logged. query-api gives up on a read after its own HBase deadline
   * and says only that it did: this is where an operator sees which region
   * and which server a slow read waited for. A crash fails hundreds of reads
   * a second, so about {@value #LINES_PER_SECOND} lines a second are written
   * (a burst after a quiet second takes that second's lines at once), and
   * the next line written counts those left out.
   */
  static final class SlowReads {
    private static final Logger LOG = LoggerFactory.getLogger(SlowReads.class);
    private static final int LINES_PER_SECOND = 20;

    private final long slowNs;
    private final RateLimiter lines = RateLimiter.create(LINES_PER_SECOND);
    private final AtomicLong leftOut = new AtomicLong();

    SlowReads(int slowMs) {
      this.slowNs = TimeUnit.MILLISECONDS.toNanos(slowMs);
    }

    void note(String kind, TableName table, byte[] row, int replica, List<HRegionLocation> replicas, long startedNs,
      boolean stale, Throwable failure) {
      long elapsedNs = System.nanoTime() - startedNs;
      if (failure == null && elapsedNs < slowNs) {
        return;
      }
      if (!lines.tryAcquire()) {
        leftOut.incrementAndGet();
        return;
      }
      long notLogged = leftOut.getAndSet(0);
      Throwable cause = causeOf(failure);
      LOG.warn("timeline {} of {} at row {} {} after {} ms; replica asked: {}; replicas' servers: {}{}", kind, table,
        Bytes.toStringBinary(row),
        cause == null ? (stale ? "answered by a secondary" : "answered by the primary") : "failed (" + cause + ")",
        TimeUnit.NANOSECONDS.toMillis(elapsedNs), replica, servers(replicas),
        notLogged > 0 ? "; " + notLogged + " more slow or failed reads not logged" : "");
    }

    private static String servers(List<HRegionLocation> replicas) {
      if (replicas == null) {
        return "uncached";
      }
      List<String> names = new ArrayList<>(replicas.size());
      for (HRegionLocation location : replicas) {
        names.add(location == null || location.getServerName() == null ? "none"
          : location.getServerName().getAddress().toString());
      }
      return names.toString();
    }
  }

  /**
   * Region servers found refusing connections. A timeline read of a region
   * with a replica on one asks one replica alone: a secondary when the
   * primary's server is down, the primary when every secondary's is (the
   * client would ask them when the primary is slow, fail, and look their
   * locations up again). Such a region's location is read again from
   * hbase:meta at most once a second, so that reads go back to the
   * client's way once HBase has reopened the region elsewhere.
   *
   * A server is probed (a TCP connect) when a secondary answered a read
   * of one of its primaries, and again at most once a second while reads
   * ask about it: a live server accepts, however slow its answers (a JVM
   * paused for garbage collection still accepts), so only a dead process or
   * an unreachable machine is routed around.
   *
   * What it knows is forgotten once nobody has asked for a minute
   * ({@link #forgetIfDue}): a server restarted has a new name (its start
   * code), and a region split or merged a new encoded name, so a gateway
   * that runs for months would otherwise keep an entry for every server
   * and region it ever saw. A server still asked about while down is
   * probed every second and stays.
   */
  static final class DownServers {
    private static final Logger LOG = LoggerFactory.getLogger(DownServers.class);
    private static final long RECHECK_NS = TimeUnit.SECONDS.toNanos(1);
    private static final long RELOAD_EVERY_NS = TimeUnit.SECONDS.toNanos(1);
    /** A machine that is gone never answers the SYN. */
    private static final int CONNECT_TIMEOUT_MS = 500;
    static final long FORGET_AFTER_NS = TimeUnit.MINUTES.toNanos(1);

    /** What the last probe of one server found. */
    private static final class Finding {
      volatile boolean down;
      volatile long checkedNs = System.nanoTime() - RECHECK_NS;
      final AtomicBoolean probing = new AtomicBoolean();
    }

    private final ConcurrentHashMap<ServerName, Finding> findings = new ConcurrentHashMap<>();
    /** When each region's location was last read again, by encoded region name. */
    private final ConcurrentHashMap<String, Long> reloadedNs = new ConcurrentHashMap<>();
    /** When the maps above were last swept of what nobody asked about. */
    private final AtomicLong sweptNs = new AtomicLong(System.nanoTime());
    /** At most one probe at a time per server. */
    private final ExecutorService probes = Executors.newCachedThreadPool(runnable -> {
      Thread thread = new Thread(runnable, "timeline-server-probe");
      thread.setDaemon(true);
      return thread;
    });

    /**
     * The replica a timeline read of the region whose replicas are at
     * `replicas` (primary first; null: nothing to choose) should ask alone,
     * or -1 for the client's way.
     */
    int replicaToRead(AsyncTableRegionLocator locator, List<HRegionLocation> replicas) {
      if (replicas == null) {
        return -1;
      }
      forgetIfDue();
      int liveSecondary = -1;
      boolean anySecondaryDown = false;
      for (int id = 1; id < replicas.size(); id++) {
        HRegionLocation secondary = replicas.get(id);
        // A secondary not yet assigned (no server) is neither.
        if (secondary == null || secondary.getServerName() == null) {
          continue;
        }
        if (isDown(secondary)) {
          anySecondaryDown = true;
        } else if (liveSecondary < 0) {
          liveSecondary = id;
        }
      }
      int replica;
      if (isDown(replicas.get(0))) {
        replica = liveSecondary;
      } else {
        replica = anySecondaryDown && liveSecondary < 0 ? 0 : -1;
      }
      if (replica >= 0) {
        reloadIfDue(locator, replicas.get(0));
      }
      return replica;
    }

    /** A secondary answered a read of the region at `replicas` (null: none): probes its primary's server if due. */
    void suspectPrimary(List<HRegionLocation> replicas) {
      if (replicas != null) {
        ServerName server = replicas.get(0).getServerName();
        probeIfDue(server, findings.computeIfAbsent(server, any -> new Finding()));
      }
    }

    /**
     * At most once a minute, on the read that finds it due: drops the
     * findings not probed for a minute (a server asked about while down is
     * probed every second) and the reload times a minute old (an absent one
     * means a reload is due, as an old one does). A probe still running
     * keeps its finding.
     */
    private void forgetIfDue() {
      long now = System.nanoTime();
      long last = sweptNs.get();
      if (now - last < FORGET_AFTER_NS || !sweptNs.compareAndSet(last, now)) {
        return;
      }
      findings.values().removeIf(finding -> !finding.probing.get() && now - finding.checkedNs >= FORGET_AFTER_NS);
      reloadedNs.values().removeIf(reloaded -> now - reloaded >= FORGET_AFTER_NS);
    }

    private boolean isDown(HRegionLocation location) {
      Finding finding = findings.get(location.getServerName());
      if (finding == null || !finding.down) {
        return false;
      }
      // Probed again when due, to see the server come back.
      probeIfDue(location.getServerName(), finding);
      return true;
    }

    private void reloadIfDue(AsyncTableRegionLocator locator, HRegionLocation primary) {
      String region = primary.getRegion().getEncodedName();
      long now = System.nanoTime();
      Long last = reloadedNs.get(region);
      boolean due = last == null ? reloadedNs.putIfAbsent(region, now) == null
        : now - last >= RELOAD_EVERY_NS && reloadedNs.replace(region, last, now);
      if (due) {
        // The answer replaces the cached locations; a failure leaves them.
        locator.getRegionLocations(primary.getRegion().getStartKey(), true);
      }
    }

    private void probeIfDue(ServerName server, Finding finding) {
      if (System.nanoTime() - finding.checkedNs < RECHECK_NS || !finding.probing.compareAndSet(false, true)) {
        return;
      }
      probes.execute(() -> {
        try {
          boolean down;
          try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(server.getHostname(), server.getPort()), CONNECT_TIMEOUT_MS);
            down = false;
          } catch (IOException e) {
            // Refused, timed out, or a name that does not resolve.
            down = true;
          }
          if (down != finding.down) {
            LOG.info(down
              ? "region server {} refuses connections: timeline reads of its regions ask their other replicas alone"
              : "region server {} accepts connections again: timeline reads of its regions ask it again", server);
          }
          finding.down = down;
          if (down) {
            // A sweep may have dropped this finding between the read that
            // asked for the probe and the probe: a server found down stays
            // known, or the next read would ask it first again.
            findings.putIfAbsent(server, finding);
          }
        } finally {
          finding.checkedNs = System.nanoTime();
          finding.probing.set(false);
        }
      });
    }
  }
}
