//! `ranker run`: rank every product, one shard of them or one product.

use std::time::{Duration, Instant};

use crate::cli::LeaseArgs;
use crate::history::{self, parse_time, ChangedSince, ChangesWanted};
use crate::recorded::ByHand;
use crate::telemetry::RunPush;
use crate::RunOptions;
use anyhow::{Context, Result};
use clap::Args;
use common::exit::ExitStatus;
use common::store::lease::default_holder;
use common::store::runs::RunStatus;

use super::pass::{self, PassArgs};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The as-of time of the recency term: RFC 3339 (2024-05-01T03:00:00+09:00),
    /// epoch milliseconds, or today@03:00+09:00 (that time of today's date in
    /// that offset) [default: now].
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    as_of: Option<i64>,

    /// Compute and report, but write nothing (takes no lease).
    #[arg(long)]
    dry_run: bool,

    /// Rank only the products whose ranking may have changed since TIME: a
    /// comment or index row written since (by any writer: HBase's cell
    /// times); plus the slices of the rolling refresh due. `last`: since the
    /// earliest start of the newest completed runs that together cover the
    /// same products, less --skew-margin-secs (every product when there are
    /// none). TIME: RFC 3339, epoch milliseconds or today@HH:MM[:SS]OFFSET.
    #[arg(long, value_name = "TIME|last", conflicts_with = "product")]
    changed_since: Option<ChangedSince>,

    /// With --changed-since, every product is also re-ranked once in D nights
    /// (each night a slice of the key range, cut where the products are),
    /// because the recency term drifts and another writer may have deleted a
    /// ranked comment [default: incremental.refresh_days of the config, 7].
    #[arg(long, value_name = "D", requires = "changed_since", value_parser = clap::value_parser!(u32).range(1..))]
    refresh_days: Option<u32>,

    /// With --changed-since last, look for changes from this many seconds
    /// before the last completed run's start, for clock skew between hosts
    /// [default: incremental.skew_margin_secs of the config, 300].
    #[arg(long, value_name = "SECS", requires = "changed_since")]
    skew_margin_secs: Option<u64>,

    /// With --changed-since, also read every rank slot of the range and rank
    /// the products with a slot naming a comment that no longer exists: for
    /// an operator who deleted or purged comment rows directly, which the
    /// refresh would otherwise reach within D nights. Costs a walk of the
    /// whole rank table.
    #[arg(long, requires = "changed_since")]
    check_all_slots: bool,

    /// Push the run's metrics to the Prometheus Pushgateway at URL: its
    /// progress every 15 s and its outcome at the end, in the group
    /// job="reviews_ranker", scope="all" (or "shard-I-of-N"). For runs a
    /// scheduler starts, such as a Kubernetes CronJob, which no scrape finds.
    #[arg(long, value_name = "URL", env = "RANKER_PUSHGATEWAY", value_parser = parse_push_url,
          conflicts_with_all = ["product", "dry_run"])]
    pushgateway: Option<String>,

    // The lease a full or shard run takes: the one `ranker-cron` takes, so
    // the two never rank at the same time.
    #[command(flatten)]
    lease: LeaseArgs,

    /// Run without the lease even if another run holds it (emergencies only:
    /// the two runs may leave products ranked at two as-of times).
    #[arg(long)]
    ignore_lease: bool,

    #[command(flatten)]
    pass: PassArgs,
}

/// Checks a Pushgateway's base URL: http or https, with a host.
fn parse_push_url(text: &str) -> Result<String, String> {
    match reqwest::Url::parse(text.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(text.trim().to_owned()),
        Ok(_) => Err(format!("expected an http(s) URL such as http://pushgateway:9091, got {text:?}")),
        Err(error) => Err(format!("expected an http(s) URL such as http://pushgateway:9091: {error}")),
    }
}

pub async fn execute(args: RunArgs) -> Result<ExitStatus> {
    let config = args.pass.tuning.load_config().context("loading the configuration")?;
    let mut options = args.pass.options(&config, args.as_of.unwrap_or_else(super::now_ms), None);
    options.dry_run = args.dry_run;
    // A rerun of one product is how an operator fixes a night by hand, and a
    // dry run writes nothing: neither needs the night to itself, and nothing
    // reads their records back, so they keep none.
    let needs_the_night = !args.dry_run && args.pass.scope.product.is_none();
    if needs_the_night && args.ignore_lease {
        tracing::warn!(lease = %args.lease.lease_name, "--ignore-lease: running without the lease; a nightly run may rank at the same time");
    }
    let holder = default_holder();
    let by_hand = ByHand {
        lease: (needs_the_night && !args.ignore_lease).then(|| args.lease.settings(holder.clone())),
        recorded_as: needs_the_night.then_some(holder),
        read_only: false,
    };
    let changes = args.changed_since.map(|since| ChangesWanted {
        since,
        refresh_days: args.refresh_days.unwrap_or(config.incremental.refresh_days),
        skew_margin: args.skew_margin_secs.map_or_else(|| config.incremental.skew_margin(), Duration::from_secs),
        check_all_slots: args.check_all_slots,
    });
    let store = args.pass.hbase.store().context("configuring HBase access")?;
    // Once the start is taken: a shard's range from the run's plan (only a
    // run that writes stores one), then what changed since the watermark.
    let prepare = async |options: &mut RunOptions| {
        args.pass.scope.narrow_to_shard(&store, options, args.as_of, !args.dry_run).await?;
        match &changes {
            Some(changes) => history::make_incremental(&store, options, changes).await,
            None => Ok(()),
        }
    };
    let push = match &args.pushgateway {
        Some(url) => {
            Some(RunPush::start(url, &args.pass.scope.push_group()).context("installing the metrics recorder")?)
        }
        None => None,
    };
    let started = Instant::now();
    let ended = pass::run_pass(&store, &args.pass, options, by_hand, prepare).await;
    if let Some(push) = push {
        let outcome = ended.as_ref().map_or(Some(RunStatus::Failed), |status| *status);
        push.finish(outcome, started.elapsed()).await;
    }
    Ok(ended?.map_or(ExitStatus::TryLater, ExitStatus::from))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::commands::bench_read::BenchReadArgs;
    use crate::{PaceMode, RankerConfig};

    /// The two subcommands these tests parse, as the `ranker` command has them.
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Command {
        Run(RunArgs),
        BenchRead(BenchReadArgs),
    }

    fn parse(arguments: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from([&["ranker"], arguments].concat())
    }

    fn run_args(arguments: &[&str]) -> RunArgs {
        match parse(&[&["run"], arguments].concat()).expect("parses").command {
            Command::Run(args) => args,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn as_of_takes_rfc_3339_in_any_offset_or_epoch_milliseconds() {
        assert_eq!(parse_time("1714532400000"), Ok(1_714_532_400_000));
        assert_eq!(parse_time("2024-05-01T03:00:00Z"), Ok(1_714_532_400_000));
        assert_eq!(parse_time(" 2024-05-01T12:00:00+09:00 "), Ok(1_714_532_400_000));
        for bad in ["", "yesterday", "2024-05-01", "2024-05-01 03:00", "1e12"] {
            let error = parse_time(bad).expect_err(bad);
            assert!(error.contains("RFC 3339"), "{bad}: {error}");
        }
    }

    #[test]
    fn as_of_today_takes_the_date_in_the_offset_given() {
        use crate::history::parse_time_at;
        // 2024-04-30T20:00Z is already 1 May in Seoul, still 30 April in UTC.
        let evening_utc = chrono::DateTime::parse_from_rfc3339("2024-04-30T20:00:00Z").unwrap().to_utc();
        assert_eq!(parse_time_at("today@03:00+09:00", evening_utc), Ok(1_714_500_000_000));
        assert_eq!(
            parse_time_at("today@03:00+09:00", evening_utc),
            parse_time_at("2024-05-01T03:00:00+09:00", evening_utc)
        );
        assert_eq!(parse_time_at("today@03:00:30Z", evening_utc), parse_time_at("2024-04-30T03:00:30Z", evening_utc));
        for bad in ["today@03:00", "today@3am+09:00", "today@25:00+09:00", "today@"] {
            let error = parse_time_at(bad, evening_utc).expect_err(bad);
            assert!(error.starts_with("today@"), "{bad}: {error}");
        }
    }

    #[test]
    fn run_refuses_a_bad_shard_or_product_before_touching_hbase() {
        assert!(parse(&["run", "--shard", "3/8", "--as-of", "2024-05-01T03:00:00Z", "--dry-run"]).is_ok());
        for bad in [["--shard", "8/8"], ["--product", "short"], ["--as-of", "tomorrow"]] {
            let error = parse(&[&["run"][..], &bad[..]].concat()).expect_err("refused");
            assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation, "{bad:?}");
        }
    }

    #[test]
    fn pushgateway_takes_an_http_url_and_only_for_recorded_runs() {
        for good in
            [&["--pushgateway", "http://pushgateway:9091"][..], &["--pushgateway", "https://p/", "--shard", "1/4"]]
        {
            assert!(parse(&[&["run"], good].concat()).is_ok(), "{good:?}");
        }
        for bad in [
            &["--pushgateway", "pushgateway:9091"][..],
            &["--pushgateway", "ftp://pushgateway"],
            &["--pushgateway", "http://p:9091", "--product", "P000000001"],
            &["--pushgateway", "http://p:9091", "--dry-run"],
        ] {
            assert!(parse(&[&["run"], bad].concat()).is_err(), "{bad:?}");
        }
        assert_eq!(run_args(&[]).pass.scope.push_group(), "all");
        assert_eq!(run_args(&["--shard", "3/8"]).pass.scope.push_group(), "shard-3-of-8");
    }

    #[test]
    fn changed_since_takes_a_time_or_last_and_refresh_days_need_it() {
        for good in [
            &["--changed-since", "last"][..],
            &["--changed-since", "2024-05-01T03:00:00Z", "--refresh-days", "7"],
            &["--changed-since", "1714532400000", "--skew-margin-secs", "60", "--shard", "1/4"],
        ] {
            assert!(parse(&[&["run"], good].concat()).is_ok(), "{good:?}");
        }
        for bad in [
            &["--changed-since", "yesterday"][..],
            &["--refresh-days", "7"],
            &["--changed-since", "last", "--refresh-days", "0"],
            &["--changed-since", "last", "--product", "P000000001"],
        ] {
            assert!(parse(&[&["run"], bad].concat()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn page_rows_set_the_page_of_both_modes_and_bench_read_is_unpaced() {
        let config = RankerConfig::default();
        let pages = run_args(&["--page-rows", "40"]).pass.options(&config, 0, None);
        assert_eq!((pages.page_rows, pages.pacing.page_rows), (40, 40), "the flag sets the page of both modes");
        let defaults = run_args(&[]).pass.options(&config, 0, None);
        assert_eq!((defaults.page_rows, defaults.pacing.page_rows, defaults.pacing.mode), (1_000, 250, PaceMode::On));
        let bench_read = |flags: &[&str]| match parse(&[&["bench-read"], flags].concat()).expect("parses").command {
            Command::BenchRead(args) => args.options(&config, 0).pacing.mode,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(bench_read(&[]), PaceMode::Off, "bench-read reads unpaced by default");
        assert_eq!(bench_read(&["--pace", "on"]), PaceMode::On, "unless --pace says otherwise");
        assert!(parse(&["run", "--page-rows", "5001"]).is_err());
    }
}
