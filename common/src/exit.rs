//! The exit statuses every binary of the project uses, so that a script or a
//! scheduler reads one table whichever command it started.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done (or nothing was left to do) |
//! | 1 | failed: look at the log |
//! | 2 | usage: a flag, an argument or the configuration is wrong; clap uses it too |
//! | 75 | try later (`EX_TEMPFAIL` of `sysexits.h`): another run holds the night |
//! | 130 | interrupted by a signal (128 + SIGINT, as shells report it) |

use std::process::ExitCode;

use crate::store::runs::RunStatus;

/// One row of the exit-status table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumIter)]
pub enum ExitStatus {
    /// Done, or nothing was left to do.
    Success,
    /// Failed; the log says why.
    Failure,
    /// A flag, an argument or the configuration is wrong (clap exits with it too).
    Usage,
    /// Another run holds the nightly lease; try again later (`EX_TEMPFAIL`).
    TryLater,
    /// Stopped by SIGINT or SIGTERM before the work was done.
    Interrupted,
}

impl ExitStatus {
    /// The numeric status the process exits with.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::TryLater => 75,
            ExitStatus::Interrupted => 130,
        }
    }

    /// Ends the process at once with this status (for a second signal, which
    /// must not wait for anything).
    pub fn exit_now(self) -> ! {
        std::process::exit(i32::from(self.code()))
    }
}

/// Reports a command's `error` on stderr, its causes on one line (what an
/// operator needs, not a backtrace), and picks the exit status: usage when
/// one of its causes is one `is_usage` recognises (a setting that cannot
/// work, like a bad flag), failure otherwise.
pub fn report_failure(
    error: &anyhow::Error,
    is_usage: impl Fn(&(dyn std::error::Error + 'static)) -> bool,
) -> ExitStatus {
    eprintln!("error: {error:#}");
    if error.chain().any(is_usage) {
        ExitStatus::Usage
    } else {
        ExitStatus::Failure
    }
}

/// How a run's end reads to whoever started it: a lost lease is a failure
/// (nobody asked the run to stop), a shutdown an interruption. The one
/// mapping from a run's status to its exit status, for `ranker run` and
/// `ranker-cron --once` alike.
impl From<RunStatus> for ExitStatus {
    fn from(status: RunStatus) -> ExitStatus {
        match status {
            RunStatus::Succeeded => ExitStatus::Success,
            RunStatus::Failed | RunStatus::Lost | RunStatus::Running => ExitStatus::Failure,
            RunStatus::Interrupted => ExitStatus::Interrupted,
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status.code())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use strum::IntoEnumIterator;

    use super::*;

    #[test]
    fn every_status_has_its_own_code_and_the_table_is_the_documented_one() {
        let codes: Vec<u8> = ExitStatus::iter().map(ExitStatus::code).collect();
        assert_eq!(codes.iter().collect::<HashSet<_>>().len(), codes.len(), "{codes:?}");
        assert_eq!(codes, vec![0, 1, 2, 75, 130]);
    }

    #[test]
    fn usage_is_what_clap_exits_with() {
        use clap::Parser;
        #[derive(Debug, clap::Parser)]
        struct Flags {
            #[arg(long)]
            _count: u8,
        }
        let error = Flags::try_parse_from(["x", "--count", "not-a-number"]).expect_err("bad flag");
        assert_eq!(error.exit_code(), i32::from(ExitStatus::Usage.code()));
    }

    #[test]
    fn a_lost_lease_fails_a_shutdown_interrupts_and_only_success_exits_0() {
        let exits: Vec<ExitStatus> = RunStatus::ENDED.into_iter().map(ExitStatus::from).collect();
        assert_eq!(exits, [ExitStatus::Success, ExitStatus::Failure, ExitStatus::Interrupted, ExitStatus::Failure]);
        assert_eq!(ExitStatus::from(RunStatus::Running), ExitStatus::Failure, "a run that never said how it ended");
    }

    #[test]
    fn a_failure_is_usage_only_when_a_cause_says_so() {
        #[derive(Debug, thiserror::Error)]
        #[error("bad setting")]
        struct BadSetting;
        let usage = anyhow::Error::new(BadSetting).context("loading the configuration");
        let is_bad_setting = |cause: &(dyn std::error::Error + 'static)| cause.is::<BadSetting>();
        assert_eq!(report_failure(&usage, is_bad_setting), ExitStatus::Usage);
        let failure = anyhow::anyhow!("HBase is unavailable").context("reading the run history");
        assert_eq!(report_failure(&failure, is_bad_setting), ExitStatus::Failure);
    }
}
