//! Reference handlers of the article's scenario, for the demo, `postfach run
//! --invoice-ledger` and hosts that want a model of an idempotent side effect.
//!
//! Invariant: an invoice is issued at most once per job idempotency key, however
//! often the job runs (retries, a rerun after a crash); the ledger line is
//! fsynced before the handler reports success.

use crate::{JobContext, vars};
use serde_json::Value;
use std::sync::Arc;

/// The reference invoice system: an append-only ledger file with one line
/// `idempotency-key<TAB>order` per invoice. An invoice whose key is already in the
/// ledger is not issued again, so retries and reruns after a crash are harmless.
pub struct InvoiceLedger {
    file: std::sync::Mutex<std::fs::File>,
    keys: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl InvoiceLedger {
    /// Opens (or creates) the ledger and reads the keys already invoiced.
    pub fn open(path: &std::path::Path) -> std::io::Result<Arc<Self>> {
        let keys = Self::entries(path)?.into_iter().map(|(k, _)| k).collect();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Arc::new(Self {
            file: std::sync::Mutex::new(file),
            keys: std::sync::Mutex::new(keys),
        }))
    }

    /// Issues the invoice unless its key was invoiced before; true if issued now.
    pub fn issue(&self, key: &str, order: &str) -> std::io::Result<bool> {
        use std::io::Write;
        let mut keys = self
            .keys
            .lock()
            .map_err(|_| std::io::Error::other("ledger poisoned"))?;
        if keys.contains(key) {
            return Ok(false);
        }
        let mut f = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("ledger poisoned"))?;
        writeln!(f, "{key}\t{order}")?;
        f.sync_data()?;
        keys.insert(key.to_string());
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
            .filter_map(|l| l.split_once('\t'))
            .map(|(k, o)| (k.to_string(), o.to_string()))
            .collect())
    }
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
