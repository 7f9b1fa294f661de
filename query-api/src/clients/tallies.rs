//! The admissions of each client class by kind, counted under the admission
//! lock and handed to Prometheus's counters when the metrics are rendered
//! ([`super::Clients::publish_tallies`]).
//!
//! Not a Prometheus counter incremented on every request: a counter is one
//! atomic that every worker thread writes, so each increment moves its cache
//! line between cores (about 40 ns of a cached read's 12 µs in its profile).
//! A tally is a plain number next to the client counts that the admission
//! has just written under the same lock.

/// How a request was admitted, as the metric's `kind` label
/// ([`ADMISSION_KINDS`], in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    /// The service was not shedding (or fair shedding is off): nobody's share was asked.
    Calm,
    /// Within the even share, with few requests in flight: its HBase work may
    /// take the connections kept for such clients.
    Sheltered,
    /// Within its fair rate, but not sheltered (above the even share, or
    /// with many requests in flight).
    Within,
    /// Over its fair rate: a place in the room the greedy clients share.
    Room,
    /// Come less than a second ago: let in until its rate is known.
    Newcomer,
    /// A named key exempt from every limit.
    Exempt,
}

/// The `kind` labels of `reviews_api_client_admissions_total`, in the order of [`Admitted`].
pub const ADMISSION_KINDS: [&str; 6] = ["calm", "sheltered", "within", "room", "newcomer", "exempt"];

impl Admitted {
    fn index(self) -> usize {
        self as usize
    }

    /// Whether it takes a place in the room the clients over their fair
    /// rate and the newcomers share.
    pub(super) fn in_room(self) -> bool {
        matches!(self, Admitted::Room | Admitted::Newcomer)
    }
}

/// One class's admissions since the tallies were last taken, by kind, in
/// the order of [`ADMISSION_KINDS`].
pub(super) type ClassTally = [u64; ADMISSION_KINDS.len()];

/// The tallies of every class, by the class's index among the policy's classes.
#[derive(Debug, Default)]
pub(super) struct Tallies {
    by_class: Vec<ClassTally>,
}

impl Tallies {
    /// Counts an admission of `kind` for the class at `class`.
    pub(super) fn admitted(&mut self, class: usize, kind: Admitted) {
        if self.by_class.len() <= class {
            self.by_class.resize_with(class + 1, ClassTally::default);
        }
        self.by_class[class][kind.index()] += 1;
    }

    /// The tallies so far, by class index, leaving none.
    pub(super) fn take(&mut self) -> Vec<ClassTally> {
        std::mem::take(&mut self.by_class)
    }
}

/// The Prometheus counters of one client class, registered once.
pub(super) struct ClassCounters {
    pub(super) requests: metrics::Counter,
    /// By reason, in the order of [`super::REFUSAL_REASONS`].
    pub(super) refusals: [metrics::Counter; 3],
    /// By kind, in the order of [`ADMISSION_KINDS`].
    pub(super) admissions: [metrics::Counter; ADMISSION_KINDS.len()],
}

impl ClassCounters {
    /// Adds `tally` to the counters: each admission is a request too.
    pub(super) fn publish(&self, tally: &ClassTally) {
        for (counter, count) in self.admissions.iter().zip(tally) {
            counter.increment(*count);
        }
        self.requests.increment(tally.iter().sum());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_count_by_class_and_kind_and_start_again_once_taken() {
        let mut tallies = Tallies::default();
        tallies.admitted(2, Admitted::Room);
        tallies.admitted(2, Admitted::Room);
        tallies.admitted(0, Admitted::Calm);
        let taken = tallies.take();
        assert_eq!(taken.len(), 3);
        assert_eq!(taken[0], [1, 0, 0, 0, 0, 0]);
        assert_eq!(taken[1], ClassTally::default());
        assert_eq!(taken[2][Admitted::Room.index()], 2);
        assert!(tallies.take().is_empty(), "taken tallies are not counted again");
    }
}
