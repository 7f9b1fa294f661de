//! The ranker's configuration file (TOML): how comments are scored and how a
//! run is paced. Every field has the default of docs/contract.md §6, so an empty
//! file (or no file) gives the documented ranking; `ranker.example.toml` at the
//! crate root lists every field with its default.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::RankerError;

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RankerConfig {
    /// How a comment's score is computed (`[scoring]`).
    pub scoring: ScoringConfig,
    /// How a run is carried out (`[run]`); command-line flags override these.
    pub run: RunSettings,
    /// How a run paces itself to leave online reads alone (`[pacing]`);
    /// `--pace` and `--max-rate` override these.
    pub pacing: PacingSettings,
    /// How incremental runs choose their products (`[incremental]`);
    /// `--refresh-days` and `--skew-margin-secs` override these.
    pub incremental: IncrementalSettings,
}

/// How incremental runs choose their products.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IncrementalSettings {
    /// Every product is re-ranked in full once in this many nights (each
    /// night `1/refresh_days` of them), because the recency term drifts.
    pub refresh_days: u32,
    /// `--changed-since last` looks for changes from the last completed run's
    /// start less this many seconds: room for the clocks of the ranker's host
    /// and of the region servers (which stamp the cells) to disagree.
    pub skew_margin_secs: u64,
}

impl Default for IncrementalSettings {
    fn default() -> Self {
        IncrementalSettings { refresh_days: 7, skew_margin_secs: 300 }
    }
}

impl IncrementalSettings {
    /// Refuses a refresh period of zero nights.
    pub fn validate(&self) -> Result<(), RankerError> {
        if self.refresh_days == 0 {
            return Err(RankerError::InvalidConfig("incremental.refresh_days must be at least 1".to_owned()));
        }
        Ok(())
    }

    /// The clock-skew margin.
    pub fn skew_margin(&self) -> Duration {
        Duration::from_secs(self.skew_margin_secs)
    }
}

/// The terms of the default score (docs/contract.md §6) and their parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoringConfig {
    /// Comments with fewer characters (Unicode scalar values of the trimmed
    /// content) are not eligible.
    pub min_chars: usize,
    /// The length at which `substance` reaches 1; longer comments score no higher.
    pub length_cap_chars: usize,
    /// The normal quantile of the Wilson lower bound (1.96: 95 % confidence).
    pub wilson_z: f64,
    /// After this many days a comment's recency term halves.
    pub recency_half_life_days: f64,
    /// Photos beyond this many add nothing.
    pub photo_cap: u32,
    /// How much each term counts (`[scoring.weights]`).
    pub weights: Weights,
}

/// The weight of each term in the score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Weights {
    /// Weight of `substance` (length, on a log scale).
    pub substance: f64,
    /// Weight of `helpfulness` (Wilson lower bound of helpful votes).
    pub helpfulness: f64,
    /// Weight of `recency` (exponential decay with the half-life).
    pub recency: f64,
    /// Weight of `photo` (attached photos, capped).
    pub photo: f64,
}

/// Concurrency, retries and page sizes of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunSettings {
    /// Products ranked at once.
    pub concurrency: usize,
    /// Attempts per product before it is reported as failed (1 = no retry).
    pub product_attempts: u32,
    /// Pause before a product's second attempt, in milliseconds; doubles for each further attempt, less jitter.
    pub retry_backoff_ms: u64,
    /// Index rows read per round trip while ranking one product, and most
    /// comments per multi-get (small products share one).
    pub page_rows: usize,
    /// How long, in milliseconds, product discovery keeps retrying a listing
    /// step while HBase is unavailable before the run gives up on the products
    /// after it.
    pub listing_patience_ms: u64,
}

impl Default for ScoringConfig {
    fn default() -> Self {
        ScoringConfig {
            min_chars: 10,
            length_cap_chars: 1000,
            wilson_z: 1.96,
            recency_half_life_days: 180.0,
            photo_cap: 3,
            weights: Weights::default(),
        }
    }
}

impl Default for Weights {
    fn default() -> Self {
        Weights { substance: 0.45, helpfulness: 0.30, recency: 0.15, photo: 0.10 }
    }
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            concurrency: 8,
            product_attempts: 3,
            retry_backoff_ms: 500,
            page_rows: 1_000,
            listing_patience_ms: 60_000,
        }
    }
}

impl RunSettings {
    /// The pause before a product's second attempt.
    pub fn retry_backoff(&self) -> Duration {
        Duration::from_millis(self.retry_backoff_ms)
    }

    /// How long discovery waits out an outage.
    pub fn listing_patience(&self) -> Duration {
        Duration::from_millis(self.listing_patience_ms)
    }
}

impl ScoringConfig {
    /// Refuses parameters that would make scores meaningless (NaN, negative, or
    /// an ordering that depends on float accidents).
    pub fn validate(&self) -> Result<(), RankerError> {
        let invalid = |message: String| Err(RankerError::InvalidConfig(message));
        if self.length_cap_chars == 0 {
            return invalid("scoring.length_cap_chars must be at least 1".to_owned());
        }
        if !(self.wilson_z.is_finite() && self.wilson_z >= 0.0) {
            return invalid(format!("scoring.wilson_z must be a finite number >= 0, got {}", self.wilson_z));
        }
        if !(self.recency_half_life_days.is_finite() && self.recency_half_life_days > 0.0) {
            return invalid(format!(
                "scoring.recency_half_life_days must be a finite number > 0, got {}",
                self.recency_half_life_days
            ));
        }
        if self.photo_cap == 0 {
            return invalid("scoring.photo_cap must be at least 1".to_owned());
        }
        let weights = &self.weights;
        for (name, weight) in [
            ("substance", weights.substance),
            ("helpfulness", weights.helpfulness),
            ("recency", weights.recency),
            ("photo", weights.photo),
        ] {
            if !(weight.is_finite() && weight >= 0.0) {
                return invalid(format!("scoring.weights.{name} must be a finite number >= 0, got {weight}"));
            }
        }
        Ok(())
    }
}

impl RankerConfig {
    /// Parses and validates a configuration file's text.
    pub fn from_toml(text: &str) -> Result<RankerConfig, RankerError> {
        let config: RankerConfig =
            toml::from_str(text).map_err(|error| RankerError::InvalidConfig(error.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<RankerConfig, RankerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| RankerError::InvalidConfig(format!("cannot read {}: {error}", path.display())))?;
        RankerConfig::from_toml(&text)
            .map_err(|error| RankerError::InvalidConfig(format!("{}: {error}", path.display())))
    }

    /// The file at `path`, or the defaults when there is none.
    pub fn load_or_default(path: Option<&Path>) -> Result<RankerConfig, RankerError> {
        path.map_or_else(|| Ok(RankerConfig::default()), RankerConfig::load)
    }

    /// Checks every section.
    pub fn validate(&self) -> Result<(), RankerError> {
        self.scoring.validate()?;
        if self.run.concurrency == 0 {
            return Err(RankerError::InvalidConfig("run.concurrency must be at least 1".to_owned()));
        }
        if self.run.product_attempts == 0 {
            return Err(RankerError::InvalidConfig("run.product_attempts must be at least 1".to_owned()));
        }
        check_page_rows("run.page_rows", self.run.page_rows).map_err(RankerError::InvalidConfig)?;
        self.pacing.validate().map_err(RankerError::InvalidConfig)?;
        self.incremental.validate()?;
        Ok(())
    }
}

/// The most index rows (and comments) one page may read. A page's comments are
/// in memory at once, up to 64 KiB each, for every product in flight: 5,000
/// rows is at most 320 MiB per product, so eight at once still fit a modest
/// machine, and pages past a few thousand rows no longer save round trips.
pub const MAX_PAGE_ROWS: usize = 5_000;

/// The one check of a page size against [`MAX_PAGE_ROWS`], for every setting
/// that holds one; `setting` names it in the error.
pub(crate) fn check_page_rows(setting: &str, rows: usize) -> Result<(), String> {
    if (1..=MAX_PAGE_ROWS).contains(&rows) {
        Ok(())
    } else {
        Err(format!("{setting} must be from 1 to {MAX_PAGE_ROWS}, got {rows}"))
    }
}

/// Whether a run paces itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PaceMode {
    /// At most `max_in_flight` HBase calls at once (the default). `adaptive`,
    /// the name of an earlier latency-driven law, is accepted for it.
    #[serde(alias = "adaptive")]
    #[value(alias = "adaptive")]
    On,
    /// As many calls at once as the run's products make: for a maintenance
    /// window with no readers.
    Off,
}

impl PaceMode {
    /// The mode as flags and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PaceMode::On => "on",
            PaceMode::Off => "off",
        }
    }
}

/// How a run is paced (`[pacing]` in the configuration file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PacingSettings {
    /// `on` (default) or `off`.
    pub mode: PaceMode,
    /// Ceiling in comments per second, in both modes; `None`: no ceiling.
    pub max_rate: Option<f64>,
    /// Index rows (and comments) per page when paced, instead of
    /// `run.page_rows`: a smaller multi-get holds a gateway thread and a
    /// region-server handler for less time, so a reader waits behind it less.
    pub page_rows: usize,
    /// Most HBase calls (product listing steps, index pages, multi-gets, slot
    /// reads and writes) a paced run has in flight at once. A call waiting for
    /// its turn has not reached HBase, so it holds nothing a reader needs.
    pub max_in_flight: usize,
}

impl Default for PacingSettings {
    fn default() -> Self {
        PacingSettings { mode: PaceMode::On, max_rate: None, page_rows: 250, max_in_flight: 1 }
    }
}

impl PacingSettings {
    /// Refuses values that would stop a run.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(max_rate) = self.max_rate {
            if !(max_rate.is_finite() && max_rate > 0.0) {
                return Err(format!("pacing.max_rate must be a finite number > 0, got {max_rate}"));
            }
        }
        check_page_rows("pacing.page_rows", self.page_rows)?;
        if self.max_in_flight == 0 {
            return Err("pacing.max_in_flight must be at least 1".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_gives_the_designs_defaults() {
        let config = RankerConfig::from_toml("").expect("empty config");
        assert_eq!(config, RankerConfig::default());
        assert_eq!(config.scoring.min_chars, 10);
        assert_eq!(config.scoring.length_cap_chars, 1000);
        assert_eq!(config.scoring.wilson_z, 1.96);
        assert_eq!(config.scoring.recency_half_life_days, 180.0);
        assert_eq!(config.scoring.weights, Weights { substance: 0.45, helpfulness: 0.30, recency: 0.15, photo: 0.10 });
    }

    #[test]
    fn the_committed_example_parses_to_the_defaults() {
        let text = include_str!("../ranker.example.toml");
        assert_eq!(RankerConfig::from_toml(text).expect("example config"), RankerConfig::default());
    }

    #[test]
    fn a_partial_file_overrides_only_what_it_names() {
        let config =
            RankerConfig::from_toml("[scoring.weights]\nphoto = 0.5\n[run]\nconcurrency = 2\n").expect("config");
        assert_eq!(config.scoring.weights.photo, 0.5);
        assert_eq!(config.scoring.weights.substance, 0.45);
        assert_eq!(config.run.concurrency, 2);
        assert_eq!(config.run.product_attempts, 3);
    }

    #[test]
    fn pacing_takes_a_mode_and_a_ceiling() {
        let config = RankerConfig::from_toml("[pacing]\nmode = \"off\"\nmax_rate = 5000\n").expect("config");
        assert_eq!(config.pacing.mode, crate::PaceMode::Off);
        assert_eq!(config.pacing.max_rate, Some(5_000.0));
        assert_eq!(config.pacing.max_in_flight, PacingSettings::default().max_in_flight);
    }

    #[test]
    fn refuses_unknown_fields_and_meaningless_values() {
        for bad in [
            "[scoring]\nmin_char = 3\n",
            "[scoring]\nwilson_z = -1.0\n",
            "[scoring]\nrecency_half_life_days = 0.0\n",
            "[scoring]\nlength_cap_chars = 0\n",
            "[scoring.weights]\nrecency = -0.1\n",
            "[scoring.weights]\nrecency = nan\n",
            "[run]\nconcurrency = 0\n",
            "[run]\nproduct_attempts = 0\n",
            "[pacing]\nmode = \"sometimes\"\n",
            "[pacing]\nmax_rate = 0\n",
            "[pacing]\nmax_in_flight = 0\n",
            "[pacing]\ntolerance = 1.5\n",
        ] {
            assert!(RankerConfig::from_toml(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn page_rows_is_bounded_with_a_clear_error() {
        let config = |rows: usize| format!("[run]\npage_rows = {rows}\n");
        for rows in [0, MAX_PAGE_ROWS + 1, 100_000_000] {
            let error = toml::from_str::<RankerConfig>(&config(rows))
                .map_err(|e| e.to_string())
                .and_then(|c| c.validate().map_err(|e| e.to_string()));
            let message = error.expect_err("out of range");
            assert!(message.contains("run.page_rows must be from 1 to 5000"), "{message}");
        }
        let fine: RankerConfig = toml::from_str(&config(MAX_PAGE_ROWS)).expect("parses");
        assert!(fine.validate().is_ok());
    }
}
