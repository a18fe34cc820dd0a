//! A damaged database file, where redb panics instead of returning an error.
//!
//! redb checks its pages' checksums when it recovers from an unclean shutdown
//! and in [`redb::Database::check_integrity`]; a file damaged *after* a clean
//! close (a bad sector, a stray write, a half-restored copy) is trusted on open,
//! and reading a damaged page can then hit an `unreachable!()` inside redb.
//!
//! Invariant: a panic raised while [`contain`] opens or checks a file becomes
//! [`StoreError::Damaged`] naming the file (and the hook prints nothing); a
//! panic inside redb anywhere else,
//! once [`install_hook`] ran, it becomes one line naming the file and what to
//! do, and the process exits with code 1 — never a raw panic and backtrace.
//! Panics that do not come from redb keep the hook that was there before.

use super::StoreError;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

thread_local! {
    /// Whether this thread runs inside [`contain`] (then the hook stays quiet).
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic into [`StoreError::Damaged`] for `path`. `f` only
/// opens or checks the file through redb, so a panic in it is redb's.
pub(crate) fn contain<T>(
    path: &Path,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let was = CONTAINED.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CONTAINED.with(|c| c.set(was));
    match result {
        Ok(r) => r,
        Err(payload) => Err(StoreError::Damaged {
            path: path.display().to_string(),
            detail: payload_text(payload.as_ref()),
        }),
    }
}

/// Whether a panic location lies in redb's source.
fn from_redb(file: &str) -> bool {
    file.contains("/redb-") || file.contains("\\redb-")
}

fn payload_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Installs the process-wide panic hook for a process working on `db`: a panic
/// inside redb outside [`contain`] prints `postfach: database DB is damaged:
/// DETAIL; ADVICE` on stderr and exits with code 1. `advice` is what the
/// caller's users should do next.
pub fn install_hook(db: PathBuf, advice: &'static str) {
    let previous = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        let Some(loc) = info.location().filter(|l| from_redb(l.file())) else {
            return previous(info);
        };
        if CONTAINED.with(Cell::get) {
            return; // contain() reports it as an error
        }
        let detail = payload_text(info.payload());
        let e = StoreError::Damaged {
            path: db.display().to_string(),
            detail: format!("{detail} ({}:{})", loc.file(), loc.line()),
        };
        eprintln!("postfach: {e}; {advice}");
        std::process::exit(1);
    }));
}
