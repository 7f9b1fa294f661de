//! `ranker-cron`'s command line: every setting is a flag with an environment
//! variable, so a systemd unit or a container sets them the same way.

use std::net::SocketAddr;
use std::time::Duration;

use common::config::HbaseArgs;
use common::store::lease::default_holder;
use ranker::cli::{LeaseArgs, TuningArgs};

use crate::daemon::{DaemonSettings, IncrementalNights, StartMode};
use crate::retry::RetryPolicy;
use crate::schedule::{Schedule, ScheduleError, DEFAULT_EXPRESSION, DEFAULT_ZONE};

/// Why the daemon's settings were refused at start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The schedule's expression or zone is invalid.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The ranker's configuration file is unreadable or invalid.
    #[error(transparent)]
    Ranker(#[from] ranker::RankerError),
    /// Some other setting is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// Runs the ranker every night (or on any cron schedule), at most one run at
/// a time across every daemon sharing the HBase lease.
///
/// Exit status with --once: 0 succeeded (or the slot was already done),
/// 1 failed or lost the lease, 2 usage error, 75 skipped because another run
/// holds the lease (try later), 130 interrupted.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "ranker-cron", version)]
pub struct CronArgs {
    /// When to run: a cron expression "second minute hour day-of-month month
    /// day-of-week" (a five-field expression runs at second 0).
    #[arg(long, env = "RANKER_CRON_SCHEDULE", default_value = DEFAULT_EXPRESSION)]
    pub schedule: String,

    /// The IANA time zone the schedule is read in.
    #[arg(long, env = "RANKER_CRON_TIME_ZONE", default_value = DEFAULT_ZONE)]
    pub time_zone: String,

    /// Run once immediately, then keep the schedule.
    #[arg(long, conflicts_with = "once")]
    pub run_now: bool,

    /// Run once immediately and exit with the run's status.
    #[arg(long)]
    pub once: bool,

    #[command(flatten)]
    pub lease: LeaseArgs,

    /// This daemon's name in the lease and the run history (default: host:pid:random).
    #[arg(long, env = "RANKER_CRON_HOLDER")]
    pub holder: Option<String>,

    /// Attempts per scheduled run, the first included (1 = never retry).
    #[arg(long, env = "RANKER_CRON_RETRY_ATTEMPTS", default_value_t = 3)]
    pub retry_attempts: u32,

    /// Seconds before the first retry; doubles for each further retry (each pause less up to a quarter of jitter).
    #[arg(long, env = "RANKER_CRON_RETRY_BACKOFF_SECS", default_value_t = 300)]
    pub retry_backoff_secs: u64,

    /// The longest pause between two attempts, in seconds.
    #[arg(long, env = "RANKER_CRON_RETRY_MAX_BACKOFF_SECS", default_value_t = 1_800)]
    pub retry_max_backoff_secs: u64,

    /// Where Prometheus scrapes /metrics.
    #[arg(long, env = "RANKER_CRON_METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,

    /// Serve no metrics.
    #[arg(long, env = "RANKER_CRON_NO_METRICS")]
    pub no_metrics: bool,

    #[command(flatten)]
    pub tuning: TuningArgs,

    /// Incremental nights: a tick ranks only the products whose ranking may
    /// have changed since the last completed run (`ranker run --changed-since
    /// last`) plus its night's slice of the rolling refresh; the ticks that
    /// fall on --full-schedule, and any tick with no completed run before it,
    /// rank every product.
    #[arg(long, env = "RANKER_CRON_INCREMENTAL")]
    pub incremental: bool,

    /// With --incremental, the ticks of --schedule that rank every product: a
    /// cron expression in the same zone whose times are also times of
    /// --schedule (e.g. "0 0 3 * * Sun" beside "0 0 3 * * *") [default: none].
    #[arg(long, value_name = "EXPRESSION", env = "RANKER_CRON_FULL_SCHEDULE", requires = "incremental")]
    pub full_schedule: Option<String>,

    /// With --incremental, every product is re-ranked once in this many nights
    /// (overrides incremental.refresh_days of the configuration file, 7).
    #[arg(long, value_name = "D", env = "RANKER_CRON_REFRESH_DAYS", requires = "incremental",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub refresh_days: Option<u32>,

    #[command(flatten)]
    pub hbase: HbaseArgs,
}

impl CronArgs {
    /// How to start.
    pub fn start_mode(&self) -> StartMode {
        if self.once {
            StartMode::Once
        } else if self.run_now {
            StartMode::RunNowThenSchedule
        } else {
            StartMode::Schedule
        }
    }

    /// Validates every setting and builds the daemon's settings.
    pub fn daemon_settings(&self) -> Result<DaemonSettings, ConfigError> {
        let schedule = Schedule::parse(&self.schedule, &self.time_zone)?;
        if self.retry_attempts == 0 {
            return Err(ConfigError::Invalid("--retry-attempts must be at least 1".to_owned()));
        }
        let ranker_config = self.tuning.load_config()?;
        // The as-of time is set by each run; the scope of a daemon is every product.
        let run_options = self.tuning.options(&ranker_config, ranker::Scope::All, 0, None);
        let incremental = if self.incremental {
            let full_schedule = match &self.full_schedule {
                Some(expression) => {
                    let full = Schedule::parse(expression, &self.time_zone)?;
                    check_full_schedule(&schedule, &full)?;
                    Some(full)
                }
                None => None,
            };
            Some(IncrementalNights {
                full_schedule,
                refresh_days: self.refresh_days.unwrap_or(ranker_config.incremental.refresh_days),
                skew_margin: ranker_config.incremental.skew_margin(),
            })
        } else {
            None
        };
        let holder = match &self.holder {
            Some(holder) if !holder.trim().is_empty() => holder.trim().to_owned(),
            _ => default_holder(),
        };
        Ok(DaemonSettings {
            schedule,
            lease: self.lease.settings(holder),
            retry: RetryPolicy {
                attempts: self.retry_attempts,
                backoff: Duration::from_secs(self.retry_backoff_secs),
                max_backoff: Duration::from_secs(self.retry_max_backoff_secs.max(self.retry_backoff_secs)),
            },
            run_options,
            incremental,
        })
    }
}

/// Refuses a full schedule whose next times are not ticks of the main
/// schedule: the daemon runs only on its ticks, so such a full run would never happen.
fn check_full_schedule(schedule: &Schedule, full: &Schedule) -> Result<(), ConfigError> {
    let mut after = chrono::Utc::now();
    for _ in 0..3 {
        let Some(next) = full.next_after(after) else { break };
        if schedule.next_after(next - chrono::TimeDelta::seconds(1)) != Some(next) {
            return Err(ConfigError::Invalid(format!(
                "--full-schedule {:?} fires at {next}, which is not a time of --schedule {:?}: \
                 full runs happen on ticks of --schedule, so its times must be among them",
                full.expression(),
                schedule.expression()
            )));
        }
        after = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parse(extra: &[&str]) -> CronArgs {
        let mut args = vec!["ranker-cron"];
        args.extend_from_slice(extra);
        CronArgs::try_parse_from(args).expect("arguments parse")
    }

    #[test]
    fn defaults_run_nightly_at_three_in_seoul_with_a_ten_minute_lease() {
        let args = parse(&[]);
        assert_eq!(args.start_mode(), StartMode::Schedule);
        let settings = args.daemon_settings().expect("defaults are valid");
        assert_eq!(settings.schedule.expression(), "0 0 3 * * *");
        assert_eq!(settings.schedule.zone(), chrono_tz::Asia::Seoul);
        assert_eq!(settings.lease.ttl, Duration::from_secs(600));
        assert_eq!(settings.lease.name, "nightly");
        assert_eq!(settings.retry, RetryPolicy::default());
        assert!(!settings.run_options.dry_run);
        assert_eq!(args.metrics_addr, "127.0.0.1:9464".parse().expect("address"));
    }

    #[test]
    fn incremental_nights_take_a_full_schedule_among_the_ticks_and_a_refresh_period() {
        let settings = parse(&["--incremental", "--full-schedule", "0 0 3 * * Sun", "--refresh-days", "14"])
            .daemon_settings()
            .expect("valid");
        let nights = settings.incremental.expect("incremental nights");
        assert_eq!(nights.refresh_days, 14);
        assert_eq!(nights.skew_margin, Duration::from_secs(300), "the configuration file's default");
        // 2026-11-22 03:00 Seoul was a Sunday; the 23rd a Monday.
        assert!(nights.is_full_slot(1_795_284_000_000));
        assert!(!nights.is_full_slot(1_795_370_400_000));
        let defaults = parse(&["--incremental"]).daemon_settings().expect("valid").incremental.expect("on");
        assert_eq!((defaults.refresh_days, defaults.full_schedule.is_none()), (7, true));

        // A full schedule off the ticks of --schedule would never run.
        let error =
            parse(&["--incremental", "--full-schedule", "0 30 3 * * Sun"]).daemon_settings().expect_err("refused");
        assert!(error.to_string().contains("not a time of --schedule"), "{error}");
        // The incremental settings need --incremental.
        for alone in [&["--full-schedule", "0 0 3 * * Sun"][..], &["--refresh-days", "7"]] {
            assert!(CronArgs::try_parse_from([&["ranker-cron"][..], alone].concat()).is_err(), "{alone:?}");
        }
        assert!(CronArgs::try_parse_from(["ranker-cron", "--incremental", "--refresh-days", "0"]).is_err());
    }

    #[test]
    fn flags_override_the_defaults() {
        let args = parse(&[
            "--schedule",
            "*/5 * * * * *",
            "--time-zone",
            "UTC",
            "--run-now",
            "--concurrency",
            "3",
            "--holder",
            "daemon-a",
            "--retry-attempts",
            "1",
            "--pace",
            "off",
            "--max-rate",
            "25000",
        ]);
        assert_eq!(args.start_mode(), StartMode::RunNowThenSchedule);
        let settings = args.daemon_settings().expect("valid");
        assert_eq!(settings.run_options.concurrency, 3);
        assert_eq!(settings.lease.holder, "daemon-a");
        assert_eq!(settings.retry.attempts, 1);
        assert_eq!(settings.run_options.pacing.mode, ranker::PaceMode::Off);
        assert_eq!(settings.run_options.pacing.max_rate, Some(25_000.0));
        assert_eq!(parse(&[]).daemon_settings().expect("defaults").run_options.pacing.mode, ranker::PaceMode::On);
        assert_eq!(parse(&["--once"]).start_mode(), StartMode::Once);
        assert!(parse(&[]).daemon_settings().expect("defaults").incremental.is_none(), "full nights by default");
        assert!(CronArgs::try_parse_from(["ranker-cron", "--once", "--run-now"]).is_err());
    }

    #[test]
    fn bad_settings_are_refused_at_start_with_a_clear_error() {
        let error = parse(&["--schedule", "61 * * * * *"]).daemon_settings().expect_err("bad second");
        assert!(error.to_string().contains("invalid cron expression"), "{error}");
        let error = parse(&["--time-zone", "Mars/Olympus"]).daemon_settings().expect_err("bad zone");
        assert!(error.to_string().contains("unknown time zone \"Mars/Olympus\""), "{error}");
        assert!(parse(&["--retry-attempts", "0"]).daemon_settings().is_err());
        for usage in [["--lease-ttl-secs", "1"], ["--concurrency", "0"], ["--max-rate", "0"], ["--pace", "gentle"]] {
            assert!(CronArgs::try_parse_from([&["ranker-cron"][..], &usage[..]].concat()).is_err(), "{usage:?}");
        }
        let error = parse(&["--config", "/nonexistent/ranker.toml"]).daemon_settings().expect_err("missing file");
        assert!(error.to_string().contains("/nonexistent/ranker.toml"), "{error}");
    }
}
