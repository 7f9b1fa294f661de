//! `ranker-cron`: runs the ranker on a schedule (see `ranker-cron --help`).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use common::exit::ExitStatus;
use common::store::lease::SystemClock;
use cron::{CronArgs, Daemon};

fn main() -> ExitCode {
    common::shutdown::run_main("ranker-cron", async {
        match run().await {
            Ok(code) => code,
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "ranker-cron failed");
                eprintln!("ranker-cron: {error:#}");
                ExitStatus::Failure
            }
        }
    })
}

async fn run() -> anyhow::Result<ExitStatus> {
    let args = CronArgs::parse();
    let settings = match args.daemon_settings() {
        Ok(settings) => settings,
        Err(error) => {
            // A wrong flag value is a usage error, like the ones clap reports itself.
            eprintln!("ranker-cron: invalid settings: {error}");
            return Ok(ExitStatus::Usage);
        }
    };
    let store = args.hbase.store().context("invalid HBase settings")?;
    if !args.no_metrics {
        match cron::metrics::install_exporter(args.metrics_addr) {
            Ok(()) => tracing::info!(address = %args.metrics_addr, "serving Prometheus metrics on /metrics"),
            // A one-off `--once` run is often started by hand on a host whose
            // daemon already serves the port; its metrics are not worth failing it for.
            Err(error) if args.once => tracing::warn!(
                address = %args.metrics_addr,
                error = format!("{error:#}"),
                "cannot serve metrics; running once without them"
            ),
            Err(error) => {
                return Err(error).with_context(|| format!("cannot serve metrics on {}", args.metrics_addr));
            }
        }
    }
    let daemon = Daemon::new(store, settings, Arc::new(SystemClock));
    // The first SIGTERM or SIGINT asks for a graceful stop (finish the products
    // in flight, record the run, release the lease); a second one exits at once.
    let shutdown = daemon.shutdown_token();
    common::shutdown::stop_on_signals(move |signal| {
        tracing::info!(signal, "stopping: finishing the products in flight, then recording the run");
        shutdown.cancel();
    });
    let outcome = daemon.serve(args.start_mode()).await.context("the daemon stopped")?;
    Ok(outcome.map_or(ExitStatus::Success, |outcome| outcome.exit_status()))
}
