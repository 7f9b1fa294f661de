//! cron (skeleton)
