//! The log's framing, scanning, tearing and salvage, on files in a
//! temporary folder.

use super::*;
use proptest::prelude::*;

fn record(batch: u64) -> Record {
    Record {
        batch,
        now: 10 * batch,
        commands: (0..batch % 3).map(|_| Command::Tick).collect(),
    }
}

/// A log of `n` records and the byte offset where each frame starts. The
/// zeros written ahead of the appends are cut off: the tests that use it
/// write at the file's end, where the next append would.
fn log_of(path: &Path, n: u64) -> Vec<u64> {
    let (mut w, recs) = Wal::open(path).unwrap();
    assert!(recs.is_empty());
    let mut starts = Vec::new();
    for b in 1..=n {
        starts.push(w.size());
        w.append(&record(b)).unwrap();
    }
    starts.push(w.size());
    drop(w);
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(starts[n as usize])
        .unwrap();
    starts
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn appends_overwrite_zeros_written_ahead_and_the_file_grows_by_doubling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.wal");
    let (mut w, _) = Wal::open(&path).unwrap();
    let mut lengths = std::collections::BTreeSet::new();
    for b in 1..=2000 {
        w.append(&record(b)).unwrap();
        lengths.insert(file_len(&path));
    }
    let end = w.size();
    drop(w);
    // 2,000 appends, the file's length changed at a few of them only
    assert!(lengths.len() <= 8, "{lengths:?}");
    let len = file_len(&path);
    assert!(len > end, "zeros ahead of the appends");
    let scan = Wal::scan(&path).unwrap();
    assert!(scan.zero_tail && !scan.damaged);
    assert_eq!(scan.torn_tail(), 0, "zeros are no torn record");
    // reopened, the zeros are kept and the next appends overwrite them
    let (mut w, recs) = Wal::open(&path).unwrap();
    assert_eq!(recs.len(), 2000);
    assert_eq!(file_len(&path), len);
    w.append(&record(2001)).unwrap();
    drop(w);
    assert_eq!(file_len(&path), len);
    assert_eq!(Wal::open(&path).unwrap().1.len(), 2001);
}

#[test]
fn a_torn_append_into_the_zeros_ahead_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.wal");
    let (mut w, _) = Wal::open(&path).unwrap();
    for b in 1..=3 {
        w.append(&record(b)).unwrap();
    }
    let end = w.size();
    drop(w);
    // the first bytes of the fourth frame reached the disk, not the rest
    let f4 = frame(4, 40, &[Command::Tick]).unwrap();
    let f = File::options().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &f4[..f4.len() - 3], end).unwrap();
    drop(f);
    let scan = Wal::scan(&path).unwrap();
    assert!(!scan.damaged && !scan.zero_tail);
    assert!(scan.torn_tail() > 0);
    let (w, recs) = Wal::open(&path).unwrap();
    assert_eq!(batches(&recs), vec![1, 2, 3]);
    assert_eq!(file_len(&path), end, "cut where the intact records end");
    drop(w);
}

#[test]
fn a_closed_segment_holds_whole_records_without_the_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.wal");
    let (mut w, _) = Wal::open_scanned(&path, None).unwrap();
    for b in 1..=3 {
        w.append(&record(b)).unwrap();
    }
    let end = w.size();
    assert!(file_len(&path) > end);
    let closed = w.fold(Fold::Roll(3)).unwrap().expect("a segment");
    assert_eq!(file_len(&closed), end);
    let scan = Wal::scan(&closed).unwrap();
    assert_eq!((scan.intact_until, scan.records.len()), (end, 3));
    w.append(&record(4)).unwrap();
    drop(w);
    assert_eq!(batches(&Wal::open(&path).unwrap().1), vec![4]);
}

fn batches(recs: &[Record]) -> Vec<u64> {
    recs.iter().map(|r| r.batch).collect()
}

#[test]
fn torn_tail_is_cut_and_intact_records_survive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.wal");
    log_of(&path, 3);
    // a crash in the middle of the fourth append: a prefix of its frame
    let f4 = frame(4, 40, &[Command::Tick]).unwrap();
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&f4[..f4.len() - 3]).unwrap();
    drop(f);
    let (mut w, recs) = Wal::open(&path).unwrap();
    assert_eq!(batches(&recs), vec![1, 2, 3]);
    w.append(&record(4)).unwrap();
    drop(w);
    let (mut w, recs) = Wal::open(&path).unwrap();
    assert_eq!(recs.len(), 4, "appends after a cut tail are readable");
    w.reset().unwrap();
    assert_eq!(w.size(), HEADER.len() as u64);
    drop(w);
    assert!(Wal::open(&path).unwrap().1.is_empty());
}

#[test]
fn an_aborted_batch_is_read_as_never_logged_and_its_number_is_taken_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.wal");
    let (mut w, _) = Wal::open(&path).unwrap();
    let frames = [
        frame(1, 10, &[Command::Tick]).unwrap(),
        // batch 2 failed to apply: its abort record follows it
        frame(2, 20, &[Command::Tick, Command::Tick]).unwrap(),
        abort_frame(2, 20).unwrap(),
        frame(2, 30, &[Command::ReleaseAllLeases]).unwrap(),
        // a batch without commands under a new number is a batch
        frame(3, 40, &[]).unwrap(),
        frame(4, 50, &[Command::Tick]).unwrap(),
    ];
    w.append_frames(frames.iter().map(Vec::as_slice)).unwrap();
    drop(w);
    let (_, recs) = Wal::open(&path).unwrap();
    assert_eq!(batches(&recs), vec![1, 2, 3, 4]);
    assert!(
        matches!(recs[1].commands.as_slice(), [Command::ReleaseAllLeases]),
        "batch 2 is the one applied: {:?}",
        recs[1]
    );
    assert_eq!(recs[1].now, 30);
    assert!(recs[2].commands.is_empty());
}

#[test]
fn zeros_after_the_last_record_are_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.wal");
    log_of(&path, 2);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&[0; 4096]).unwrap();
    drop(f);
    assert_eq!(batches(&Wal::open(&path).unwrap().1), vec![1, 2]);
}

#[test]
fn a_later_sector_of_an_append_without_its_first_is_a_torn_tail() {
    // a disk's write-back kept the second sector of an unsynced append,
    // not the first: the frame's start is zeros, bytes follow
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.wal");
    let starts = log_of(&path, 2);
    let end = starts[2] as usize;
    let big: Vec<Command> = (0..5000).map(|_| Command::Tick).collect();
    let f3 = frame(3, 30, &big).unwrap();
    assert!(f3.len() > 2 * SECTOR, "the append spans sectors");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&f3);
    let first_sector_end = (end / SECTOR + 1) * SECTOR;
    bytes[end..first_sector_end].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(batches(&Wal::open(&path).unwrap().1), vec![1, 2]);
    // foreign bytes where the frame's first sector would be are damage
    let path = dir.path().join("f.wal");
    log_of(&path, 2);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0x5a; 3 * SECTOR]);
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Wal::open(&path),
        Err(StoreError::LogDamaged { .. })
    ));
}

#[test]
fn a_flipped_byte_in_the_middle_refuses_to_open_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("y.wal");
    let starts = log_of(&path, 6);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = starts[2] as usize + FRAME_HEAD + 1;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let Err(StoreError::LogDamaged {
        offset,
        intact_before,
        intact_after,
        ..
    }) = Wal::open(&path)
    else {
        panic!("damage in record 3 of 6 must refuse to open");
    };
    assert_eq!((offset, intact_before, intact_after), (starts[2], 2, 3));
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the log is untouched");
}

#[test]
fn an_impossible_length_or_foreign_bytes_are_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.wal");
    let starts = log_of(&path, 3);
    let mut bytes = std::fs::read(&path).unwrap();
    let len_at = starts[2] as usize + 4;
    bytes[len_at..len_at + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Wal::open(&path),
        Err(StoreError::LogDamaged {
            intact_before: 2,
            intact_after: 0,
            ..
        })
    ));
    let path = dir.path().join("r.wal");
    log_of(&path, 3);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&[0x5a; 4096]).unwrap();
    drop(f);
    assert!(matches!(
        Wal::open(&path),
        Err(StoreError::LogDamaged { .. })
    ));
}

#[test]
fn salvage_keeps_a_copy_and_every_intact_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.wal");
    let starts = log_of(&path, 5);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[starts[1] as usize + FRAME_HEAD] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let s = salvage(&path, 77).unwrap().expect("damaged");
    assert_eq!(s.kept, 4);
    assert_eq!(s.missing_batches, vec![2]);
    assert_eq!(s.damaged_at, starts[1]);
    assert_eq!(
        std::fs::read(&s.backup).unwrap(),
        bytes,
        "the copy is the damaged log"
    );
    assert_eq!(batches(&Wal::open(&path).unwrap().1), vec![1, 3, 4, 5]);
    assert!(
        salvage(&path, 78).unwrap().is_none(),
        "an intact log is left alone"
    );
}

#[test]
fn a_log_of_format_1_is_read_and_replaced_at_reset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.wal");
    let mut bytes = Vec::new();
    for b in 1..=3 {
        let body = codec::encode(&record(b)).unwrap();
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
    }
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2]);
    std::fs::write(&path, &bytes).unwrap();
    let (mut w, recs) = Wal::open(&path).unwrap();
    assert_eq!(batches(&recs), vec![1, 2, 3]);
    assert!(
        w.append(&record(4)).is_err(),
        "no version-2 frame after version-1 ones"
    );
    w.reset().unwrap();
    w.append(&record(4)).unwrap();
    drop(w);
    assert_eq!(batches(&Wal::open(&path).unwrap().1), vec![4]);
}

/// What a mutation of a log of `n` records may do to it.
#[derive(Debug, Clone)]
enum Harm {
    Flip { at: usize, mask: u8 },
    Cut { at: usize },
    Overwrite { at: usize, bytes: Vec<u8> },
}

fn harm() -> impl Strategy<Value = Harm> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, mask)| Harm::Flip { at, mask }),
        any::<usize>().prop_map(|at| Harm::Cut { at }),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..64)
        )
            .prop_map(|(at, bytes)| Harm::Overwrite { at, bytes }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Opens with every record up to a torn tail, or refuses; never with less.
    #[test]
    fn a_harmed_log_opens_whole_or_refuses(n in 1u64..12, harm in harm()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.wal");
        let starts = log_of(&path, n);
        let original = std::fs::read(&path).unwrap();
        let mut bytes = original.clone();
        let len = bytes.len();
        let at_of = |at: &usize| HEADER.len() + at % (len - HEADER.len());
        match &harm {
            Harm::Flip { at, mask } => bytes[at_of(at)] ^= mask,
            Harm::Cut { at } => bytes.truncate(at_of(at)),
            Harm::Overwrite { at, bytes: b } => {
                let at = at_of(at);
                let end = (at + b.len()).min(len);
                bytes[at..end].copy_from_slice(&b[..end - at]);
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        // the first and the last byte that changed (a cut changes all to the end)
        let changed: Vec<usize> = (0..len)
            .filter(|i| bytes.get(*i) != original.get(*i))
            .collect();
        let (Some(&first), Some(&last)) = (changed.first(), changed.last()) else {
            return Ok(());
        };
        // records that end before the first change are intact
        let whole = starts.windows(2).filter(|w| w[1] as usize <= first).count();
        // records that start after the last change are intact too
        let intact_later = starts[..n as usize].iter().filter(|s| **s as usize > last).count();
        match Wal::open(&path) {
            Ok((_, recs)) => {
                prop_assert_eq!(batches(&recs), (1..=whole as u64).collect::<Vec<_>>());
                // losing records is allowed only where a crash could have torn
                // them: at the end, with nothing intact behind them
                prop_assert_eq!(intact_later, 0, "opened without records before {} intact ones", intact_later);
            }
            Err(StoreError::LogDamaged { offset, .. }) => {
                prop_assert_eq!(offset, starts[whole]);
            }
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}
