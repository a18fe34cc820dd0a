//! An in-memory database for engine-level tests: every table created, no
//! file, no fsync (test builds only).
//!
//! Invariant: it is written through [`Tables`] like a file database, so what
//! the engine-level tests check holds for the file too.

use crate::store::*;
use redb::ReadableTable;

/// An in-memory database for engine-level tests: no file, no fsync.
pub(crate) struct MemoryStore {
    db: redb::Database,
}

impl MemoryStore {
    /// An empty database with every table created.
    pub fn new() -> Self {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("in-memory database");
        init(&db, "memory", None).expect("tables created");
        MemoryStore { db }
    }

    /// An empty database that is partition `p` of a cluster.
    pub fn partition(p: crate::partition::Partition) -> Self {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("in-memory database");
        init(&db, "memory", Some(p)).expect("tables created");
        MemoryStore { db }
    }

    /// One write transaction over every table; committed when `f` returns.
    pub fn write<T>(&self, f: impl FnOnce(&mut Tables<'_>) -> T) -> T {
        let mut tx = self.db.begin_write().expect("write transaction");
        tx.set_durability(redb::Durability::None)
            .expect("durability");
        let out = {
            let mut tables = Tables::open(&tx).expect("tables");
            let out = f(&mut tables);
            tables.finish().expect("counters written");
            out
        };
        tx.commit().expect("commit");
        out
    }

    /// Every message record, by sequence.
    pub fn messages(&self) -> Vec<MessageRecord> {
        let r = self.db.begin_read().expect("read transaction");
        let t = r.open_table(MESSAGES).expect("messages");
        t.iter()
            .expect("scan")
            .map(|row| crate::store::decode_message(row.expect("row").1.value()).expect("record"))
            .collect()
    }

    /// A read snapshot, as the views and metrics get one.
    pub fn snapshot(&self) -> crate::store::snapshot::Snapshot {
        crate::store::snapshot::Snapshot::new(self.db.begin_read().expect("read transaction"))
    }

    /// What [`verify`] finds.
    pub fn verify(&self) -> Vec<String> {
        super::verify::verify(&self.db.begin_read().expect("read transaction"), false)
            .expect("verify")
    }

    /// What [`verify`] finds, with the rule that every job is held by a token.
    pub fn verify_with_waits(&self) -> Vec<String> {
        super::verify::verify(&self.db.begin_read().expect("read transaction"), true)
            .expect("verify")
    }
}
