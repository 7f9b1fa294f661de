//! Integration tests: cron (to be written).
