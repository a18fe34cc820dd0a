//! The database file on the simulated disk of the power-loss tests
//! ([`crate::disk::sim`]), as redb's storage.
//!
//! Invariant: every write, length change and sync goes to the simulated disk,
//! which keeps only what was synced when the power goes.

use crate::disk::sim::Disk;
use std::io;

/// A database file on the simulated disk.
#[derive(Debug)]
pub(crate) struct Backend {
    pub(crate) disk: Disk,
    pub(crate) name: String,
}

impl redb::StorageBackend for Backend {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.disk.len_of(&self.name))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.disk.read_at(&self.name, offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.disk.set_len(&self.name, len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.disk.sync_file(&self.name)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.disk.write_at(&self.name, offset, data)
    }
}
