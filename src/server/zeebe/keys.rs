//! Zeebe keys: the 64-bit numbers Camunda's clients hold for instances,
//! jobs, incidents and definitions. Like Zeebe's, a key carries its
//! partition in its top bits (`(partition + 1) << 51 | id`, Zeebe numbering
//! partitions from 1), so a gateway routes a key without a lookup and a key
//! means the same after a restart.
//!
//! The element a job runs for has a key of its own: the job's with bit 62
//! set (Zeebe's element instance key), so `SetVariables` can tell it from
//! an instance of the same number.
//!
//! Invariant: `id_of(key_of(p, id)) == Some((p, id))` for every partition
//! `p < 1024` and id below 2^51, and `element_of` tells an element key from
//! an instance key; any other number (negative, without a partition,
//! beyond 1024 partitions) is no key of postfach.

/// Bits of the id below the partition.
pub const ID_BITS: u32 = 51;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

/// The key of `id` on partition `partition` (0-based, as postfach counts).
pub fn key_of(partition: u32, id: u64) -> i64 {
    (((partition as u64 + 1) << ID_BITS) | (id & ID_MASK)) as i64
}

/// The partition (0-based) and id a key names, if it is one of postfach's.
pub fn id_of(key: i64) -> Option<(u32, u64)> {
    if key <= 0 {
        return None;
    }
    let k = key as u64;
    let p = k >> ID_BITS;
    (1..=1024)
        .contains(&p)
        .then(|| ((p - 1) as u32, k & ID_MASK))
}

/// The bit that marks an element instance key: the element a job runs for,
/// named by the job's id (a job's key and its element's differ only here,
/// so neither is taken for an instance of the same number).
const ELEMENT_BIT: u64 = 1 << 62;

/// The element instance key of the element job `job` runs for.
pub fn element_key_of(partition: u32, job: u64) -> i64 {
    (key_of(partition, job) as u64 | ELEMENT_BIT) as i64
}

/// What an element instance key names: the job whose element it is
/// (`Some(true)` with its partition and id), else a process instance
/// (`Some(false)`), or nothing of postfach's.
pub fn element_of(key: i64) -> Option<(bool, u32, u64)> {
    if key <= 0 {
        return None;
    }
    let k = key as u64;
    let job = k & ELEMENT_BIT != 0;
    id_of((k & !ELEMENT_BIT) as i64).map(|(p, id)| (job, p, id))
}

/// A stable key for something postfach names by text (a process version, a
/// message id): the FNV-1a hash of `text` in the id bits, on `partition`.
pub fn key_of_name(partition: u32, text: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    key_of(partition, h & ID_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_its_partition_and_id_and_nothing_else_is_a_key() {
        for p in [0, 1, 7, 1023] {
            for id in [0, 1, 42, ID_MASK] {
                let k = key_of(p, id);
                assert!(k > 0, "{p} {id}");
                assert_eq!(id_of(k), Some((p, id)));
            }
        }
        // Zeebe's own numbering: partition 1 starts at 2^51
        assert_eq!(key_of(0, 5), (1i64 << 51) + 5);
        for not_ours in [0, -1, 5, i64::MIN, (1025i64 << 51) + 1] {
            assert_eq!(id_of(not_ours), None, "{not_ours}");
        }
        for (p, id) in [(0, 7), (1023, ID_MASK)] {
            let e = element_key_of(p, id);
            assert!(e > 0);
            assert_ne!(e, key_of(p, id));
            assert_eq!(id_of(e), None, "an element key is no job or instance key");
            assert_eq!(element_of(e), Some((true, p, id)));
            assert_eq!(element_of(key_of(p, id)), Some((false, p, id)));
        }
        assert_eq!(key_of_name(0, "auftrag:3"), key_of_name(0, "auftrag:3"));
        assert_ne!(key_of_name(0, "auftrag:3"), key_of_name(0, "auftrag:4"));
    }
}
