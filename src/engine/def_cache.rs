//! The cache of parsed definitions and of the message catalog, shared by
//! reader threads and the writer.
//!
//! Invariant: an entry is the definition stored under its (process, version)
//! parsed once; entries are never changed, only dropped (all at once when a
//! batch aborts, the catalog whenever a deploy changes it).

use crate::model::Process;
use crate::store::{CatalogEntry, StoreError, StoredDefinition};
use foldhash::HashMap;
use std::sync::{Arc, Mutex};

/// Definitions by (process, version), shared by reader threads and the writer.
/// Entries are immutable; the cache is cleared when a batch aborts.
/// The message catalog (what each message name means to which process) is
/// cached the same way and dropped whenever a deploy changes it.
#[derive(Default)]
pub struct DefCache(
    Mutex<HashMap<(String, u32), Arc<Process>>>,
    Mutex<HashMap<String, CatalogRows>>,
);

pub(super) type CatalogRows = Arc<Vec<(String, CatalogEntry)>>;

impl DefCache {
    pub(super) fn catalog(&self, name: &str) -> Option<CatalogRows> {
        self.1.lock().ok()?.get(name).cloned()
    }
    pub(super) fn put_catalog(&self, name: &str, rows: CatalogRows) {
        if let Ok(mut m) = self.1.lock() {
            m.insert(name.to_string(), rows);
        }
    }
    pub(super) fn clear_catalog(&self) {
        if let Ok(mut m) = self.1.lock() {
            m.clear();
        }
    }
    pub fn get(&self, process: &str, version: u32) -> Option<Arc<Process>> {
        self.0
            .lock()
            .ok()?
            .get(&(process.to_string(), version))
            .cloned()
    }
    pub fn put(&self, process: &str, version: u32, p: Arc<Process>) {
        if let Ok(mut m) = self.0.lock() {
            m.insert((process.to_string(), version), p);
        }
    }
    pub fn clear(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.clear();
        }
        self.clear_catalog();
    }
}

/// Loads a definition through the cache; `fetch` reads it from whichever
/// transaction the caller holds.
pub(crate) fn load_def(
    cache: &DefCache,
    process: &str,
    version: u32,
    fetch: impl FnOnce() -> Result<Option<StoredDefinition>, StoreError>,
) -> Result<Option<Arc<Process>>, StoreError> {
    if let Some(p) = cache.get(process, version) {
        return Ok(Some(p));
    }
    let Some(stored) = fetch()? else {
        return Ok(None);
    };
    let p = Arc::new(stored.load(process, version)?.process);
    cache.put(process, version, p.clone());
    Ok(Some(p))
}
