//! A copy-on-write storage backend for read-only opens.
//!
//! Invariant: the file underneath is never written; every write lives in memory.

use super::StoreError;

/// A storage backend that reads a file and keeps every write in memory, in
/// blocks of [`Overlay::BLOCK`] bytes: the file itself is never changed.
#[derive(Debug)]
pub(super) struct Overlay {
    file: std::fs::File,
    state: std::sync::Mutex<OverlayState>,
}

#[derive(Debug)]
struct OverlayState {
    /// The storage's length as redb sees it.
    len: u64,
    /// Bytes of the file below this offset are still valid (a shrink cuts it).
    file_valid: u64,
    /// Written blocks by block number.
    blocks: std::collections::HashMap<u64, Box<[u8]>>,
}

impl Overlay {
    const BLOCK: u64 = 4096;

    pub(super) fn new(file: std::fs::File) -> Result<Self, StoreError> {
        let len = file.metadata()?.len();
        Ok(Self {
            file,
            state: std::sync::Mutex::new(OverlayState {
                len,
                file_valid: len,
                blocks: std::collections::HashMap::new(),
            }),
        })
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, OverlayState>, std::io::Error> {
        self.state
            .lock()
            .map_err(|_| std::io::Error::other("overlay lock poisoned"))
    }

    /// Block `b` as it reads now: written, or from the file (zeros past its valid end).
    fn load(&self, st: &OverlayState, b: u64) -> Result<Box<[u8]>, std::io::Error> {
        if let Some(block) = st.blocks.get(&b) {
            return Ok(block.clone());
        }
        let mut block = vec![0u8; Self::BLOCK as usize].into_boxed_slice();
        let start = b * Self::BLOCK;
        if start < st.file_valid {
            let n = (st.file_valid - start).min(Self::BLOCK) as usize;
            std::os::unix::fs::FileExt::read_exact_at(&self.file, &mut block[..n], start)?;
        }
        Ok(block)
    }
}

impl redb::StorageBackend for Overlay {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.state()?.len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let st = self.state()?;
        if offset + out.len() as u64 > st.len {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let (b, within) = (at / Self::BLOCK, (at % Self::BLOCK) as usize);
            let n = (Self::BLOCK as usize - within).min(out.len() - done);
            match st.blocks.get(&b) {
                Some(block) => out[done..done + n].copy_from_slice(&block[within..within + n]),
                None if at + n as u64 <= st.file_valid => {
                    std::os::unix::fs::FileExt::read_exact_at(
                        &self.file,
                        &mut out[done..done + n],
                        at,
                    )?;
                }
                None => {
                    let block = self.load(&st, b)?;
                    out[done..done + n].copy_from_slice(&block[within..within + n]);
                }
            }
            done += n;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut st = self.state()?;
        if len < st.len {
            // what lies past the new end reads as zeros if the storage grows again
            let last = len / Self::BLOCK;
            if !len.is_multiple_of(Self::BLOCK) {
                let mut block = self.load(&st, last)?;
                block[(len % Self::BLOCK) as usize..].fill(0);
                st.blocks.insert(last, block);
            }
            st.blocks.retain(|b, _| *b * Self::BLOCK < len);
            st.file_valid = st.file_valid.min(len);
        }
        st.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut st = self.state()?;
        if offset + data.len() as u64 > st.len {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (b, within) = (at / Self::BLOCK, (at % Self::BLOCK) as usize);
            let n = (Self::BLOCK as usize - within).min(data.len() - done);
            let mut block = match st.blocks.remove(&b) {
                Some(block) => block,
                None => self.load(&st, b)?,
            };
            block[within..within + n].copy_from_slice(&data[done..done + n]);
            st.blocks.insert(b, block);
            done += n;
        }
        Ok(())
    }
}
