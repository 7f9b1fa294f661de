//! Splitting the product key space into `n` disjoint, contiguous key ranges,
//! so `n` machines can share one run (`--shard i/n`, `i` counted from 0 like
//! Kubernetes' `JOB_COMPLETION_INDEX`).
//!
//! Ids are ten random characters of `[0-9A-Za-z]` (the seed's premise), so the
//! ranges cut the space at two-character id prefixes: 62² = 3,844 of them, in
//! byte order, dealt out in `n` nearly equal runs. Ranges map onto HBase scans
//! directly, so a shard reads only its own part of each table. The first shard
//! starts at the beginning of the table and the last runs to its end, so even a
//! key that is not a valid id belongs to exactly one shard.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The characters of an id, in byte order.
const ID_ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// How many distinct two-character id prefixes there are: the most shards.
pub const MAX_SHARDS: u32 = 62 * 62;

/// One of `count` shards of the product key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, `0..count`.
    pub index: u32,
    /// How many shards share the run, `1..=3844`.
    pub count: u32,
}

/// A range of row keys: `[start, stop)`, `stop` `None` meaning the end of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// The first key in the range.
    pub start: Vec<u8>,
    /// The first key after the range.
    pub stop: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every key.
    pub fn everything() -> KeyRange {
        KeyRange { start: Vec::new(), stop: None }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.stop.as_deref().is_none_or(|stop| key < stop)
    }
}

/// A `--shard` value that is not `i/n` with `0 <= i < n <= 3844`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a shard is written INDEX/COUNT with 0 <= INDEX < COUNT <= {MAX_SHARDS} (for example 3/8), got {0:?}")]
pub struct InvalidShard(String);

impl Shard {
    /// Shard `index` of `count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, InvalidShard> {
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(InvalidShard(format!("{index}/{count}")));
        }
        Ok(Shard { index, count })
    }

    /// The product key range this shard ranks.
    pub fn key_range(&self) -> KeyRange {
        let boundary = |shard: u32| -> usize {
            // u64 so that index * 3844 cannot overflow.
            (u64::from(shard) * u64::from(MAX_SHARDS) / u64::from(self.count)) as usize
        };
        let prefix = |position: usize| vec![ID_ALPHABET[position / 62], ID_ALPHABET[position % 62]];
        let start = if self.index == 0 { Vec::new() } else { prefix(boundary(self.index)) };
        let stop = (self.index + 1 < self.count).then(|| prefix(boundary(self.index + 1)));
        KeyRange { start, stop }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = InvalidShard;

    fn from_str(text: &str) -> Result<Shard, InvalidShard> {
        let invalid = || InvalidShard(text.to_owned());
        let (index, count) = text.trim().split_once('/').ok_or_else(invalid)?;
        let index = index.trim().parse().map_err(|_| invalid())?;
        let count = count.trim().parse().map_err(|_| invalid())?;
        Shard::new(index, count).map_err(|_| invalid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_index_over_count() {
        assert_eq!("3/8".parse::<Shard>(), Ok(Shard { index: 3, count: 8 }));
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard { index: 0, count: 1 }));
        for bad in ["", "3", "8/8", "9/8", "0/0", "-1/4", "a/b", "1/3845", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 3, count: 8 }.to_string(), "3/8");
    }

    #[test]
    fn one_shard_is_everything() {
        assert_eq!(Shard::new(0, 1).expect("shard").key_range(), KeyRange::everything());
    }

    #[test]
    fn consecutive_shards_meet_exactly_and_cover_the_table() {
        for count in [1, 2, 3, 7, 8, 61, 62, 63, 1000, MAX_SHARDS] {
            let ranges: Vec<KeyRange> = (0..count).map(|index| Shard { index, count }.key_range()).collect();
            assert!(ranges[0].start.is_empty());
            assert_eq!(ranges[ranges.len() - 1].stop, None);
            for pair in ranges.windows(2) {
                let stop = pair[0].stop.clone().expect("inner shards stop");
                assert_eq!(stop, pair[1].start);
                assert!(pair[0].start < stop, "shard ranges are never empty");
            }
        }
    }

    proptest! {
        #[test]
        fn every_id_is_in_exactly_one_shard(id in "[0-9A-Za-z]{10}", count in 1u32..=MAX_SHARDS) {
            let holders = (0..count).filter(|&index| Shard { index, count }.key_range().contains(id.as_bytes())).count();
            prop_assert_eq!(holders, 1);
        }

        #[test]
        fn every_key_is_in_exactly_one_shard(key in proptest::collection::vec(any::<u8>(), 0..16), count in 1u32..64) {
            let holders = (0..count).filter(|&index| Shard { index, count }.key_range().contains(&key)).count();
            prop_assert_eq!(holders, 1);
        }
    }
}
