//! Reference handlers of the article's scenario, for the demo, `postfach run
//! --invoice-ledger` and hosts that want a model of an idempotent side effect.
//!
//! Invariant: an invoice is issued at most once per job idempotency key, however
//! often the job runs (retries, a rerun after a crash, a rerun at the partition
//! its instance moved to) and however many processes share the ledger file; the
//! ledger line is fsynced before the handler reports success.

use crate::{JobContext, vars};
use serde_json::Value;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Arc;

/// The reference invoice system: an append-only ledger file with one line
/// `idempotency-key<TAB>order` per invoice. An invoice whose key is already in the
/// ledger is not issued again, so retries and reruns after a crash are harmless.
/// Several processes may share one file (the partitions of a cluster share
/// one invoice system): each issue holds the file's lock while it reads the
/// lines the others appended and appends its own.
pub struct InvoiceLedger {
    state: std::sync::Mutex<Ledger>,
}

/// The open file, the keys read from it and how far they were read.
struct Ledger {
    file: std::fs::File,
    keys: std::collections::HashSet<String>,
    read_to: u64,
}

impl Ledger {
    /// Reads the whole lines appended since the last read (a line still
    /// being written has no newline yet and is read next time).
    fn catch_up(&mut self) -> std::io::Result<()> {
        self.file.seek(SeekFrom::Start(self.read_to))?;
        let mut fresh = Vec::new();
        self.file.read_to_end(&mut fresh)?;
        let whole = fresh.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for (key, _) in String::from_utf8_lossy(&fresh[..whole])
            .lines()
            .filter_map(line_fields)
        {
            self.keys.insert(key.to_string());
        }
        self.read_to += whole as u64;
        Ok(())
    }
}

impl InvoiceLedger {
    /// Opens (or creates) the ledger and reads the keys already invoiced.
    pub fn open(path: &std::path::Path) -> std::io::Result<Arc<Self>> {
        // a device or a directory is refused before anything is read or made
        crate::files::regular(path)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| crate::files::named(path, e))?;
        let mut ledger = Ledger {
            file,
            keys: std::collections::HashSet::new(),
            read_to: 0,
        };
        ledger.file.lock_shared()?;
        let read = ledger.catch_up();
        ledger.file.unlock()?;
        read?;
        Ok(Arc::new(Self {
            state: std::sync::Mutex::new(ledger),
        }))
    }

    /// Issues the invoice unless its key was invoiced before, here or by
    /// another process on the same file; true if issued now.
    pub fn issue(&self, key: &str, order: &str) -> std::io::Result<bool> {
        let mut l = self
            .state
            .lock()
            .map_err(|_| std::io::Error::other("ledger poisoned"))?;
        if l.keys.contains(key) {
            return Ok(false);
        }
        l.file.lock()?;
        let issued = Self::append_unless_known(&mut l, key, order);
        l.file.unlock()?;
        issued
    }

    /// Under the file's lock: the other processes' lines, then this one's.
    fn append_unless_known(l: &mut Ledger, key: &str, order: &str) -> std::io::Result<bool> {
        l.catch_up()?;
        if l.keys.contains(key) {
            return Ok(false);
        }
        let end = l.file.seek(SeekFrom::End(0))?;
        // a line a killed process left without its newline (it never
        // reported the invoice) is ended with a second tab, which no whole
        // line has: it counts for nothing, and this line starts on its own
        let torn = if end > l.read_to { "\t\n" } else { "" };
        let order: String = order
            .chars()
            .map(|c| if c == '\t' || c == '\n' { ' ' } else { c })
            .collect();
        let line = format!("{torn}{key}\t{order}\n");
        l.file.write_all(line.as_bytes())?;
        l.file.sync_data()?;
        l.read_to = end + line.len() as u64;
        l.keys.insert(key.to_string());
        Ok(true)
    }

    /// Every (key, order) line of a ledger file.
    pub fn entries(path: &std::path::Path) -> std::io::Result<Vec<(String, String)>> {
        let Some(bytes) = crate::files::read_regular(path)? else {
            return Ok(Vec::new());
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: not UTF-8 at byte {}",
                    path.display(),
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        Ok(text
            .lines()
            .filter_map(line_fields)
            .map(|(k, o)| (k.to_string(), o.to_string()))
            .collect())
    }
}

/// The key and order of a whole ledger line: exactly one tab (a line a
/// killed process left unfinished was ended with a second one).
fn line_fields(line: &str) -> Option<(&str, &str)> {
    line.split_once('\t')
        .filter(|(_, order)| !order.contains('\t'))
}

/// The handler of `rechnungStellen`: invoices through the ledger, keyed by the
/// job's idempotency key, then takes `delay` (a slow invoice system).
pub fn invoice_handler(
    ledger: Arc<InvoiceLedger>,
    delay: std::time::Duration,
) -> impl crate::jobs::Handler {
    move |job: JobContext| {
        let ledger = ledger.clone();
        async move {
            let order = job
                .variables
                .get("auftragId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            ledger
                .issue(&job.idempotency_key, &order)
                .map_err(|e| format!("invoice ledger: {e}"))?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(vars([(
                "rechnungNr",
                format!("R-{}", job.idempotency_key).into(),
            )]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_processes_on_one_ledger_issue_a_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("invoices.tsv");
        // two opens: two open file descriptions, locked as two processes' are
        let a = InvoiceLedger::open(&path).unwrap();
        let b = InvoiceLedger::open(&path).unwrap();
        assert!(a.issue("7:rechnungStellen:1", "A-1").unwrap());
        assert!(!b.issue("7:rechnungStellen:1", "A-1").unwrap());
        assert!(b.issue("9:rechnungStellen:1", "A-2").unwrap());
        assert!(!a.issue("9:rechnungStellen:1", "A-2").unwrap());
        let entries = InvoiceLedger::entries(&path).unwrap();
        assert_eq!(
            entries,
            vec![
                ("7:rechnungStellen:1".to_string(), "A-1".to_string()),
                ("9:rechnungStellen:1".to_string(), "A-2".to_string()),
            ]
        );
        // opened again (a restart), both keys are known
        let c = InvoiceLedger::open(&path).unwrap();
        assert!(!c.issue("9:rechnungStellen:1", "A-2").unwrap());
    }

    #[test]
    fn a_line_left_without_its_newline_does_not_swallow_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("invoices.tsv");
        std::fs::write(&path, "1:r:1\tA-1\n2:r:1\tA-").unwrap();
        let l = InvoiceLedger::open(&path).unwrap();
        assert!(!l.issue("1:r:1", "A-1").unwrap());
        assert!(l.issue("3:r:1", "A-3").unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "1:r:1\tA-1\n2:r:1\tA-\t\n3:r:1\tA-3\n");
        // the unfinished invoice was never issued: its rerun issues it
        let again = InvoiceLedger::open(&path).unwrap();
        assert!(again.issue("2:r:1", "A-2").unwrap());
        let orders: Vec<String> = InvoiceLedger::entries(&path)
            .unwrap()
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        assert_eq!(orders, ["A-1", "A-3", "A-2"]);
    }
}
