//! `query-api`: serves the review tables over HTTP until SIGTERM or Ctrl-C.

use std::process::ExitCode;

use anyhow::Context;
use common::exit::ExitStatus;
use common::hbase::Hbase;
use common::store::ReadStore;
use query_api::connections::ConnectionLimits;
use query_api::{AppState, Args};

/// Files the process keeps open besides its HTTP connections: HBase
/// connections of both pools, the listeners, logs, the allocator's and the
/// runtime's own. Generous, so the cap is reached well before the file limit.
const FILES_KEPT_BESIDE_CONNECTIONS: u64 = 256;

/// glibc's malloc gives each busy thread an arena of its own and returns
/// little of it to the system, so under steady load the service's resident
/// memory crept up for minutes (+15 % over a ten-minute soak). jemalloc
/// returns unused pages after a decay (ten seconds by default), so memory
/// follows the load.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    common::shutdown::run_main("query-api", run())
}

async fn run() -> ExitStatus {
    // Flags that do not parse exit 2 inside `Args::parse`, like every binary's usage errors.
    let args = Args::parse();
    let tables = match args.hbase.tables() {
        Ok(tables) => tables,
        Err(error) => {
            eprintln!("query-api: invalid --table-prefix: {error}");
            return ExitStatus::Usage;
        }
    };
    match serve(&args, tables).await {
        Ok(()) => ExitStatus::Success,
        Err(error) => {
            tracing::error!(error = format!("{error:#}"), "query-api failed");
            eprintln!("query-api: {error:#}");
            ExitStatus::Failure
        }
    }
}

/// Raises the soft limit on open files to the hard limit, then lowers the
/// connection cap to what the limit leaves beside the process's other files,
/// so that the cap, not `Too many open files`, is what a flood of connections
/// meets.
fn fit_connections_to_file_limit(limits: &mut ConnectionLimits) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        tracing::warn!("cannot read the limit on open files; keeping --max-connections as given");
        return;
    };
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() { hard } else { soft };
    let room = usize::try_from(soft.saturating_sub(FILES_KEPT_BESIDE_CONNECTIONS)).unwrap_or(usize::MAX).max(1);
    if limits.max_connections > room {
        tracing::warn!(
            max_connections = limits.max_connections,
            open_files_limit = soft,
            lowered_to = room,
            "--max-connections is more than the limit on open files allows; lowered"
        );
        limits.max_connections = room;
    }
    tracing::info!(max_connections = limits.max_connections, open_files_limit = soft, "connection cap");
}

/// Serves until a shutdown signal; a graceful stop is a success (0), not an interruption.
async fn serve(args: &Args, tables: common::tables::Tables) -> anyhow::Result<()> {
    let store = ReadStore::new(Hbase::new(args.resolved_hbase_config(&tables).await), tables);
    let mut settings = args.settings();
    fit_connections_to_file_limit(&mut settings.connections);
    let state = AppState::new(store, settings);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr().context("the listener has no local address")?;
    if let Some(metrics_address) = args.metrics_listen {
        let metrics_listener = tokio::net::TcpListener::bind(metrics_address)
            .await
            .with_context(|| format!("cannot listen for /metrics on {metrics_address}"))?;
        let metrics_app = query_api::server::metrics_app(state.clone());
        tracing::info!(address = %metrics_address, "serving /metrics on its own listener");
        // Scrapes are short and stateless: this listener simply ends with the process.
        tokio::spawn(async move {
            if let Err(error) = axum::serve(metrics_listener, metrics_app).await {
                tracing::error!(%error, "the metrics listener failed");
            }
        });
    }
    tracing::info!(%address, thrift = %args.hbase.thrift_addr, prefix = %args.hbase.table_prefix, "query-api listening");
    match state.store().check_ready().await {
        // Ready from the start: /readyz need not read the page again.
        Ok(()) => state.mark_has_read(),
        // Not fatal: the service answers 503 until HBase is back, and /readyz says so.
        Err(error) => tracing::warn!(%error, "HBase does not answer yet"),
    }
    let stopping = state.clone();
    let unready_before_drain = state.settings().unready_before_drain;
    let shutdown = async move {
        let signal = common::shutdown::ShutdownSignals::listen().next().await;
        stopping.mark_stopping();
        // A person at a terminal (Ctrl-C) has no load balancer to wait for.
        if signal == "SIGTERM" && !unready_before_drain.is_zero() {
            tracing::info!(?unready_before_drain, "unready: serving on while load balancers notice");
            tokio::time::sleep(unready_before_drain).await;
        }
    };
    query_api::serve(listener, state, shutdown).await.context("serving failed")?;
    tracing::info!("query-api stopped");
    Ok(())
}
