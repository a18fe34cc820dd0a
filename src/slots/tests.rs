use super::*;
use crate::partition::Partition;
use proptest::prelude::*;

/// Slot by slot, what the map says, computed the slow way.
fn naive(map: &SlotMap) -> Vec<u32> {
    (0..map.slots()).map(|s| map.owner(s)).collect()
}

#[test]
fn a_cluster_starts_with_slot_s_on_s_mod_p() {
    let m = SlotMap::new(4).unwrap();
    assert_eq!(m.slots(), 4096);
    assert_eq!(m.version(), 1);
    let r: Vec<_> = m
        .ranges()
        .iter()
        .take(5)
        .map(|r| (r.first, r.last, r.partition))
        .collect();
    assert_eq!(
        r,
        vec![(0, 0, 0), (1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 0)]
    );
    assert_eq!(m.ranges().len(), 4096);
    let m = SlotMap::new(3).unwrap();
    assert_eq!(m.slots(), 4095);
    let one = SlotMap::new(1).unwrap();
    assert_eq!(one.to_json(), serde_json::json!([[0, 4095, 0]]));
    let grown = one.assign(2048, 4095, 1).unwrap();
    assert_eq!(
        grown.to_json(),
        serde_json::json!([[0, 2047, 0], [2048, 4095, 1]])
    );
}

/// The documented test vectors (book "Growing a cluster").
#[test]
fn keys_land_in_the_documented_slots() {
    let m = SlotMap::new(4).unwrap();
    let slots: Vec<u32> = ["A-1", "A-2", "A-3", "O-1000", "ü"]
        .iter()
        .map(|k| m.slot_of_key(k))
        .collect();
    assert_eq!(slots, SLOT_VECTORS);
    let parts: Vec<u32> = SLOT_VECTORS.iter().map(|s| m.owner(*s)).collect();
    assert_eq!(parts, PARTITION_VECTORS_4);
}

const SLOT_VECTORS: [u32; 5] = [166, 3827, 3392, 552, 2026];
const PARTITION_VECTORS_4: [u32; 5] = [2, 3, 0, 0, 2];

#[test]
fn every_key_stays_where_modulo_p_put_it() {
    for p in [1u32, 2, 3, 4, 5, 7, 12, 1000, 1024] {
        let m = SlotMap::new(p).unwrap();
        assert_eq!(m.slots() % p, 0, "{p}");
        assert!(m.slots() <= 4096 && m.slots() > 4096 - p, "{p}");
        let old = Partition::new(0, u64::from(p)).unwrap();
        for k in ["A-1", "A-2", "O-1000", "Bestellung 42", "ü", ""] {
            assert_eq!(m.partition_of_key(k), old.of_key(k), "{p} {k}");
        }
        // an id handed out as n·P + i routes to i
        for id in [1u64, 5, 4097, 123_456_789] {
            assert_eq!(m.partition_of_id(id), old.of_id(id), "{p} {id}");
        }
    }
}

#[test]
fn an_assignment_moves_exactly_its_slots_and_bumps_the_version() {
    let m = SlotMap::new(4).unwrap();
    let n = m.assign(1000, 1100, 5).unwrap();
    assert_eq!(n.version(), 2);
    assert_eq!(n.partitions(), 6);
    assert_eq!(n.owner(999), 3);
    assert_eq!(n.owner(1000), 5);
    assert_eq!(n.owner(1100), 5);
    assert_eq!(n.owner(1101), 1);
    // giving each back to its first owner leaves no moved range
    let mut back = n.clone();
    for s in 1000..=1100 {
        back = back.assign(s, s, s % 4).unwrap();
    }
    assert_eq!(naive(&back), naive(&m));
    assert!(back.moved.is_empty());
    assert_eq!(back.version(), 103);
}

#[test]
fn maps_from_outside_are_checked() {
    let r = |first, last, partition| SlotRange {
        first,
        last,
        partition,
    };
    assert_eq!(
        SlotMap::from_ranges(4096, 1, 4, &[r(0, 4094, 0)]).unwrap_err(),
        SlotError::Uncovered(4095)
    );
    assert_eq!(
        SlotMap::from_ranges(4096, 1, 4, &[r(0, 10, 0), r(5, 4095, 1)])
            .unwrap_err()
            .to_string(),
        "slot range 5-4095 overlaps another (slots are 0 to 4095)"
    );
    assert!(matches!(
        SlotMap::from_ranges(4096, 1, 4, &[r(0, 4096, 0)]),
        Err(SlotError::Range { .. })
    ));
    assert_eq!(
        SlotMap::from_ranges(4096, 1, 4, &[r(0, 4095, 1024)]).unwrap_err(),
        SlotError::Partitions(1025)
    );
    assert_eq!(
        SlotMap::from_ranges(0, 1, 4, &[]).unwrap_err(),
        SlotError::Slots(0)
    );
    assert_eq!(parse_range("7", 4096), Ok((7, 7)));
    assert_eq!(parse_range("0-1023", 4096), Ok((0, 1023)));
    assert_eq!(
        parse_range("9-3", 4096).unwrap_err().to_string(),
        "slot range 9-3 is reversed (slots are 0 to 4095)"
    );
    assert!(matches!(
        parse_range("a-b", 4096),
        Err(SlotError::Syntax(_))
    ));
    assert!(matches!(
        parse_range("0-4096", 4096),
        Err(SlotError::Range { .. })
    ));
}

#[test]
fn ids_carry_their_slot_or_their_partition() {
    let m = SlotMap::new(4).unwrap();
    for slot in [0, 17, 4095] {
        for n in [1, 2, 1_000_000] {
            assert_eq!(m.slot_of_id(slot_id(n, 4096, slot)), slot);
        }
    }
    for i in [0, 3, 1023] {
        assert_eq!(partition_of_partition_id(partition_id(9, i)), i);
    }
}

proptest! {
    /// Whatever is assigned, every slot has exactly one owner, the ranges
    /// cover the slots once in order, and a map read back from its ranges
    /// is the same map.
    #[test]
    fn every_slot_has_one_owner_after_any_moves(
        p in 1u32..=12,
        moves in proptest::collection::vec((0u32..4096, 0u32..300, 0u32..16), 0..12),
    ) {
        let mut m = SlotMap::new(p).unwrap();
        let mut owners = naive(&m);
        for (first, len, to) in moves {
            let first = first % m.slots();
            let last = (first + len).min(m.slots() - 1);
            m = m.assign(first, last, to).unwrap();
            for o in &mut owners[first as usize..=last as usize] { *o = to; }
            prop_assert_eq!(&naive(&m), &owners);
        }
        let ranges = m.ranges();
        let mut next = 0;
        for r in &ranges {
            prop_assert_eq!(r.first, next);
            prop_assert!(r.last >= r.first);
            for s in r.first..=r.last { prop_assert_eq!(owners[s as usize], r.partition); }
            next = r.last + 1;
        }
        prop_assert_eq!(next, m.slots());
        let back = SlotMap::from_ranges(u64::from(m.slots()), m.version(), p, &ranges).unwrap();
        prop_assert_eq!(naive(&back), owners);
    }
}

proptest! {
    /// A plan to grow or shrink leaves every partition its share: afterwards
    /// each of the P' owns S / P' or one more and every other one none,
    /// however uneven the map was, each move taking exactly slots its source
    /// owned.
    #[test]
    fn a_plan_shares_the_slots_evenly_growing_or_shrinking(
        p in 1u32..=8,
        grow in -7i32..=6,
        moves in proptest::collection::vec((0u32..4096, 0u32..200, 0u32..8), 0..4),
    ) {
        let mut m = SlotMap::new(p).unwrap();
        for (first, len, to) in moves {
            let first = first % m.slots();
            m = m.assign(first, (first + len).min(m.slots() - 1), to % p).unwrap();
        }
        let target = (m.partitions() as i32 + grow).max(1) as u32;
        let plan = balance_plan(&m, target).unwrap();
        let before = naive(&m);
        for q in 0..m.partitions() {
            let naive_count = before.iter().filter(|o| **o == q).count() as u32;
            prop_assert_eq!(m.count_owned(q), naive_count, "{} of the uneven map", q);
        }
        // the plan applied slot by slot to the naive owners: a map assigned
        // one slot at a time costs the test seconds, and `naive` is what the
        // map's own properties are checked against above
        let mut after = before.clone();
        for mv in &plan {
            // exactly the source's slots in the range move
            for s in mv.first..=mv.last {
                if before[s as usize] == mv.from {
                    after[s as usize] = mv.to;
                }
            }
            prop_assert!(before[mv.first as usize] == mv.from);
        }
        let owned = |q: u32| after.iter().filter(|o| **o == q).count() as u32;
        let share = m.slots() / target;
        for q in 0..target {
            prop_assert!(owned(q) <= share + 1, "{q} owns {}, share {share}", owned(q));
            prop_assert!(owned(q) >= share, "{q}: {}", owned(q));
        }
        for q in target..m.partitions() {
            prop_assert_eq!(owned(q), 0, "{} keeps slots", q);
        }
        prop_assert!(after.iter().all(|o| *o < target), "a slot left beyond the {target}");
    }
}

#[test]
fn four_partitions_grow_to_six() {
    let m = SlotMap::new(4).unwrap();
    let plan = balance_plan(&m, 6).unwrap();
    // 4096 = 4·683 + 2·682: each of the four keeps 683 and gives 341
    let mut to = [0u32; 6];
    let mut from = [0u32; 6];
    for mv in &plan {
        let n = (mv.first..=mv.last).filter(|s| s % 4 == mv.from).count() as u32;
        to[mv.to as usize] += n;
        from[mv.from as usize] += n;
    }
    assert_eq!(&to[4..], &[682, 682]);
    assert_eq!(&from[..4], &[341, 341, 341, 341]);
    assert!(balance_plan(&m, 4).unwrap().is_empty());
}

#[test]
fn six_partitions_shrink_to_four() {
    let m = SlotMap::new(4).unwrap();
    let m = apply(&m, &balance_plan(&m, 6).unwrap());
    assert_eq!(m.owning(), 6);
    let plan = balance_plan(&m, 4).unwrap();
    assert!(plan.iter().all(|mv| mv.from >= 4 && mv.to < 4), "{plan:?}");
    let m = apply(&m, &plan);
    assert_eq!(m.owning(), 4);
    assert_eq!(
        (0..6).map(|p| m.count_owned(p)).collect::<Vec<_>>(),
        vec![1024, 1024, 1024, 1024, 0, 0]
    );
}

/// `map` after the moves of `plan`, each taking only its source's slots.
fn apply(map: &SlotMap, plan: &[PlannedMove]) -> SlotMap {
    let mut m = map.clone();
    for mv in plan {
        for s in (mv.first..=mv.last).filter(|s| map.owner(*s) == mv.from) {
            m = m.assign(s, s, mv.to).unwrap();
        }
    }
    m
}
