//! The settings an embedding host opens a database with.
//!
//! Invariant: plain data; `Postfach::open_with` range-checks it before the
//! database is touched.

use crate::clock::{Clock, SystemClock};
use crate::engine::Config;
use std::sync::Arc;

/// Settings of an open database.
#[derive(Clone)]
pub struct Options {
    /// Engine settings (TTLs, dedup window, retries, retention).
    pub config: Config,
    /// The clock every instant comes from (inject a manual one in tests).
    pub clock: Arc<dyn Clock>,
    /// Most commands committed together.
    pub max_batch: usize,
    /// How often the write-ahead log is folded into a durable redb commit.
    /// Longer means fewer redb fsyncs and a longer replay after a crash.
    pub checkpoint_every: std::time::Duration,
    /// The partition this process is in a cluster: a new database becomes
    /// it, an existing one must be it (refused naming both otherwise).
    /// `None`: whatever the database is (a new one unpartitioned).
    pub partition: Option<crate::partition::Partition>,
    /// Whether every message that is parked, expires, is requeued or
    /// discarded leaves an event to publish (`[notifications] parked_topic`
    /// of `postfach run`; read them with
    /// [`crate::ops::Reader::parked_events`]). The setting is stored in the
    /// database: `None` keeps what it has (off in a new one), `Some(None)`
    /// turns it off, `Some(Some(..))` on — for this and every later opening,
    /// so a command line that opens the file between two runs of the server
    /// keeps the events the server would.
    pub parked_events: Option<Option<crate::store::ParkedEvents>>,
    /// Keep the log for an archive (point-in-time restore): a checkpoint
    /// does not empty the log but closes it as a segment
    /// (`LOG.closed-LAST`, beside it) once it holds this many bytes or is
    /// this old, for the archiver to ship (`[backup] archive` of `postfach
    /// run`). `None`: a checkpoint empties the log.
    pub archive: Option<Archive>,
}

/// When the log is closed as a segment for the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Archive {
    /// A segment is closed at the first checkpoint after it is this old …
    pub every: std::time::Duration,
    /// … or holds this many bytes of records.
    pub bytes: u64,
}

impl Default for Archive {
    fn default() -> Self {
        Self {
            every: std::time::Duration::from_secs(60),
            bytes: 16 * 1024 * 1024,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            config: Config::default(),
            clock: Arc::new(SystemClock),
            max_batch: 4096,
            checkpoint_every: std::time::Duration::from_millis(500),
            partition: None,
            parked_events: None,
            archive: None,
        }
    }
}
