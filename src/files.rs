//! Files postfach is pointed at from outside: what kind they are, and how much
//! of them is read.
//!
//! Invariant: where a regular file is meant (the database, its write-ahead log,
//! a ledger), a path naming a directory, a device, a FIFO or a socket — also
//! through a symbolic link — is refused with an error naming the path before
//! anything is read or created; a file read whole is read at most up to the
//! length it had when it was opened, so `/dev/zero` or a file that grows while
//! it is read cannot make a read unbounded.

use std::fs::Metadata;
use std::io::{self, Read};
use std::path::Path;

/// The metadata of the regular file at `path`, `None` when nothing is there,
/// or an error naming the path when something else is.
pub(crate) fn regular(path: &Path) -> io::Result<Option<Metadata>> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(Some(m)),
        Ok(m) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {}, not a regular file", path.display(), kind_of(&m)),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(named(path, e)),
    }
}

/// The regular file at `path`, which must exist.
pub(crate) fn existing_regular(path: &Path, what: &str) -> io::Result<Metadata> {
    regular(path)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{what} {} does not exist", path.display()),
        )
    })
}

/// Reads the regular file at `path` whole (`None` when absent), at most the
/// length it had when opened.
pub(crate) fn read_regular(path: &Path) -> io::Result<Option<Vec<u8>>> {
    if regular(path)?.is_none() {
        return Ok(None);
    }
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(named(path, e)),
    };
    read_open(path, f).map(Some)
}

/// Reads an open file from where it stands to the length it had now.
pub(crate) fn read_open(path: &Path, f: std::fs::File) -> io::Result<Vec<u8>> {
    let m = f.metadata().map_err(|e| named(path, e))?;
    if !m.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is {}, not a regular file", path.display(), kind_of(&m)),
        ));
    }
    let mut bytes = Vec::with_capacity(m.len().min(64 << 20) as usize);
    f.take(m.len())
        .read_to_end(&mut bytes)
        .map_err(|e| named(path, e))?;
    Ok(bytes)
}

/// An I/O error with the path it concerns.
pub(crate) fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn kind_of(m: &Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if m.is_dir() {
        "a directory"
    } else {
        "something other than a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_and_devices_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = regular(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory") && e.contains(&dir.path().display().to_string()));
        #[cfg(unix)]
        {
            let e = read_regular(Path::new("/dev/zero"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("/dev/zero is a character device"), "{e}");
        }
        assert!(regular(&dir.path().join("absent")).unwrap().is_none());
        let f = dir.path().join("f");
        std::fs::write(&f, b"abc").unwrap();
        assert_eq!(read_regular(&f).unwrap().unwrap(), b"abc");
    }
}
