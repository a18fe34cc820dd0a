//! The floor of the reference order: the rows a reference instance writes,
//! in the transactions the engine writes them in, with bare redb and a log
//! like the engine's — and no engine. It is the limit of this design (one
//! writer thread, a redb transaction per batch committed without fsync, the
//! batch's log frame handed to a second thread before the batch is applied
//! and fsynced there while it is, nobody answered before both are done,
//! a durable redb checkpoint every 500 ms that empties the log), so
//! `reference_instances` is reported as a ratio of it. The log is written as
//! the engine's is (decision 0093): zeros ahead of the appends, so that an
//! append overwrites blocks the file has and its `fdatasync` journals no
//! change of length; and the frame is fsynced while the batch is applied
//! (decision 0094).
//!
//! What the floor does per instance, phase by phase (as the engine's
//! `work_until_idle` drives it): start, publish (buffered: the instance
//! does not wait yet), the hand-over's continuation, its lock, its
//! completion (which correlates the buffered message), the invoice's
//! continuation, lock and completion. Each phase reads what it rewrites or
//! removes (a record is read before its rows change) and writes the engine's
//! rows with values of the engine's sizes. Batches open every table of the
//! floor.
//!
//! [`check_rows`] keeps it honest: before anything is measured it runs one
//! instance through the engine and one through the floor, phase by phase,
//! and compares how many rows each phase adds to or removes from each
//! table. When the engine's rows change, the bench fails and names the
//! phase and the table.

use redb::{
    MultimapTableDefinition, ReadableDatabase, ReadableMultimapTable, ReadableTable,
    ReadableTableMetadata, TableDefinition,
};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const INSTANCES: TableDefinition<u64, &[u8]> = TableDefinition::new("instances");
const HISTORY: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("history");
const TOKENS: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("tokens");
const VARIABLES: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("variables");
const TOKENS_AT: TableDefinition<(&str, u64, u64, u64), ()> = TableDefinition::new("tokens_at");
const VERSION_TOKENS: TableDefinition<(&str, u32, &str, u64, u64, u64), ()> =
    TableDefinition::new("version_tokens");
const EXPECT: MultimapTableDefinition<(&str, &str), u64> = MultimapTableDefinition::new("expect");
const PASSED: MultimapTableDefinition<(&str, &str), u64> = MultimapTableDefinition::new("passed");
const SUBSCRIPTIONS: MultimapTableDefinition<(&str, &str), (u64, u64)> =
    MultimapTableDefinition::new("subscriptions");
const MESSAGES: TableDefinition<u64, &[u8]> = TableDefinition::new("messages");
const DEDUP: TableDefinition<(&str, &str), (u64, u64)> = TableDefinition::new("dedup");
const BUFFER: TableDefinition<(&str, &str, u64), ()> = TableDefinition::new("buffer");
const EXPIRY: TableDefinition<(u64, u64), ()> = TableDefinition::new("expiry");
const BUFFER_AGE: TableDefinition<(u64, u64), ()> = TableDefinition::new("buffer_age");
const INSTANCE_MESSAGES: TableDefinition<(u64, u64), ()> =
    TableDefinition::new("instance_messages");
const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");
const CONT_DUE: TableDefinition<(u64, u64), ()> = TableDefinition::new("cont_due");
const TOPIC_DUE: TableDefinition<(&str, u64, u64), ()> = TableDefinition::new("topic_due");
const LEASES: TableDefinition<(u64, u64), ()> = TableDefinition::new("leases");

const PROCESS: &str = "auftrag-ausfuehrung";
const NAME: &str = "AuftragAbgeschlossen";
const HAND_OVER: &str = "auftragUebergeben";
const INVOICE: &str = "rechnungStellen";
/// When every floor row's instant is (the floor reads no clock).
const T0: u64 = 1_767_225_600_000;

/// One command of the floor, for instance `n` (its instance, job and
/// message all have id `n`).
#[derive(Clone, Copy)]
pub enum Op {
    Start(u64),
    Publish(u64),
    /// Up to 1,024 due continuations.
    Continue,
    /// Up to 1,024 due jobs of the hand-over (`true`) or the invoice.
    Lock(bool),
    CompleteHandOver(u64),
    CompleteInvoice(u64),
}

struct Req {
    op: Op,
    reply: tokio::sync::oneshot::Sender<Vec<u64>>,
}

/// A batch's callers with their answers.
type Done = Vec<(Req, Vec<u64>)>;

/// What the syncer thread is handed: a batch's frame, before the batch is
/// applied, or (at a checkpoint) the log to empty once what came before is
/// synced.
enum ToSyncer {
    Frame(Vec<u8>),
    Empty(mpsc::Sender<()>),
}

/// How many frames are durable, and the applied batches waiting for theirs
/// (by the frame's place in the order handed over), as the engine's syncer
/// keeps them: whichever of writer and syncer finishes last answers.
#[derive(Default)]
struct Progress {
    synced: u64,
    waiting: Vec<(u64, Done)>,
}

fn answer(done: Done) {
    for (req, took) in done {
        let _ = req.reply.send(took);
    }
}

/// The log as the engine keeps it: a header, frames, zeros written ahead of
/// them (as many as the log holds, 4 KiB at least, 4 MiB at most).
struct Log {
    file: std::fs::File,
    size: u64,
    zeroed_until: u64,
}

const LOG_HEADER: &[u8; 8] = b"PFWAL02\n";

impl Log {
    fn create(path: &std::path::Path) -> Log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut log = Log {
            file,
            size: 0,
            zeroed_until: 0,
        };
        log.empty();
        log
    }

    fn write(&mut self, bytes: &[u8]) {
        let end = self.size + bytes.len() as u64;
        if end > self.zeroed_until {
            let ahead = end.clamp(4096, 4 << 20);
            let until = (end + ahead).next_multiple_of(4096);
            let zeros = vec![0u8; (until - self.zeroed_until) as usize];
            self.file.write_all_at(&zeros, self.zeroed_until).unwrap();
            self.zeroed_until = until;
        }
        self.file.write_all_at(bytes, self.size).unwrap();
        self.size = end;
    }

    fn empty(&mut self) {
        self.file.set_len(0).unwrap();
        self.file.write_all_at(LOG_HEADER, 0).unwrap();
        self.file.sync_data().unwrap();
        self.size = LOG_HEADER.len() as u64;
        self.zeroed_until = self.size;
    }
}

/// A floor database and its writer and syncer threads.
pub struct Floor {
    tx: Option<mpsc::Sender<Req>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Floor {
    pub fn open(dir: &std::path::Path) -> Floor {
        let db = redb::Database::builder()
            .set_cache_size(256 * 1024 * 1024)
            .create(dir.join("floor.redb"))
            .unwrap();
        let log = Log::create(&dir.join("floor.log"));
        let (tx, rx) = mpsc::channel::<Req>();
        let writer = std::thread::spawn(move || writer(db, log, rx));
        Floor {
            tx: Some(tx),
            writer: Some(writer),
        }
    }

    /// Applies `op` durably; the instances a `Lock` or `Continue` took.
    pub async fn submit(&self, op: Op) -> Vec<u64> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.as_ref().unwrap().send(Req { op, reply }).unwrap();
        answer.await.unwrap()
    }

    /// What `Postfach::work_until_idle` does for the reference model:
    /// continuations, locks, completions, until nothing is due.
    pub async fn work(&self) {
        loop {
            let mut progressed = !self.submit(Op::Continue).await.is_empty();
            for hand_over in [true, false] {
                let locked = self.submit(Op::Lock(hand_over)).await;
                progressed |= !locked.is_empty();
                let mut set = tokio::task::JoinSet::new();
                for n in locked {
                    let f = self.tx.clone().unwrap();
                    set.spawn(async move {
                        let (reply, answer) = tokio::sync::oneshot::channel();
                        let op = if hand_over {
                            Op::CompleteHandOver(n)
                        } else {
                            Op::CompleteInvoice(n)
                        };
                        f.send(Req { op, reply }).unwrap();
                        answer.await.unwrap();
                    });
                }
                while set.join_next().await.is_some() {}
            }
            if !progressed {
                return;
            }
        }
    }

    pub fn close(mut self) {
        drop(self.tx.take());
        self.writer.take().unwrap().join().unwrap();
    }
}

fn writer(db: redb::Database, log: Log, rx: mpsc::Receiver<Req>) {
    let (sync_tx, sync_rx) = mpsc::channel::<ToSyncer>();
    let progress = std::sync::Arc::new(std::sync::Mutex::new(Progress::default()));
    let theirs = progress.clone();
    let syncer = std::thread::spawn(move || syncer(log, sync_rx, &theirs));
    let mut last_checkpoint = std::time::Instant::now();
    let mut batch_no = 0u64;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < 4096 {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        batch_no += 1;
        // the frame goes to the syncer before the batch is applied
        let mut frame = Vec::new();
        for req in &batch {
            frame.extend_from_slice(&payload(req.op));
        }
        sync_tx.send(ToSyncer::Frame(frame)).unwrap();
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(redb::Durability::None).unwrap();
        let mut done = Vec::with_capacity(batch.len());
        {
            let mut t = Tx::open(&tx);
            for req in batch {
                let took = t.apply(req.op);
                done.push((req, took));
            }
            t.meta.insert("wal_batch", batch_no).unwrap();
            for (i, key) in [
                "seq:instance",
                "seq:job",
                "seq:message",
                "gauge:a",
                "gauge:b",
            ]
            .into_iter()
            .enumerate()
            {
                t.meta.insert(key, batch_no + i as u64).unwrap();
            }
        }
        tx.commit().unwrap();
        {
            let mut p = progress.lock().unwrap();
            if p.synced >= batch_no {
                drop(p);
                answer(done);
            } else {
                p.waiting.push((batch_no, done));
            }
        }
        if last_checkpoint.elapsed() >= std::time::Duration::from_millis(500) {
            let mut tx = db.begin_write().unwrap();
            tx.set_durability(redb::Durability::Immediate).unwrap();
            tx.open_table(META)
                .unwrap()
                .insert("wal_batch", batch_no)
                .unwrap();
            tx.commit().unwrap();
            let (emptied, wait) = mpsc::channel();
            sync_tx.send(ToSyncer::Empty(emptied)).unwrap();
            wait.recv().unwrap();
            last_checkpoint = std::time::Instant::now();
        }
    }
    drop(sync_tx);
    syncer.join().unwrap();
}

/// Appends the frames queued since the last fsync with one fsync, then
/// answers the batches that waited for them (as the engine's syncer);
/// empties the log when the writer's checkpoint asks, after the frames
/// handed over before.
fn syncer(mut log: Log, rx: mpsc::Receiver<ToSyncer>, progress: &std::sync::Mutex<Progress>) {
    while let Ok(first) = rx.recv() {
        let mut frames = Vec::new();
        let mut empty = None;
        for msg in std::iter::once(first).chain(rx.try_iter()) {
            match msg {
                ToSyncer::Frame(f) => frames.push(f),
                // the writer waits for this answer: nothing follows it
                ToSyncer::Empty(done) => empty = Some(done),
            }
        }
        for frame in &frames {
            // magic, length, checksum, body: the engine's frame head
            let mut head = [0u8; 12];
            head[4..8].copy_from_slice(&(frame.len() as u32).to_le_bytes());
            head[8..12].copy_from_slice(&crc32fast::hash(frame).to_le_bytes());
            log.write(&head);
            log.write(frame);
        }
        if !frames.is_empty() {
            log.file.sync_data().unwrap();
            let mut p = progress.lock().unwrap();
            p.synced += frames.len() as u64;
            let upto = p.synced;
            let n = p.waiting.partition_point(|(ticket, _)| *ticket <= upto);
            let ready: Vec<(u64, Done)> = p.waiting.drain(..n).collect();
            drop(p);
            for (_, done) in ready {
                answer(done);
            }
        }
        if let Some(done) = empty {
            log.empty();
            let _ = done.send(());
        }
    }
}

/// The log record of a command: a fixed size per kind, estimated, not taken
/// from the engine (beside the frame's fdatasync its bytes weigh little).
fn payload(op: Op) -> Vec<u8> {
    let len = match op {
        Op::Start(_) => 72,
        Op::Publish(_) => 120,
        Op::Continue | Op::Lock(_) => 40,
        Op::CompleteHandOver(_) | Op::CompleteInvoice(_) => 24,
    };
    vec![7u8; len]
}

/// The tables of one floor transaction.
struct Tx<'t> {
    meta: redb::Table<'t, &'static str, u64>,
    instances: redb::Table<'t, u64, &'static [u8]>,
    history: redb::Table<'t, (u64, u64), &'static [u8]>,
    tokens: redb::Table<'t, (u64, u64), &'static [u8]>,
    variables: redb::Table<'t, (u64, &'static str), &'static [u8]>,
    tokens_at: redb::Table<'t, (&'static str, u64, u64, u64), ()>,
    version_tokens: redb::Table<'t, (&'static str, u32, &'static str, u64, u64, u64), ()>,
    expect: redb::MultimapTable<'t, (&'static str, &'static str), u64>,
    passed: redb::MultimapTable<'t, (&'static str, &'static str), u64>,
    subscriptions: redb::MultimapTable<'t, (&'static str, &'static str), (u64, u64)>,
    messages: redb::Table<'t, u64, &'static [u8]>,
    dedup: redb::Table<'t, (&'static str, &'static str), (u64, u64)>,
    buffer: redb::Table<'t, (&'static str, &'static str, u64), ()>,
    expiry: redb::Table<'t, (u64, u64), ()>,
    buffer_age: redb::Table<'t, (u64, u64), ()>,
    instance_messages: redb::Table<'t, (u64, u64), ()>,
    jobs: redb::Table<'t, u64, &'static [u8]>,
    cont_due: redb::Table<'t, (u64, u64), ()>,
    topic_due: redb::Table<'t, (&'static str, u64, u64), ()>,
    leases: redb::Table<'t, (u64, u64), ()>,
}

/// A value of `len` bytes (the engine's record of that size).
fn val(len: usize) -> Vec<u8> {
    vec![42u8; len]
}

impl<'t> Tx<'t> {
    fn open(tx: &'t redb::WriteTransaction) -> Self {
        Tx {
            meta: tx.open_table(META).unwrap(),
            instances: tx.open_table(INSTANCES).unwrap(),
            history: tx.open_table(HISTORY).unwrap(),
            tokens: tx.open_table(TOKENS).unwrap(),
            variables: tx.open_table(VARIABLES).unwrap(),
            tokens_at: tx.open_table(TOKENS_AT).unwrap(),
            version_tokens: tx.open_table(VERSION_TOKENS).unwrap(),
            expect: tx.open_multimap_table(EXPECT).unwrap(),
            passed: tx.open_multimap_table(PASSED).unwrap(),
            subscriptions: tx.open_multimap_table(SUBSCRIPTIONS).unwrap(),
            messages: tx.open_table(MESSAGES).unwrap(),
            dedup: tx.open_table(DEDUP).unwrap(),
            buffer: tx.open_table(BUFFER).unwrap(),
            expiry: tx.open_table(EXPIRY).unwrap(),
            buffer_age: tx.open_table(BUFFER_AGE).unwrap(),
            instance_messages: tx.open_table(INSTANCE_MESSAGES).unwrap(),
            jobs: tx.open_table(JOBS).unwrap(),
            cont_due: tx.open_table(CONT_DUE).unwrap(),
            topic_due: tx.open_table(TOPIC_DUE).unwrap(),
            leases: tx.open_table(LEASES).unwrap(),
        }
    }

    fn apply(&mut self, op: Op) -> Vec<u64> {
        match op {
            Op::Start(n) => self.start(n),
            Op::Publish(n) => self.publish(n),
            Op::Continue => return self.continue_due(),
            Op::Lock(hand_over) => return self.lock(if hand_over { HAND_OVER } else { INVOICE }),
            Op::CompleteHandOver(n) => self.complete_hand_over(n),
            Op::CompleteInvoice(n) => self.complete_invoice(n),
        }
        Vec::new()
    }

    fn start(&mut self, n: u64) {
        let key = format!("O{n}");
        self.instances.insert(n, val(73).as_slice()).unwrap();
        self.history.insert((n, 1), val(35).as_slice()).unwrap();
        self.tokens.insert((n, 1), val(51).as_slice()).unwrap();
        self.tokens_at.insert((HAND_OVER, T0, n, 1), ()).unwrap();
        self.version_tokens
            .insert((PROCESS, 1, HAND_OVER, T0, n, 1), ())
            .unwrap();
        self.variables
            .insert((n, "auftragId"), val(8).as_slice())
            .unwrap();
        self.jobs.insert(n, val(77).as_slice()).unwrap();
        self.cont_due.insert((T0, n), ()).unwrap();
        self.expect.insert((NAME, key.as_str()), n).unwrap();
    }

    fn publish(&mut self, n: u64) {
        let (key, id) = (format!("O{n}"), format!("evt-{n}"));
        assert!(self.dedup.get((id.as_str(), NAME)).unwrap().is_none());
        // nobody waits yet: buffered
        assert!(
            self.subscriptions
                .get((NAME, key.as_str()))
                .unwrap()
                .next()
                .is_none()
        );
        self.messages.insert(n, val(95).as_slice()).unwrap();
        self.dedup.insert((id.as_str(), NAME), (n, T0 + n)).unwrap();
        self.buffer.insert((NAME, key.as_str(), n), ()).unwrap();
        self.buffer_age.insert((T0 + n, n), ()).unwrap();
        self.expiry.insert((T0 + n + 86_400_000, n), ()).unwrap();
    }

    /// The due continuations (up to 1,024): each becomes its task's job.
    fn continue_due(&mut self) -> Vec<u64> {
        let due: Vec<u64> = self
            .cont_due
            .range((0, 0)..=(T0, u64::MAX))
            .unwrap()
            .take(1024)
            .map(|r| r.unwrap().0.value().1)
            .collect();
        for &n in &due {
            let job = self.jobs.get(n).unwrap().unwrap().value().len();
            self.instances.get(n).unwrap().unwrap();
            self.tokens.get((n, 1)).unwrap().unwrap();
            let topic = if job == 77 { HAND_OVER } else { INVOICE };
            self.jobs.insert(n, val(job + 18).as_slice()).unwrap();
            self.cont_due.remove((T0, n)).unwrap();
            self.topic_due.insert((topic, T0, n), ()).unwrap();
            self.history
                .insert((n, if job == 77 { 2 } else { 4 }), val(26).as_slice())
                .unwrap();
        }
        due
    }

    /// Up to 1,024 due jobs of `topic`, leased; each job's instance, token and
    /// variables are read for its handler.
    fn lock(&mut self, topic: &'static str) -> Vec<u64> {
        let due: Vec<u64> = self
            .topic_due
            .range((topic, 0, 0)..=(topic, T0, u64::MAX))
            .unwrap()
            .take(1024)
            .map(|r| r.unwrap().0.value().2)
            .collect();
        for &n in &due {
            let job = self.jobs.get(n).unwrap().unwrap().value().len();
            self.instances.get(n).unwrap().unwrap();
            self.tokens.get((n, 1)).unwrap().unwrap();
            for v in self.variables.range((n, "")..(n + 1, "")).unwrap() {
                v.unwrap();
            }
            self.jobs.insert(n, val(job + 13).as_slice()).unwrap();
            self.topic_due.remove((topic, T0, n)).unwrap();
            self.leases.insert((T0 + 300_000, n), ()).unwrap();
        }
        due
    }

    /// The hand-over done: the token reaches the catch event, takes the
    /// buffered message and goes on to the invoice's continuation.
    fn complete_hand_over(&mut self, n: u64) {
        let key = format!("O{n}");
        self.jobs.get(n).unwrap().unwrap();
        self.instances.get(n).unwrap().unwrap();
        self.tokens.get((n, 1)).unwrap().unwrap();
        self.leases.remove((T0 + 300_000, n)).unwrap();
        let seq = self
            .buffer
            .range((NAME, key.as_str(), 0)..=(NAME, key.as_str(), u64::MAX))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .0
            .value()
            .2;
        self.messages.get(seq).unwrap().unwrap();
        self.messages.insert(seq, val(123).as_slice()).unwrap();
        self.buffer.remove((NAME, key.as_str(), seq)).unwrap();
        self.buffer_age.remove((T0 + seq, seq)).unwrap();
        self.expiry.remove((T0 + seq + 86_400_000, seq)).unwrap();
        self.instance_messages.insert((n, seq), ()).unwrap();
        self.expect.remove((NAME, key.as_str()), n).unwrap();
        self.passed.insert((NAME, key.as_str()), n).unwrap();
        self.variables
            .insert((n, "erledigtePositionen"), val(4).as_slice())
            .unwrap();
        self.tokens.insert((n, 1), val(49).as_slice()).unwrap();
        self.tokens_at.remove((HAND_OVER, T0, n, 1)).unwrap();
        self.tokens_at.insert((INVOICE, T0, n, 1), ()).unwrap();
        self.version_tokens
            .remove((PROCESS, 1, HAND_OVER, T0, n, 1))
            .unwrap();
        self.version_tokens
            .insert((PROCESS, 1, INVOICE, T0, n, 1), ())
            .unwrap();
        self.jobs.insert(n, val(73).as_slice()).unwrap();
        self.cont_due.insert((T0, n), ()).unwrap();
        self.history.insert((n, 3), val(41).as_slice()).unwrap();
        self.instances.insert(n, val(49).as_slice()).unwrap();
    }

    /// The invoice done: the token ends, and the instance with it.
    fn complete_invoice(&mut self, n: u64) {
        self.jobs.get(n).unwrap().unwrap();
        self.instances.get(n).unwrap().unwrap();
        self.tokens.get((n, 1)).unwrap().unwrap();
        self.leases.remove((T0 + 300_000, n)).unwrap();
        self.jobs.remove(n).unwrap();
        self.tokens.remove((n, 1)).unwrap();
        self.tokens_at.remove((INVOICE, T0, n, 1)).unwrap();
        self.version_tokens
            .remove((PROCESS, 1, INVOICE, T0, n, 1))
            .unwrap();
        self.history.insert((n, 5), val(35).as_slice()).unwrap();
        self.instances.insert(n, val(58).as_slice()).unwrap();
    }
}

/// Rows per table of the database at `path` (multimap tables: their values).
fn rows(path: &std::path::Path) -> BTreeMap<String, i64> {
    use redb::{MultimapTableHandle, TableHandle};
    let db = redb::Database::open(path).unwrap();
    let r = db.begin_read().unwrap();
    let mut m = BTreeMap::new();
    for h in r.list_tables().unwrap() {
        let n = r.open_untyped_table(h.clone()).unwrap().len().unwrap();
        m.insert(h.name().to_string(), n as i64);
    }
    for h in r.list_multimap_tables().unwrap() {
        let n = r
            .open_untyped_multimap_table(h.clone())
            .unwrap()
            .len()
            .unwrap();
        m.insert(h.name().to_string(), n as i64);
    }
    m.remove("meta");
    m
}

/// What each table gained (+) or lost (−) from `before` to `after`.
fn delta(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    let mut d = BTreeMap::new();
    for name in before.keys().chain(after.keys()) {
        let n = after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0);
        if n != 0 {
            d.insert(name.clone(), n);
        }
    }
    d
}

pub const PHASES: [&str; 8] = [
    "start",
    "publish",
    "hand-over continuation",
    "hand-over lock",
    "hand-over completion",
    "invoice continuation",
    "invoice lock",
    "invoice completion",
];

/// Per phase, the rows the floor's instance `n` adds and removes per table.
async fn floor_deltas(dir: &std::path::Path) -> Vec<BTreeMap<String, i64>> {
    let path = dir.join("floor.redb");
    let mut out = Vec::new();
    let mut before = BTreeMap::new();
    for phase in 0..PHASES.len() {
        let floor = Floor::open(dir);
        let op = match phase {
            0 => Op::Start(1),
            1 => Op::Publish(1),
            2 | 5 => Op::Continue,
            3 => Op::Lock(true),
            4 => Op::CompleteHandOver(1),
            6 => Op::Lock(false),
            _ => Op::CompleteInvoice(1),
        };
        floor.submit(op).await;
        floor.close();
        let after = rows(&path);
        out.push(delta(&before, &after));
        before = after;
    }
    out
}

/// The same for one reference instance through the engine (after a first
/// one that created every table).
async fn engine_deltas(dir: &std::path::Path, model: &str) -> Vec<BTreeMap<String, i64>> {
    use postfach::{Postfach, Publish, Vars, vars};
    let path = dir.join("engine.redb");
    let publish = |k: &str| Publish {
        name: NAME.into(),
        key: k.into(),
        message_id: Some(format!("evt-{k}")),
        variables: vars([("erledigtePositionen", 1200.into())]),
        ..Default::default()
    };
    let pf = Postfach::open(&path).unwrap();
    pf.deploy(
        "ref.bpmn",
        model,
        [(NAME.to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    for topic in [HAND_OVER, INVOICE] {
        pf.register_handler(
            topic,
            |_j: postfach::JobContext| async move { Ok(Vars::new()) },
        );
    }
    pf.start(PROCESS, vars([("auftragId", "W".into())]), None)
        .await
        .unwrap();
    pf.publish(publish("W")).await.unwrap();
    pf.work_until_idle().await.unwrap();
    pf.close();
    drop(pf);
    let mut before = rows(&path);
    let mut out = Vec::new();
    let mut lease = 0;
    let mut job = 0;
    for phase in 0..PHASES.len() {
        let pf = Postfach::open(&path).unwrap();
        match phase {
            0 => {
                pf.start(PROCESS, vars([("auftragId", "O1".into())]), None)
                    .await
                    .unwrap();
            }
            1 => {
                pf.publish(publish("O1")).await.unwrap();
            }
            2 | 5 => {
                assert_eq!(pf.run_continuations(1024).await.unwrap(), 1);
            }
            3 | 6 => {
                let topic = if phase == 3 { HAND_OVER } else { INVOICE };
                let locked = pf.lock_jobs(topic, 10, "floor", 300_000).await.unwrap();
                assert_eq!(locked.len(), 1, "one job of {topic}");
                (job, lease) = (locked[0].task.job, locked[0].lease_token);
            }
            _ => pf
                .complete_job(job, Some(lease), Vars::new())
                .await
                .unwrap(),
        }
        pf.close();
        drop(pf);
        let after = rows(&path);
        out.push(delta(&before, &after));
        before = after;
    }
    out
}

/// Fails, naming the phase and the tables, when the floor no longer adds
/// and removes the rows the engine does.
pub async fn check_rows(model: &str) {
    let dir = tempfile::tempdir_in("target/bench-db").unwrap();
    let engine = engine_deltas(dir.path(), model).await;
    let floor = floor_deltas(dir.path()).await;
    for (i, phase) in PHASES.iter().enumerate() {
        assert_eq!(
            engine[i], floor[i],
            "reference_floor no longer writes the engine's rows at the {phase}: \
             rows added (+) and removed (-) per table, the engine's first, the floor's second"
        );
    }
}
