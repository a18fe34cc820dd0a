//! Partitions of a cluster: which partition a database is, and the hash
//! that places a correlation key.
//!
//! A cluster is created with `count` partitions; partition `index` is one
//! postfach process with its own database. An instance lives on the
//! partition that owns its correlation key, and every message for that key
//! goes there, so buffering, deduplication, `late`, `ambiguous` and
//! exactly-one stay decisions of one partition.
//!
//! A key is placed by [`key_hash`] of its UTF-8 bytes — 64-bit FNV-1a
//! (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`), fixed forever
//! — into a key slot, and the slot map names the slot's partition
//! ([`crate::slots`]). A cluster starts with slot s on s mod `count`, so
//! [`Partition::of_key`] and [`Partition::of_id`] (modulo `count`) say where
//! a key or id lies until a slot moves; the engine asks the map. A
//! partition numbered `count` or above joined the cluster to grow it
//! ([`Partition::member`]). Unpartitioned (`count` 1, `index` 0) ids are 1,
//! 2, 3 … as they always were.
//!
//! Invariant: `Partition::new` accepts only `index < count ≤
//! MAX_PARTITIONS`, `Partition::member` `index < MAX_PARTITIONS`, and
//! `of_key`/`of_id` of any value is below `count`.

/// The most partitions a cluster may have.
pub const MAX_PARTITIONS: u32 = 1024;

/// Partition `index` of a cluster of `count` partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Partition {
    index: u32,
    count: u32,
}

/// A partition that cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The number of partitions is 0 or above [`MAX_PARTITIONS`].
    #[error("a cluster has 1 to {MAX_PARTITIONS} partitions, not {0}")]
    Count(u64),
    /// The partition number is not below the number of partitions.
    #[error("partition {index} does not exist in a cluster of {count} (they are numbered 0 to {last})", last = count - 1)]
    Index {
        /// The number given.
        index: u64,
        /// Partitions in the cluster.
        count: u32,
    },
}

impl Partition {
    /// The one partition of an unpartitioned engine.
    pub const SINGLE: Partition = Partition { index: 0, count: 1 };

    /// Partition `index` of `count`, range-checked.
    pub fn new(index: u64, count: u64) -> Result<Self, PartitionError> {
        if count == 0 || count > u64::from(MAX_PARTITIONS) {
            return Err(PartitionError::Count(count));
        }
        if index >= count {
            return Err(PartitionError::Index {
                index,
                count: count as u32,
            });
        }
        Ok(Partition {
            index: index as u32,
            count: count as u32,
        })
    }

    /// Partition `index` of a cluster created with `count` partitions, where
    /// `index` may be `count` or above: a partition that joined the cluster
    /// to grow it, which owns no slot until one is moved to it
    /// ([`crate::slots`]). Range-checked: `count` as for [`Partition::new`],
    /// `index` below [`MAX_PARTITIONS`].
    pub fn member(index: u64, count: u64) -> Result<Self, PartitionError> {
        if count == 0 || count > u64::from(MAX_PARTITIONS) {
            return Err(PartitionError::Count(count));
        }
        if index >= u64::from(MAX_PARTITIONS) {
            return Err(PartitionError::Index {
                index,
                count: MAX_PARTITIONS,
            });
        }
        Ok(Partition {
            index: index as u32,
            count: count as u32,
        })
    }

    /// Whether this partition joined after the cluster was created (its
    /// number is its first count or above).
    pub fn joined(self) -> bool {
        self.index >= self.count
    }

    /// This partition's number.
    pub fn index(self) -> u32 {
        self.index
    }

    /// Partitions in the cluster.
    pub fn count(self) -> u32 {
        self.count
    }

    /// Whether the engine is one of several partitions.
    pub fn is_clustered(self) -> bool {
        self.count > 1 || self.index > 0
    }

    /// The partition that owns correlation key `key`.
    pub fn of_key(self, key: &str) -> u32 {
        (key_hash(key.as_bytes()) % u64::from(self.count)) as u32
    }

    /// The partition that handed out `id`.
    pub fn of_id(self, id: u64) -> u32 {
        (id % u64::from(self.count)) as u32
    }

    /// Whether this partition owns correlation key `key`.
    pub fn owns_key(self, key: &str) -> bool {
        self.of_key(key) == self.index
    }

    /// Whether this partition handed out `id`.
    pub fn owns_id(self, id: u64) -> bool {
        self.of_id(id) == self.index
    }

    /// The `n`-th id (counting from 1) of a kind this partition hands out.
    pub fn id(self, n: u64) -> u64 {
        n.saturating_mul(u64::from(self.count))
            .saturating_add(u64::from(self.index))
    }
}

impl std::fmt::Display for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.joined() {
            return write!(
                f,
                "partition {} (joined a cluster created with {})",
                self.index, self.count
            );
        }
        write!(f, "partition {} of {}", self.index, self.count)
    }
}

/// 64-bit FNV-1a of `bytes`: the hash that places a correlation key.
pub fn key_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The documented test vectors (README "More than one machine"): any
    /// implementation of the placement must give these.
    #[test]
    fn keys_land_on_the_documented_partitions() {
        assert_eq!(key_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(key_hash(b"foobar"), 0x8594_4171_f739_67e8);
        let four = Partition::new(0, 4).unwrap();
        let placed: Vec<u32> = ["A-1", "A-2", "A-3", "A-4", "O-1000", "Bestellung 42", "ü"]
            .iter()
            .map(|k| four.of_key(k))
            .collect();
        assert_eq!(placed, VECTORS_4);
    }

    /// Partitions of the keys above in a cluster of 4 (README).
    const VECTORS_4: [u32; 7] = [2, 3, 0, 1, 0, 0, 2];

    #[test]
    fn a_partition_is_range_checked() {
        assert_eq!(Partition::new(0, 0), Err(PartitionError::Count(0)));
        assert_eq!(Partition::new(0, 1025), Err(PartitionError::Count(1025)));
        let e = Partition::new(4, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "partition 4 does not exist in a cluster of 4 (they are numbered 0 to 3)"
        );
        assert!(Partition::new(1023, 1024).is_ok());
    }

    #[test]
    fn unpartitioned_ids_are_what_they_always_were() {
        for n in 1..100 {
            assert_eq!(Partition::SINGLE.id(n), n);
        }
    }

    proptest! {
        /// Every id a partition hands out is its own and no other's, and a
        /// key belongs to exactly one partition.
        #[test]
        fn ids_and_keys_have_one_owner(count in 1u64..=64, n in 1u64..1_000_000, key in ".{0,20}") {
            let parts: Vec<Partition> = (0..count).map(|i| Partition::new(i, count).unwrap()).collect();
            for p in &parts {
                let id = p.id(n);
                prop_assert!(p.owns_id(id));
                prop_assert_eq!(parts.iter().filter(|q| q.owns_id(id)).count(), 1);
            }
            prop_assert_eq!(parts.iter().filter(|q| q.owns_key(&key)).count(), 1);
        }
    }
}
