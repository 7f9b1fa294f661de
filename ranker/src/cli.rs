//! The flags `ranker run` and `ranker-cron` share, defined and checked once
//! (as `common::config::HbaseArgs` is for HBase): the lease a run holds, and
//! the configuration file and the flags laid over it.

use std::path::PathBuf;
use std::time::Duration;

use crate::lease::LeaseSettings;
use crate::{PaceMode, RankerConfig, RankerError, RunOptions, Scope};

/// The nightly lease: runs and daemons sharing it never rank at the same time.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaseArgs {
    /// The lease's name: daemons and full or shard runs sharing it never rank
    /// at the same time.
    #[arg(long, value_name = "NAME", env = "RANKER_CRON_LEASE", default_value = "nightly", value_parser = parse_lease_name)]
    pub lease_name: String,

    /// Seconds the lease lasts without renewal (renewed every third of it). A
    /// crashed holder's lease lapses after this long.
    #[arg(long, value_name = "SECS", env = "RANKER_CRON_LEASE_TTL_SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(3..))]
    pub lease_ttl_secs: u64,
}

impl LeaseArgs {
    /// The lease as `holder` takes it.
    pub fn settings(&self, holder: String) -> LeaseSettings {
        LeaseSettings { name: self.lease_name.clone(), ttl: Duration::from_secs(self.lease_ttl_secs), holder }
    }
}

/// The configuration file and the flags that override it.
#[derive(Debug, Clone, clap::Args)]
pub struct TuningArgs {
    /// Configuration file (TOML; see ranker.example.toml): scoring, pacing,
    /// retries. Defaults apply without one.
    #[arg(long, value_name = "PATH", env = "RANKER_CONFIG")]
    pub config: Option<PathBuf>,

    /// Products ranked at once [default: run.concurrency of the config, 8].
    #[arg(long, value_name = "N", env = "RANKER_CONCURRENCY", value_parser = parse_at_least_one)]
    pub concurrency: Option<usize>,

    /// Pacing: `on` makes at most pacing.max_in_flight HBase calls at once (one),
    /// so online reads keep their latency; `off` for a maintenance window
    /// [default: pacing.mode of the config, on].
    #[arg(long, value_enum, value_name = "MODE", env = "RANKER_PACE")]
    pub pace: Option<PaceMode>,

    /// Hard ceiling on comments per second, in both pacing modes [default: pacing.max_rate, none].
    #[arg(long, value_name = "N", env = "RANKER_MAX_RATE", value_parser = parse_rate)]
    pub max_rate: Option<f64>,
}

impl TuningArgs {
    /// The configuration file, or the defaults without one.
    pub fn load_config(&self) -> Result<RankerConfig, RankerError> {
        RankerConfig::load_or_default(self.config.as_deref())
    }

    /// Options for `scope` at `as_of_ms` under `config` with these flags laid
    /// over it; `default_pace`, when given, replaces the config's pacing mode
    /// unless `--pace` says otherwise (`ranker bench-read` reads unpaced).
    pub fn options(
        &self,
        config: &RankerConfig,
        scope: Scope,
        as_of_ms: i64,
        default_pace: Option<PaceMode>,
    ) -> RunOptions {
        let mut options = RunOptions::with_config(scope, as_of_ms, config);
        if let Some(mode) = self.pace.or(default_pace) {
            options.pacing.mode = mode;
        }
        if let Some(max_rate) = self.max_rate {
            options.pacing.max_rate = Some(max_rate);
        }
        if let Some(concurrency) = self.concurrency {
            options.concurrency = concurrency;
        }
        options
    }
}

/// Parses a lease name: any text but blank, trimmed.
fn parse_lease_name(text: &str) -> Result<String, String> {
    match text.trim() {
        "" => Err("the lease name must not be empty".to_owned()),
        name => Ok(name.to_owned()),
    }
}

/// Parses a count of at least one.
fn parse_at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(count) if count >= 1 => Ok(count),
        _ => Err(format!("expected a whole number of at least 1, got {text:?}")),
    }
}

/// Parses a rate in comments per second: a finite number above zero.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!("expected comments per second, a number above 0, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        lease: LeaseArgs,
        #[command(flatten)]
        tuning: TuningArgs,
    }

    fn parse(arguments: &[&str]) -> Result<Flags, clap::Error> {
        Flags::try_parse_from([&["flags"][..], arguments].concat())
    }

    #[test]
    fn the_flags_lay_over_the_configuration() {
        let config = RankerConfig::default();
        let flags = parse(&["--pace", "off", "--max-rate", "20000", "--concurrency", "3"]).expect("parses");
        let options = flags.tuning.options(&config, Scope::All, 0, None);
        assert_eq!(
            (options.pacing.mode, options.pacing.max_rate, options.concurrency),
            (PaceMode::Off, Some(20_000.0), 3)
        );
        let defaults = parse(&[]).expect("parses").tuning.options(&config, Scope::All, 0, None);
        assert_eq!((defaults.pacing.mode, defaults.pacing.max_rate), (PaceMode::On, None));
        let unpaced = parse(&[]).expect("parses").tuning.options(&config, Scope::All, 0, Some(PaceMode::Off));
        assert_eq!(unpaced.pacing.mode, PaceMode::Off, "a caller's default pace");
        let paced =
            parse(&["--pace", "adaptive"]).expect("parses").tuning.options(&config, Scope::All, 0, Some(PaceMode::Off));
        assert_eq!(paced.pacing.mode, PaceMode::On, "--pace wins, under the earlier law's name too");
    }

    #[test]
    fn the_lease_is_named_and_lasts_at_least_three_seconds() {
        let lease = parse(&["--lease-name", " night-2 ", "--lease-ttl-secs", "30"]).expect("parses").lease;
        assert_eq!(
            lease.settings("me".to_owned()),
            LeaseSettings { name: "night-2".to_owned(), ttl: Duration::from_secs(30), holder: "me".to_owned() }
        );
        assert_eq!(parse(&[]).expect("parses").lease.settings("me".to_owned()).ttl, Duration::from_secs(600));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for bad in [
            &["--lease-name", " "][..],
            &["--lease-ttl-secs", "2"],
            &["--concurrency", "0"],
            &["--concurrency", "many"],
            &["--max-rate", "0"],
            &["--max-rate", "fast"],
            &["--pace", "sometimes"],
        ] {
            let error = parse(bad).expect_err("refused");
            assert_eq!(error.exit_code(), 2, "{bad:?}: {error}");
        }
    }
}
