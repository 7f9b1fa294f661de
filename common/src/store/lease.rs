//! The scheduler's lease: one row per lease name in `ranker-lease` whose JSON
//! says who may run the ranking now, until when, and which scheduled slot was
//! last completed.
//!
//! Every change is a `checkAndPut` against the exact bytes read before it, so
//! of two daemons racing for the lease exactly one wins. A lease names its
//! holder and expires: a holder that dies stops renewing, and once the expiry
//! time has passed the next taker replaces the value (again by compare-and-set,
//! expecting the dead holder's bytes). Releasing writes a free value (no holder)
//! instead of deleting the row, because Thrift1 has no compare-and-delete and
//! the row also carries the completed slot, which must outlive the holder.
//!
//! Expiry compares wall-clock times written by different hosts: keep the
//! daemons' clocks in sync (NTP), and choose a lease TTL much longer than the
//! expected skew.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::{Error, Result};
use crate::hbase::{Retry, COLUMN_VALUE};
use crate::keys;

/// How many times taking a lease re-reads the row after losing a race.
const TAKE_ATTEMPTS: usize = 3;

/// The time leases are judged by, in ms since the epoch. Injected so tests can
/// move time forward without waiting.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in ms since the epoch.
    fn now_ms(&self) -> i64;
}

/// The wall clock: what every daemon sharing a lease must use in production.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
    }
}

/// The stored value of a lease row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseState {
    /// Who holds the lease (`host:pid:random`); `None` once released.
    #[serde(default)]
    pub holder: Option<String>,
    /// The scheduled slot the holder is running.
    #[serde(default)]
    pub slot_ms: Option<i64>,
    /// When the holder took the lease.
    #[serde(default)]
    pub acquired_ms: Option<i64>,
    /// When the lease lapses unless renewed; a free lease has expired.
    pub expires_ms: i64,
    /// The latest slot whose run completed: slots up to it are never run again.
    #[serde(default)]
    pub completed_slot_ms: Option<i64>,
    /// Who completed that slot.
    #[serde(default)]
    pub completed_by: Option<String>,
}

impl LeaseState {
    /// Whether someone holds the lease at `now_ms`.
    pub fn is_held_at(&self, now_ms: i64) -> bool {
        self.holder.is_some() && self.expires_ms > now_ms
    }

    /// Whether the run of `slot_ms` has already completed.
    pub fn has_completed(&self, slot_ms: i64) -> bool {
        self.completed_slot_ms.is_some_and(|completed| completed >= slot_ms)
    }

    fn encode(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|error| Error::InvalidInput(format!("lease does not serialise: {error}")))
    }
}

/// What a daemon asks for when it wants to run a slot.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    /// The lease's name (its row key), such as `nightly`.
    pub name: String,
    /// Who asks (`host:pid:random`).
    pub holder: String,
    /// The scheduled slot it will run.
    pub slot_ms: i64,
    /// How long the lease lasts without renewal.
    pub ttl: Duration,
}

/// A lease this process holds: the exact bytes it last wrote, which the next
/// renewal or the release expects to find.
#[derive(Debug, Clone)]
pub struct HeldLease {
    name: String,
    ttl: Duration,
    bytes: Vec<u8>,
    state: LeaseState,
}

impl HeldLease {
    /// The lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value as last written.
    pub fn state(&self) -> &LeaseState {
        &self.state
    }

    /// How long each renewal extends the lease.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// What happened when a daemon asked for the lease.
#[derive(Debug)]
pub enum TakeOutcome {
    /// The lease is ours. `expired` is the previous holder's value when it had
    /// lapsed without a release (its holder probably died mid-run).
    Taken {
        /// The lease, to renew and release.
        lease: HeldLease,
        /// The lapsed value replaced, if there was one.
        expired: Option<LeaseState>,
    },
    /// Someone else holds it and it has not expired.
    Held(LeaseState),
    /// The requested slot was already completed; nothing was written.
    Completed(LeaseState),
}

/// What happened when the holder renewed.
#[derive(Debug)]
pub enum RenewOutcome {
    /// The lease is ours until the new expiry.
    Renewed,
    /// The row no longer holds our value: the lease lapsed and someone else took it.
    Lost(Option<LeaseState>),
}

/// What happened when the holder released.
#[derive(Debug)]
pub enum ReleaseOutcome {
    /// The lease is free.
    Released,
    /// The row no longer holds our value, so it was left alone.
    NotOurs(Option<LeaseState>),
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

/// A name for this process in leases and the run history: `host:pid:random`.
/// The random part tells apart two daemons in one process (tests) and a
/// restarted daemon that got the same pid.
pub fn default_holder() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    let host: String = host.chars().map(|c| if c.is_ascii_graphic() { c } else { '_' }).collect();
    format!("{host}:{}:{:08x}", std::process::id(), rand::random::<u32>())
}

impl Store {
    /// Reads a lease's current value.
    pub async fn lease(&self, name: &str) -> Result<Option<LeaseState>> {
        match self.lease_bytes(name).await? {
            Some(bytes) => self.decode_lease(name, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Takes the lease for `request.slot_ms` if it is free (absent, released or
    /// expired) and that slot has not completed.
    pub async fn take_lease(&self, request: &LeaseRequest, clock: &dyn Clock) -> Result<TakeOutcome> {
        let mut last_seen = None;
        for _ in 0..TAKE_ATTEMPTS {
            let current = self.lease_bytes(&request.name).await?;
            let previous = match &current {
                Some(bytes) => Some(self.decode_lease(&request.name, bytes)?),
                None => None,
            };
            let now_ms = clock.now_ms();
            if let Some(previous) = &previous {
                if previous.has_completed(request.slot_ms) {
                    return Ok(TakeOutcome::Completed(previous.clone()));
                }
                if previous.is_held_at(now_ms) {
                    return Ok(TakeOutcome::Held(previous.clone()));
                }
            }
            let state = LeaseState {
                holder: Some(request.holder.clone()),
                slot_ms: Some(request.slot_ms),
                acquired_ms: Some(now_ms),
                expires_ms: now_ms.saturating_add(ttl_ms(request.ttl)),
                completed_slot_ms: previous.as_ref().and_then(|previous| previous.completed_slot_ms),
                completed_by: previous.as_ref().and_then(|previous| previous.completed_by.clone()),
            };
            let bytes = state.encode()?;
            if self.swap_lease(&request.name, current, bytes.clone()).await? {
                let lease = HeldLease { name: request.name.clone(), ttl: request.ttl, bytes, state };
                let expired = previous.filter(|previous| previous.holder.is_some());
                return Ok(TakeOutcome::Taken { lease, expired });
            }
            // Another daemon changed the row between our read and our write:
            // read again to see whether it now holds the lease.
            last_seen = self.lease(&request.name).await?;
        }
        match last_seen {
            Some(state) => Ok(TakeOutcome::Held(state)),
            None => Err(Error::Conflict(format!("lease {:?} kept changing while being taken", request.name))),
        }
    }

    /// Extends the lease to now + TTL, if the row still holds our value.
    pub async fn renew_lease(&self, lease: &mut HeldLease, clock: &dyn Clock) -> Result<RenewOutcome> {
        let mut state = lease.state.clone();
        state.expires_ms = clock.now_ms().saturating_add(ttl_ms(lease.ttl));
        let bytes = state.encode()?;
        if self.swap_lease(&lease.name, Some(lease.bytes.clone()), bytes.clone()).await? {
            lease.bytes = bytes;
            lease.state = state;
            Ok(RenewOutcome::Renewed)
        } else {
            Ok(RenewOutcome::Lost(self.lease(&lease.name).await?))
        }
    }

    /// Frees the lease if the row still holds our value. With `completed`, the
    /// lease's slot is recorded as done, so no daemon runs it again.
    pub async fn release_lease(&self, lease: HeldLease, completed: bool, clock: &dyn Clock) -> Result<ReleaseOutcome> {
        let held = &lease.state;
        let (completed_slot_ms, completed_by) = match (completed, held.slot_ms) {
            (true, Some(slot_ms)) if !held.has_completed(slot_ms) => (Some(slot_ms), held.holder.clone()),
            _ => (held.completed_slot_ms, held.completed_by.clone()),
        };
        let free = LeaseState {
            holder: None,
            slot_ms: None,
            acquired_ms: None,
            expires_ms: clock.now_ms(),
            completed_slot_ms,
            completed_by,
        };
        if self.swap_lease(&lease.name, Some(lease.bytes.clone()), free.encode()?).await? {
            Ok(ReleaseOutcome::Released)
        } else {
            Ok(ReleaseOutcome::NotOurs(self.lease(&lease.name).await?))
        }
    }

    async fn lease_bytes(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let table = self.tables().ranker_lease.clone();
        let keys = vec![keys::ranker_lease_key(name)];
        let rows = self
            .hbase()
            .run(Retry::Idempotent, move |connection| connection.get_rows(&table, &keys, &[COLUMN_VALUE.to_vec()]))
            .await?;
        Ok(rows.into_iter().next().and_then(|row| row.cells.into_values().next()))
    }

    fn decode_lease(&self, name: &str, bytes: &[u8]) -> Result<LeaseState> {
        // An undecodable lease is an error, not a free lease: running while
        // unable to tell whether someone else is running is what the lease prevents.
        serde_json::from_slice(bytes).map_err(|error| Error::BadData {
            table: self.tables().ranker_lease.clone(),
            reason: format!("lease {name:?} does not decode ({error}); delete the row to free it"),
        })
    }

    /// Writes `new` if the row holds exactly `expected` (`None`: no row).
    /// Returns whether it wrote.
    async fn swap_lease(&self, name: &str, expected: Option<Vec<u8>>, new: Vec<u8>) -> Result<bool> {
        let table = self.tables().ranker_lease.clone();
        let key = keys::ranker_lease_key(name);
        let outcome = {
            let expected = expected.clone();
            let new = new.clone();
            self.hbase()
                .run(Retry::Once, move |connection| {
                    connection.check_and_put(&table, &key, COLUMN_VALUE, expected.as_deref(), new.clone())
                })
                .await
        };
        match outcome {
            Err(error) if error.is_transient() => {
                // The reply was lost, so the write may or may not have happened.
                // Our value is unique (it names the holder, the slot and times), so
                // the row tells which.
                let current = self.lease_bytes(name).await?;
                if current.as_deref() == Some(new.as_slice()) {
                    Ok(true)
                } else if current == expected {
                    Err(error)
                } else {
                    Ok(false)
                }
            }
            outcome => outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(holder: Option<&str>, expires_ms: i64, completed: Option<i64>) -> LeaseState {
        LeaseState {
            holder: holder.map(str::to_owned),
            slot_ms: None,
            acquired_ms: None,
            expires_ms,
            completed_slot_ms: completed,
            completed_by: None,
        }
    }

    #[test]
    fn a_lease_is_held_only_by_a_holder_before_its_expiry() {
        assert!(state(Some("a"), 1_000, None).is_held_at(999));
        assert!(!state(Some("a"), 1_000, None).is_held_at(1_000));
        assert!(!state(None, 5_000, None).is_held_at(1_000));
    }

    #[test]
    fn a_completed_slot_covers_every_earlier_slot() {
        let lease = state(None, 0, Some(2_000));
        assert!(lease.has_completed(2_000) && lease.has_completed(1_000));
        assert!(!lease.has_completed(2_001));
        assert!(!state(None, 0, None).has_completed(0));
    }

    #[test]
    fn the_stored_value_is_camel_case_json_that_reads_back() {
        let lease = state(Some("host:1:ab"), 42, Some(7));
        let bytes = lease.encode().expect("encode");
        let json: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(json["expiresMs"], 42);
        assert_eq!(json["completedSlotMs"], 7);
        assert_eq!(serde_json::from_slice::<LeaseState>(&bytes).expect("decode"), lease);
    }

    #[test]
    fn the_holder_name_is_host_pid_and_a_random_part() {
        let holder = default_holder();
        let parts: Vec<&str> = holder.rsplitn(3, ':').collect();
        assert_eq!(parts.len(), 3, "{holder}");
        assert_eq!(parts[1], std::process::id().to_string());
        assert_eq!(parts[0].len(), 8);
        assert!(!parts[2].is_empty());
        assert_ne!(default_holder(), holder, "two daemons in one process get different names");
        assert!(holder.bytes().all(|byte| byte.is_ascii_graphic()));
    }
}
