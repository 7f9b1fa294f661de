//! When the ranking runs: a cron expression in an IANA time zone, validated at
//! start, and the "slot" (scheduled time) each tick stands for.
//!
//! The slot, not the moment a tick happens to fire, identifies a night's run:
//! two daemons whose ticks for 03:00 fire a few hundred milliseconds apart
//! both compute the same slot, so the lease can tell that the night is done.

use chrono::{DateTime, Offset, SubsecRound, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

/// The default schedule: 03:00:00 every day.
pub const DEFAULT_EXPRESSION: &str = "0 0 3 * * *";
/// The default time zone of the schedule.
pub const DEFAULT_ZONE: &str = "Asia/Seoul";

/// Why a schedule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error(
        "invalid cron expression {expression:?}: {reason}; expected six fields \
         \"second minute hour day-of-month month day-of-week\" (or five, without the seconds), \
         e.g. \"0 0 3 * * *\" for 03:00 every day"
    )]
    InvalidExpression {
        /// The expression as given.
        expression: String,
        /// What the parser said.
        reason: String,
    },
    /// The expression parses but matches no time (such as the 30th of February).
    #[error("cron expression {expression:?} never fires")]
    NeverFires {
        /// The expression as given.
        expression: String,
    },
    /// The time zone is not an IANA name.
    #[error("unknown time zone {zone:?}: use an IANA name such as \"Asia/Seoul\" or \"UTC\"")]
    UnknownZone {
        /// The zone as given.
        zone: String,
    },
}

/// A validated schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    expression: String,
    zone: Tz,
    cron: Cron,
}

/// The parser tokio-cron-scheduler uses (seconds required; day-of-month and
/// day-of-week must both match), so slots are computed exactly as it fires them.
fn parser() -> CronParser {
    CronParser::builder().seconds(Seconds::Required).dom_and_dow(true).build()
}

impl Schedule {
    /// Validates `expression` in `zone`. A five-field expression (classic cron,
    /// no seconds) runs at second 0.
    pub fn parse(expression: &str, zone: &str) -> Result<Schedule, ScheduleError> {
        let zone: Tz = zone.trim().parse().map_err(|_| ScheduleError::UnknownZone { zone: zone.to_owned() })?;
        let trimmed = expression.trim();
        let normalised =
            if trimmed.split_whitespace().count() == 5 { format!("0 {trimmed}") } else { trimmed.to_owned() };
        let cron = parser().parse(&normalised).map_err(|error| ScheduleError::InvalidExpression {
            expression: expression.to_owned(),
            reason: error.to_string(),
        })?;
        let schedule = Schedule { expression: normalised, zone, cron };
        if schedule.next_after(Utc::now()).is_none() {
            return Err(ScheduleError::NeverFires { expression: expression.to_owned() });
        }
        Ok(schedule)
    }

    /// The expression with its seconds field, as handed to the scheduler.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The time zone the expression is read in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first scheduled time strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron.find_next_occurrence(&local, false).ok().map(|next| next.with_timezone(&Utc))
    }

    /// The slot a tick firing at `now` stands for: the latest scheduled time at
    /// or before `now`. The scheduler fires at or shortly after the scheduled
    /// time, never before it.
    pub fn slot_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Cron times are whole seconds; croner would keep the fraction of a matching second.
        let local = now.trunc_subsecs(0).with_timezone(&self.zone);
        self.cron.find_previous_occurrence(&local, true).ok().map(|slot| slot.with_timezone(&Utc))
    }

    /// The slot scheduled within `window` before `now`, if there is one: what a
    /// job re-created at `now` may have missed.
    pub fn slot_within(&self, now: DateTime<Utc>, window: chrono::TimeDelta) -> Option<DateTime<Utc>> {
        self.slot_at(now).filter(|slot| now - *slot <= window)
    }

    /// The zone's offset from UTC at `at`, in seconds. tokio-cron-scheduler
    /// keeps the offset a job was created with, so the daemon re-creates its
    /// job when this changes (daylight saving time).
    pub fn utc_offset_seconds(&self, at: DateTime<Utc>) -> i32 {
        self.zone.offset_from_utc_datetime(&at.naive_utc()).fix().local_minus_utc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("rfc3339").with_timezone(&Utc)
    }

    #[test]
    fn the_default_runs_at_three_in_the_morning_in_seoul() {
        let schedule = Schedule::parse(DEFAULT_EXPRESSION, DEFAULT_ZONE).expect("default schedule");
        // 03:00 in Seoul (UTC+9, no daylight saving) is 18:00 UTC the day before.
        assert_eq!(schedule.next_after(utc("2026-03-01T12:00:00Z")), Some(utc("2026-03-01T18:00:00Z")));
        assert_eq!(schedule.next_after(utc("2026-03-01T18:00:00Z")), Some(utc("2026-03-02T18:00:00Z")));
        assert_eq!(schedule.utc_offset_seconds(utc("2026-07-01T00:00:00Z")), 9 * 3600);
    }

    #[test]
    fn a_tick_stands_for_the_latest_scheduled_time_at_or_before_it() {
        let schedule = Schedule::parse(DEFAULT_EXPRESSION, DEFAULT_ZONE).expect("schedule");
        let slot = utc("2026-03-01T18:00:00Z");
        assert_eq!(schedule.slot_at(slot), Some(slot));
        assert_eq!(schedule.slot_at(utc("2026-03-01T18:00:00.700Z")), Some(slot));
        assert_eq!(schedule.slot_at(utc("2026-03-02T17:59:59Z")), Some(slot));
        let every_two_seconds = Schedule::parse("*/2 * * * * *", "UTC").expect("schedule");
        assert_eq!(every_two_seconds.slot_at(utc("2026-03-01T00:00:05.400Z")), Some(utc("2026-03-01T00:00:04Z")));
    }

    #[test]
    fn five_field_expressions_run_at_second_zero() {
        let schedule = Schedule::parse("30 4 * * *", "UTC").expect("schedule");
        assert_eq!(schedule.expression(), "0 30 4 * * *");
        assert_eq!(schedule.next_after(utc("2026-03-01T00:00:00Z")), Some(utc("2026-03-01T04:30:00Z")));
    }

    #[test]
    fn slots_follow_daylight_saving_time_in_the_zone() {
        let schedule = Schedule::parse("0 0 3 * * *", "America/New_York").expect("schedule");
        // 03:00 EST is 08:00 UTC; after the switch on 2026-03-08, 03:00 EDT is 07:00 UTC.
        assert_eq!(schedule.next_after(utc("2026-03-07T00:00:00Z")), Some(utc("2026-03-07T08:00:00Z")));
        assert_eq!(schedule.next_after(utc("2026-03-08T00:00:00Z")), Some(utc("2026-03-08T07:00:00Z")));
        assert_ne!(
            schedule.utc_offset_seconds(utc("2026-01-15T00:00:00Z")),
            schedule.utc_offset_seconds(utc("2026-07-15T00:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_refused_with_a_clear_error() {
        let error = Schedule::parse("0 0 25 * * *", "UTC").expect_err("hour 25");
        assert!(matches!(error, ScheduleError::InvalidExpression { .. }), "{error}");
        assert!(error.to_string().contains("second minute hour"), "{error}");
        assert!(matches!(Schedule::parse("every night", "UTC"), Err(ScheduleError::InvalidExpression { .. })));
        assert!(matches!(Schedule::parse("", "UTC"), Err(ScheduleError::InvalidExpression { .. })));
        let error = Schedule::parse(DEFAULT_EXPRESSION, "Asia/Atlantis").expect_err("zone");
        assert_eq!(error, ScheduleError::UnknownZone { zone: "Asia/Atlantis".to_owned() });
        assert!(error.to_string().contains("IANA"));
        assert!(matches!(Schedule::parse("0 0 0 30 2 *", "UTC"), Err(ScheduleError::NeverFires { .. })));
    }

    #[test]
    fn the_slot_at_three_on_a_spring_forward_night_is_within_the_round_after_the_offset_changes() {
        // New York moves from UTC-5 to UTC-4 at 07:00 UTC on 2026-03-08, so
        // 03:00 that night is 07:00 UTC: the offset changes at the very moment
        // of the slot, and a job still on the old offset would fire an hour late.
        let schedule = Schedule::parse(DEFAULT_EXPRESSION, "America/New_York").expect("schedule");
        let round = chrono::TimeDelta::seconds(120);
        assert_ne!(
            schedule.utc_offset_seconds(utc("2026-03-08T06:59:00Z")),
            schedule.utc_offset_seconds(utc("2026-03-08T07:00:30Z"))
        );
        assert_eq!(schedule.slot_within(utc("2026-03-08T07:00:30Z"), round), Some(utc("2026-03-08T07:00:00Z")));
        // On an ordinary round, or the night the clocks fall back (the slot is
        // hours away from the change), there is nothing to catch up.
        assert_eq!(schedule.slot_within(utc("2026-03-08T09:00:00Z"), round), None);
        assert_eq!(schedule.slot_within(utc("2026-11-01T06:00:30Z"), round), None);
    }

    #[test]
    fn the_scheduler_accepts_every_validated_expression() {
        for expression in [DEFAULT_EXPRESSION, "*/2 * * * * *", "0 15 2 * * Mon-Fri"] {
            let schedule = Schedule::parse(expression, DEFAULT_ZONE).expect("schedule");
            let job = tokio_cron_scheduler::Job::new_async_tz(schedule.expression(), schedule.zone(), |_, _| {
                Box::pin(async {})
            });
            assert!(job.is_ok(), "{expression}");
        }
    }
}
