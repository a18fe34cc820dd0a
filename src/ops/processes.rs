//! Views of deployed processes: versions, their sources, and per element of
//! a version the statistics a diagram overlay shows.
//!
//! Invariant: only reads; statistics come from gauges and the first row of
//! an index, however many instances and messages there are.

use super::*;
use crate::clock::rfc3339;
use crate::engine::load_def;
use crate::store::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// The figures of one element of a definition version, for diagram overlays
/// and dashboards — each from a gauge or the first row of an index, however
/// many instances and messages there are.
#[derive(Debug, Clone, Serialize)]
pub struct ElementStatistics {
    /// The BPMN id.
    pub element: String,
    /// The name in the diagram.
    pub name: Option<String>,
    /// The element kind (`receiveTask`, `serviceTask`, …).
    pub kind: &'static str,
    /// Tokens resting there.
    pub waiting: u64,
    /// Since when the longest-waiting of them rests there (RFC 3339).
    pub oldest_wait_since: Option<String>,
    /// How long that is, in milliseconds.
    pub oldest_wait_ms: Option<u64>,
    /// Jobs of the element waiting to run (due now or later).
    pub jobs_ready: u64,
    /// Jobs out of attempts and tokens stopped by an engine error.
    pub incidents: u64,
    /// The message the element waits for, if any.
    pub message: Option<String>,
    /// Buffered messages of that name (every key, every version).
    pub buffered: u64,
    /// Parked messages of that name, by reason.
    pub parked: BTreeMap<String, u64>,
}

/// The figures of every element of one definition version.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessStatistics {
    /// The process id.
    pub process: String,
    /// The version the figures are for.
    pub version: u32,
    /// The latest deployed version.
    pub latest_version: u32,
    /// Every element of the model, in document order.
    pub elements: Vec<ElementStatistics>,
}

/// A deployed process and its versions.
#[derive(Debug, Clone, Serialize)]
pub struct DeployedView {
    /// The process id.
    pub process: String,
    /// The latest version.
    pub latest_version: u32,
    /// Every version, oldest first.
    pub versions: Vec<VersionView>,
}

/// One deployed version.
#[derive(Debug, Clone, Serialize)]
pub struct VersionView {
    /// The version number.
    pub version: u32,
    /// When it was deployed (RFC 3339).
    pub deployed_at: String,
    /// The file it came from.
    pub file: String,
}

impl Reader {
    /// Every deployed process with its versions.
    pub fn deployed(&self) -> Result<Vec<DeployedView>, RErr> {
        Ok(self
            .snap
            .deployed()?
            .into_iter()
            .map(|(process, versions)| DeployedView {
                process,
                latest_version: versions.last().map_or(0, |v| v.0),
                versions: versions
                    .into_iter()
                    .map(|(version, at, file)| VersionView {
                        version,
                        deployed_at: rfc3339(at),
                        file,
                    })
                    .collect(),
            })
            .collect())
    }

    /// The BPMN XML `process` at `version` (default: the latest) was deployed
    /// from; `None` for an unknown version or one deployed before sources were kept.
    pub fn source(&self, process: &str, version: Option<u32>) -> Result<Option<String>, RErr> {
        let Some(version) = version.or(self.snap.latest_version(process)?) else {
            return Ok(None);
        };
        self.snap.definition_source(process, version)
    }

    /// The figures of every element of `process` at `version` (default: the
    /// latest); `None` when no such version is deployed. Reads gauges and the
    /// first row of an index per element: no instance, job or message is scanned.
    pub fn statistics(
        &self,
        process: &str,
        version: Option<u32>,
    ) -> Result<Option<ProcessStatistics>, RErr> {
        let Some(latest) = self.snap.latest_version(process)? else {
            return Ok(None);
        };
        let version = version.unwrap_or(latest);
        let Some(model) = self.process(process, version)? else {
            return Ok(None);
        };
        let scope = format!("{process}:{version}:");
        let of = |prefix: &str| -> Result<BTreeMap<String, u64>, RErr> {
            self.snap.gauges(&format!("{prefix}{scope}"))
        };
        let (tokens, ready, incidents) = (of(STAT_TOKENS)?, of(STAT_READY)?, of(STAT_INCIDENTS)?);
        let parked_all = self.snap.gauges(PARKED_BY_NAME)?;
        let mut elements = Vec::with_capacity(model.elements.len());
        for e in &model.elements {
            let count = |m: &BTreeMap<String, u64>| m.get(&e.id).copied().unwrap_or(0);
            let oldest = self.snap.oldest_token(process, version, &e.id)?;
            let message = e.kind.waits_for_message().map(str::to_string);
            let (buffered, parked) = match &message {
                None => (0, BTreeMap::new()),
                Some(name) => {
                    let buffered = self.snap.cursor(&format!("{BUFFERED_BY_NAME}{name}"))?;
                    let mut parked = BTreeMap::new();
                    for (k, n) in &parked_all {
                        if let Some((reason, of_name)) = k.split_once(':')
                            && of_name == name
                        {
                            parked.insert(reason.to_string(), *n);
                        }
                    }
                    (buffered, parked)
                }
            };
            elements.push(ElementStatistics {
                element: e.id.clone(),
                name: e.name.clone(),
                kind: e.kind.label(),
                waiting: count(&tokens),
                oldest_wait_since: oldest.map(rfc3339),
                oldest_wait_ms: oldest.map(|t| self.now.saturating_sub(t)),
                jobs_ready: count(&ready),
                incidents: count(&incidents),
                message,
                buffered,
                parked,
            });
        }
        Ok(Some(ProcessStatistics {
            process: process.to_string(),
            version,
            latest_version: latest,
            elements,
        }))
    }

    /// The deployed process definition of an instance.
    pub fn process(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<Arc<crate::model::Process>>, RErr> {
        load_def(&self.defs, process, version, || {
            self.snap.definition(process, version)
        })
    }

    /// Whether an element of any deployed version of `process` satisfies
    /// `f` (false for a process never deployed).
    pub fn any_element(
        &self,
        process: &str,
        f: impl Fn(&crate::model::ElementKind) -> bool,
    ) -> Result<bool, RErr> {
        let Some(latest) = self.snap.latest_version(process)? else {
            return Ok(false);
        };
        for version in 1..=latest {
            if let Some(p) = self.process(process, version)?
                && p.elements.iter().any(|e| f(&e.kind))
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Event counters (duplicates, parked by reason, signals that reached nobody, ...).
    pub fn counters(&self) -> Result<BTreeMap<String, u64>, RErr> {
        self.snap.counters()
    }
}
