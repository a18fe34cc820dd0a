//! Tests of `commit`.

use super::*;
use crate::engine::{Malformed, Publish};
use crate::model::Vars;

/// Commands whose encoding is the log format (see the module doc).
fn golden_commands() -> Vec<Command> {
    vec![
        Command::Publish(Publish {
            name: "AuftragAbgeschlossen".into(),
            key: "4711".into(),
            message_id: Some("evt-1".into()),
            variables: crate::model::vars([("erledigtePositionen", 1200.into())]),
            ttl: Some(86_400_000),
            attributes: vec![("pubsub.message_id".into(), "42".into())],
        }),
        Command::Start {
            process: "auftrag-ausfuehrung".into(),
            vars: crate::model::vars([("auftragId", "4711".into())]),
            business_key: None,
        },
        Command::Malformed(Malformed {
            name: "AuftragAbgeschlossen".into(),
            message_id: "kaputt".into(),
            raw: b"{\"auftragId\":".to_vec(),
            attributes: Vec::new(),
            error: "payload is not JSON".into(),
        }),
        Command::Tick,
    ]
}

/// The log frame of these commands, as format 2 writes it. When this test
/// fails, the log format changed: bump `codec::FORMAT_VERSION`, migrate, and
/// only then update the bytes.
const GOLDEN: &str = concat!(
    "50465232d3000000ea33ba800107fd00a8da769b010000040214417566747261",
    "67416267657363686c6f7373656e043437313101056576742d311c7b2265726c",
    "656469677465506f736974696f6e656e223a313230307d01fc005c2605011170",
    "75627375622e6d6573736167655f69640234320113617566747261672d617573",
    "6675656872756e67147b22617566747261674964223a2234373131227d000414",
    "41756674726167416267657363686c6f7373656e066b61707574740d7b226175",
    "66747261674964223a00137061796c6f6164206973206e6f74204a534f4e14"
);

/// `LockJobsFetching`, the variant added after the frame above: last in
/// the enum, so logs written before it decode unchanged.
const GOLDEN_FETCHING: &str = "504652322c000000843a6cb50108fd00a8da769b01000001160a6162726563686e756e6714027731fcc02709000109617566747261674964";

#[test]
fn the_fetching_lock_command_is_pinned() {
    let cmd = [Command::LockJobsFetching {
        topic: "abrechnung".into(),
        max: 20,
        owner: "w1".into(),
        lease: 600_000,
        fetch: vec!["auftragId".into()],
    }];
    let frame = wal::frame(8, 1_767_225_600_000, &cmd).unwrap();
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, GOLDEN_FETCHING, "the log format changed");
}

/// How many variants `Command` has; [`variant_index`] numbers them.
const VARIANTS: usize = 38;

/// The position of `c`'s variant in the enum (its tag in the log). The
/// match has no wildcard arm: a new variant does not compile until it is
/// numbered here, which leads to [`every_variant`] and its golden bytes.
fn variant_index(c: &Command) -> usize {
    match c {
        Command::Deploy { .. } => 0,
        Command::Start { .. } => 1,
        Command::Publish(_) => 2,
        Command::Correlate(_) => 3,
        Command::Malformed(_) => 4,
        Command::Signal { .. } => 5,
        Command::RunContinuations { .. } => 6,
        Command::LockJobs { .. } => 7,
        Command::CompleteJob { .. } => 8,
        Command::FailJob { .. } => 9,
        Command::ExtendLease { .. } => 10,
        Command::ThrowError { .. } => 11,
        Command::RetryJob { .. } => 12,
        Command::Requeue { .. } => 13,
        Command::Discard { .. } => 14,
        Command::AddToken { .. } => 15,
        Command::MoveToken { .. } => 16,
        Command::CancelToken { .. } => 17,
        Command::Cleanup { .. } => 18,
        Command::ReleaseAllLeases => 19,
        Command::Tick => 20,
        Command::Task { .. } => 21,
        Command::LockJobsFetching { .. } => 22,
        Command::Trigger { .. } => 23,
        Command::ParkedEventsSent { .. } => 24,
        Command::SignalOnce { .. } => 25,
        Command::SignalsForwarded { .. } => 26,
        Command::StartByConditions { .. } => 27,
        Command::AdHoc { .. } => 28,
        Command::By { .. } => 29,
        Command::CancelInstance { .. } => 30,
        Command::SetVariables { .. } => 31,
        Command::BackupTaken { .. } => 32,
        Command::Migrate { .. } => 33,
        Command::CreateBatch { .. } => 34,
        Command::RunBatch { .. } => 35,
        Command::StopBatch { .. } => 36,
        Command::SlotMove(_) => 37,
    }
}

/// One example of every variant, in enum order.
fn every_variant() -> Vec<Command> {
    let publish = Publish {
        name: "AuftragAbgeschlossen".into(),
        key: "4711".into(),
        message_id: Some("evt-1".into()),
        variables: crate::model::vars([("ok", true.into())]),
        ttl: Some(60_000),
        attributes: Vec::new(),
    };
    let mut out = vec![
        Command::Deploy {
            file: "a.bpmn".into(),
            xml: "<definitions/>".into(),
            overrides: [("M".to_string(), "k".to_string())].into(),
        },
        Command::Start {
            process: "p".into(),
            vars: crate::model::vars([("k", "4711".into())]),
            business_key: Some("B-1".into()),
        },
        Command::Publish(publish.clone()),
        Command::Correlate(publish),
        Command::Malformed(Malformed {
            name: "M".into(),
            message_id: "m-1".into(),
            raw: vec![0xff, 0x00],
            attributes: vec![("a".into(), "b".into())],
            error: "not JSON".into(),
        }),
        Command::Signal {
            name: "Alarm".into(),
            vars: crate::model::vars([("stufe", 2.into())]),
        },
        Command::RunContinuations { limit: 100 },
        Command::LockJobs {
            topic: "t".into(),
            max: 10,
            owner: "w".into(),
            lease: 30_000,
            in_process: true,
        },
        Command::CompleteJob {
            job: 7,
            lease: Some(3),
            vars: crate::model::vars([("r", 1.into())]),
        },
        Command::FailJob {
            job: 7,
            lease: None,
            error: "boom".into(),
            retries_left: Some(2),
            retry_delay: Some(5_000),
        },
        Command::ExtendLease {
            job: 7,
            lease: 3,
            by: 10_000,
        },
        Command::ThrowError {
            job: 7,
            lease: Some(3),
            code: "E1".into(),
            message: "nein".into(),
            vars: Vars::new(),
        },
        Command::RetryJob { job: 7 },
    ];
    out.extend(later_variants());
    out
}

/// The examples of [`every_variant`] from `Requeue` on, in enum order.
fn later_variants() -> Vec<Command> {
    vec![
        Command::Requeue { id: "m-1".into() },
        Command::Discard {
            id: "m-1".into(),
            by: "ops".into(),
            why: "doppelt".into(),
        },
        Command::AddToken {
            instance: 1,
            element: "a".into(),
            force: false,
        },
        Command::MoveToken {
            instance: 1,
            token: 2,
            element: "b".into(),
            force: true,
        },
        Command::CancelToken {
            instance: 1,
            token: 2,
        },
        Command::Cleanup { limit: 500 },
        Command::ReleaseAllLeases,
        Command::Tick,
        Command::Task {
            task: 9,
            user: "anna".into(),
            action: crate::engine::TaskAction::Assign { to: "ben".into() },
        },
        Command::LockJobsFetching {
            topic: "t".into(),
            max: 1,
            owner: "w".into(),
            lease: 30_000,
            fetch: vec!["k".into()],
        },
        Command::Trigger {
            instance: 1,
            token: 2,
            vars: crate::model::vars([("ok", true.into())]),
        },
        Command::ParkedEventsSent { ids: vec![1, 300] },
        Command::SignalOnce {
            id: "p1-s2".into(),
            name: "Alarm".into(),
            vars: crate::model::vars([("stufe", 2.into())]),
        },
        Command::SignalsForwarded {
            done: vec![(2, false), (300, true)],
        },
        Command::StartByConditions {
            process: Some("p".into()),
            vars: crate::model::vars([("betrag", 500.into())]),
        },
        Command::AdHoc {
            instance: 1,
            token: 2,
            activate: Some("pruefen".into()),
        },
        Command::By {
            by: "anna".into(),
            command: Box::new(Command::CancelToken {
                instance: 1,
                token: 2,
            }),
        },
        Command::CancelInstance { instance: 1 },
        Command::SetVariables {
            instance: 1,
            token: 2,
            local: true,
            vars: crate::model::vars([("ok", true.into())]),
        },
        Command::BackupTaken {
            id: "20261206T150000Z-p0".into(),
        },
        Command::Migrate {
            plan: crate::engine::MigrationPlan {
                process: "auftrag".into(),
                from: 1,
                to: 2,
                map: [("warten".to_string(), "abwarten".to_string())].into(),
            },
            instances: vec![7, 9],
            dry_run: false,
        },
        Command::CreateBatch {
            op: crate::store::batches::BatchOp::MoveToken {
                from: "warten".into(),
                to: "pruefen".into(),
            },
            items: vec![
                crate::store::batches::BatchItem::Instance(7),
                crate::store::batches::BatchItem::Message("M/1".into()),
            ],
        },
        Command::RunBatch {
            batch: 3,
            limit: 100,
        },
        Command::StopBatch { batch: 3 },
        Command::SlotMove(crate::engine::MoveCommand::Exported {
            batch: 1024,
            upto: 16,
        }),
    ]
}

/// The log bytes of each example in [`every_variant`], in order. When one
/// differs, the log format changed: bump the format, migrate, and only
/// then update the bytes.
const GOLDEN_EACH: [&str; VARIANTS] = [
    "010006612e62706d6e0e3c646566696e6974696f6e732f3e01014d016b",
    "010101700c7b226b223a2234373131227d0103422d31",
    "01021441756674726167416267657363686c6f7373656e043437313101056576742d310b7b226f6b223a747275657d01fb60ea00",
    "01031441756674726167416267657363686c6f7373656e043437313101056576742d310b7b226f6b223a747275657d01fb60ea00",
    "0104014d036d2d3102ff000101610162086e6f74204a534f4e",
    "010505416c61726d0b7b227374756665223a327d",
    "010664",
    "010701740a0177fb307501",
    "0108070103077b2272223a317d",
    "0109070004626f6f6d010201fb8813",
    "010a0703fb1027",
    "010b070103024531046e65696e027b7d",
    "010c07",
    "010d036d2d31",
    "010e036d2d31036f707307646f7070656c74",
    "010f01016100",
    "01100102016201",
    "01110102",
    "0112fbf401",
    "0113",
    "0114",
    "01150904616e6e61020362656e",
    "01160174010177fb307501016b",
    "011701020b7b226f6b223a747275657d",
    "01180201fb2c01",
    "01190570312d733205416c61726d0b7b227374756665223a327d",
    "011a020200fb2c0101",
    "011b0101700e7b22626574726167223a3530307d",
    "011c010201077072756566656e",
    "011d04616e6e61110102",
    "011e01",
    "011f0102010b7b226f6b223a747275657d",
    "0120133230323631323036543135303030305a2d7030",
    "012107617566747261670102010677617274656e08616277617274656e02070900",
    "0122030677617274656e077072756566656e02000701034d2f31",
    "01230364",
    "012403",
    "012501fb000410",
];

/// One example of every step of a slot move, in enum order, and its log
/// bytes (the steps travel inside [`Command::SlotMove`]).
fn every_move_step() -> Vec<(crate::engine::MoveCommand, &'static str)> {
    use crate::engine::MoveCommand as M;
    use crate::slots::{MovePhase, SlotMove};
    let sm = SlotMove {
        id: 1024,
        first: 0,
        last: 9,
        slots: vec![(0, 0), (2, 2)],
        from: 0,
        to: 1,
        to_url: "http://p1".into(),
        version: 2,
        phase: MovePhase::Exporting,
    };
    vec![
        (
            M::Begin {
                first: 0,
                last: 9,
                to: 1,
                to_url: "http://p1".into(),
                version: 2,
            },
            "010000090109687474703a2f2f703102",
        ),
        (
            M::Exported {
                batch: 1024,
                upto: 16,
            },
            "0101fb000410",
        ),
        (M::Flip { batch: 1024 }, "0102fb0004"),
        (
            M::Forget {
                batch: 1024,
                limit: 16,
            },
            "0103fb000410",
        ),
        (
            M::Import {
                slot_move: sm.clone(),
                upto: 2,
                counters: vec![("instance".into(), 7)],
                records: vec![
                    crate::store::Moved::Message(4096, vec![1, 2]),
                    crate::store::Moved::Gone,
                ],
            },
            "0104fb000400090200000202000109687474703a2f2f70310200020108696e7374616e6365070201fb001002010202",
        ),
        (
            M::Adopt {
                slot_move: sm.clone(),
            },
            "0105fb000400090200000202000109687474703a2f2f70310200",
        ),
        (
            M::CatchUp {
                batch: 1024,
                fence_at: 512,
            },
            "0106fb0004fb0002",
        ),
        (
            M::Import {
                slot_move: SlotMove {
                    phase: MovePhase::Copying { round: 1 },
                    ..sm
                },
                upto: 4,
                counters: vec![],
                records: vec![
                    crate::store::Moved::InstanceGone(4097),
                    crate::store::Moved::MessageGone(8193),
                ],
            },
            "0104fb000400090200000202000109687474703a2f2f703102030104000203fb011004fb0120",
        ),
    ]
}

#[test]
fn every_move_step_has_golden_bytes() {
    for (i, (step, golden)) in every_move_step().iter().enumerate() {
        let hex: String = crate::codec::encode(step)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, *golden, "the log bytes of move step {i} changed");
    }
}

#[test]
fn every_command_variant_has_golden_bytes() {
    let examples = every_variant();
    let tags: Vec<usize> = examples.iter().map(variant_index).collect();
    assert_eq!(
        tags,
        (0..VARIANTS).collect::<Vec<_>>(),
        "one example of every variant, in enum order"
    );
    for (i, c) in examples.iter().enumerate() {
        let hex: String = crate::codec::encode(c)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, GOLDEN_EACH[i], "the log bytes of variant {i} changed");
    }
}

#[test]
fn a_frame_of_commands_their_callers_encoded_is_the_frame_of_the_commands() {
    let cmds = golden_commands();
    let all: Vec<Option<Vec<u8>>> = cmds
        .iter()
        .map(|c| Some(wal::encode_command(c).unwrap()))
        .collect();
    // every other one left to the writer, as a deploy is
    let some: Vec<Option<Vec<u8>>> = all
        .iter()
        .enumerate()
        .map(|(i, p)| if i % 2 == 0 { p.clone() } else { None })
        .collect();
    let whole = wal::frame(7, 1_767_225_600_000, &cmds).unwrap();
    for encoded in [all, some] {
        let frame = wal::frame_of_parts(7, 1_767_225_600_000, &cmds, &encoded).unwrap();
        assert_eq!(frame, whole);
    }
}

#[test]
fn the_log_record_format_is_pinned() {
    let frame = wal::frame(7, 1_767_225_600_000, &golden_commands()).unwrap();
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, GOLDEN, "the log format changed");
}
