//! The run history as the table `ranker runs` prints: one aligned line per
//! run attempt, newest first, with its error and first product failures below.
//! The history itself is read and written by `common::store::runs`.

use chrono::{DateTime, SecondsFormat, Utc};
use common::store::runs::RunRecord;

/// The columns of [`format_runs_table`].
const HEADERS: [&str; 13] = [
    "STARTED (UTC)",
    "STATUS",
    "KIND",
    "TRY",
    "DURATION",
    "PRODUCTS",
    "COMMENTS",
    "WRITTEN",
    "DELETED",
    "FAILURES",
    "AS OF (UTC)",
    "RUN ID",
    "HOLDER",
];

/// Renders `runs` (newest first, as `Store::recent_runs` returns them) as the
/// table `ranker runs` prints: aligned columns under a header line, with a
/// run's error and its first product failures on indented lines below it.
pub fn format_runs_table(runs: &[RunRecord]) -> String {
    if runs.is_empty() {
        return "no runs recorded\n".to_owned();
    }
    let rows: Vec<[String; 13]> = runs.iter().map(row).collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut table = String::new();
    push_line(&mut table, &HEADERS.map(str::to_owned), &widths);
    for (run, row) in runs.iter().zip(&rows) {
        push_line(&mut table, row, &widths);
        if let Some(error) = &run.error {
            table.push_str("    error: ");
            table.push_str(error);
            table.push('\n');
        }
        for sample in &run.failure_samples {
            table.push_str("    failed: ");
            table.push_str(sample);
            table.push('\n');
        }
    }
    table
}

fn row(run: &RunRecord) -> [String; 13] {
    [
        timestamp(run.started_ms),
        run.status.to_string(),
        run.kind.as_str().to_owned(),
        run.attempt.to_string(),
        run.duration_ms().map_or_else(|| "-".to_owned(), duration),
        run.products.to_string(),
        run.comments_scored.to_string(),
        run.slots_written.to_string(),
        run.slots_deleted.to_string(),
        run.failures.to_string(),
        timestamp(run.as_of_ms),
        run.run_id.clone(),
        run.holder.clone(),
    ]
}

fn push_line(table: &mut String, cells: &[String; 13], widths: &[usize; 13]) {
    let line: Vec<String> = cells.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
    table.push_str(line.join("  ").trim_end());
    table.push('\n');
}

fn timestamp(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map_or_else(|| ms.to_string(), |time| time.to_rfc3339_opts(SecondsFormat::Secs, true))
}

fn duration(ms: i64) -> String {
    let seconds = ms.max(0) / 1_000;
    match seconds {
        0..60 => format!("{}.{:01}s", seconds, (ms.max(0) % 1_000) / 100),
        60..3_600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3_600, (seconds % 3_600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use common::store::runs::RunStatus;

    use super::*;

    fn listed(run_id: &str, status: RunStatus, duration_ms: Option<i64>, error: Option<&str>) -> RunRecord {
        RunRecord {
            run_id: run_id.to_owned(),
            status,
            started_ms: 1_767_204_000_500,
            ended_ms: duration_ms.map(|duration| 1_767_204_000_500 + duration),
            comments_scored: 56_789,
            error: error.map(str::to_owned),
            holder: "host:42:ab12".to_owned(),
            slot_ms: 1_767_204_000_000,
            attempt: 1,
            as_of_ms: 1_767_204_000_000,
            products: 3,
            slots_written: 25,
            slots_deleted: 2,
            failures: 0,
            failure_samples: Vec::new(),
            ..RunRecord::started(String::new(), String::new(), 0, 1, 0)
        }
    }

    #[test]
    fn lists_each_run_on_an_aligned_line_with_errors_below() {
        let runs = [
            listed("r2", RunStatus::Running, None, None),
            listed("r1", RunStatus::Failed, Some(3_723_000), Some("HBase is unavailable")),
            listed("r0", RunStatus::Succeeded, Some(61_000), None),
        ];
        let table = format_runs_table(&runs);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].starts_with("STARTED (UTC)"));
        assert!(lines[1].contains("2025-12-31T18:00:00Z") && lines[1].contains("running"), "{table}");
        assert!(lines[2].contains("failed") && lines[2].contains("1h02m"), "{table}");
        assert_eq!(lines[3], "    error: HBase is unavailable");
        assert!(lines[4].contains("succeeded") && lines[4].contains("1m01s") && lines[4].contains("56789"));
        let status_column = lines[0].find("STATUS").expect("header");
        for (line, status) in [(lines[1], "running"), (lines[2], "failed"), (lines[4], "succeeded")] {
            assert_eq!(&line[status_column..status_column + status.len()], status, "{table}");
        }
    }

    #[test]
    fn says_so_when_there_are_no_runs() {
        assert_eq!(format_runs_table(&[]), "no runs recorded\n");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(4_250), "4.2s");
        assert_eq!(duration(61_000), "1m01s");
        assert_eq!(duration(7_260_000), "2h01m");
    }
}
