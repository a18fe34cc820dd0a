//! Definitions as database format 4 stored them: the bincode of the
//! process model (`definitions`) with its element extras beside it
//! (`definition_extras`). Since format 5 a version is stored as the source it
//! was deployed from (`definition_heads`, `definition_sources`) and parsed
//! when it is loaded; a row of the old layout remains only where its source
//! was never kept or no longer parses to the same model, and is read here.
//!
//! Invariant: the types of this module are the format-4 layout and never
//! change (`tests/fixtures/format-v4-definitions.json` holds rows written by
//! the format-4 build, one for every element kind the parser made); each maps
//! onto today's model in one exhaustive conversion, so a change to the model
//! changes the conversion, never stored bytes. The leaf types they carry
//! (timers, triggers, expressions, mappings, …) are read as they are today:
//! a change to one of them freezes its format-4 shape here first.

use super::{DefinitionRecord, StoreError};
use crate::clock::Millis;
use crate::codec;
use crate::model::{
    ActivityKind, CatchKind, DecisionMapping, Delegated, Element, ElementKind, Expr, Extras, Flow,
    GatewayKind, Mapping, MultiInstance, Process, Retry, ScopeKind, StartKind, ThrowKind, TimerDef,
    Trigger, UserTaskSpec, VarPass,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A definition row of format 4.
#[derive(Serialize, Deserialize)]
pub(super) struct Record4 {
    process: Process4,
    version: u32,
    deployed_at: Millis,
    file: String,
    fingerprint: u64,
}

#[derive(Serialize, Deserialize)]
struct Process4 {
    id: String,
    name: Option<String>,
    elements: Vec<Element4>,
    flows: Vec<Flow4>,
    correlation_keys: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct Element4 {
    id: String,
    name: Option<String>,
    kind: Kind4,
    incoming: Vec<usize>,
    outgoing: Vec<usize>,
    async_before: bool,
    line: u32,
    retry: Option<Retry>,
    boundaries: Vec<usize>,
}

#[derive(Serialize, Deserialize)]
struct Flow4 {
    id: String,
    source: usize,
    target: usize,
    condition: Option<Expr>,
}

/// The element kinds of format 4, by position.
#[derive(Serialize, Deserialize)]
pub(super) enum Kind4 {
    NoneStart,
    MessageStart {
        message: String,
    },
    TimerCatch {
        timer: TimerDef,
    },
    EventGateway,
    Boundary {
        host: usize,
        cancel: bool,
        trigger: Trigger,
    },
    End,
    ExclusiveGateway {
        default: Option<usize>,
    },
    ParallelGateway,
    SendTask,
    ServiceTask {
        topic: String,
    },
    ReceiveTask {
        message: String,
    },
    MessageCatch {
        message: String,
    },
    SignalCatch {
        signal: String,
    },
    SignalThrow {
        signal: String,
    },
    NoneThrow,
    Publish {
        topic: String,
    },
    Task {
        manual: bool,
    },
    Delegated {
        topic: String,
        work: Delegated,
    },
    TimerStart {
        timer: TimerDef,
    },
    UserTask {
        spec: UserTaskSpec,
    },
    InclusiveGateway {
        default: Option<usize>,
    },
    TerminateEnd,
    SubProcess {
        start: usize,
        children: Vec<usize>,
    },
    ErrorEnd {
        code: Option<String>,
    },
    Escalation {
        code: Option<String>,
        end: bool,
    },
    EventSubProcess {
        start: usize,
        children: Vec<usize>,
        trigger: Trigger,
        interrupting: bool,
    },
    CallActivity {
        process: String,
        version: Option<u32>,
        inputs: VarPass,
        outputs: VarPass,
    },
    Link {
        name: String,
        catch: bool,
    },
    ConditionalCatch {
        condition: Expr,
    },
    SignalStart {
        signal: String,
    },
    WaitState,
    Compensate {
        activity: Option<usize>,
        wait: bool,
        end: bool,
    },
    CancelEnd {
        transaction: usize,
    },
    ConditionalStart {
        condition: Expr,
    },
    AdHoc {
        children: Vec<usize>,
        completion: Option<Expr>,
        cancel_remaining: bool,
        sequential: bool,
        active_elements: Option<Expr>,
    },
    Script {
        expression: Expr,
        result_variable: String,
    },
    Decide {
        decision: String,
        version: Option<u32>,
        result_variable: Option<String>,
        mapping: DecisionMapping,
    },
}

/// An element's extras of format 4 (multi-instance and headers travel in
/// the record's tail, [`ExtraField4`]).
#[derive(Serialize, Deserialize)]
struct Extras4 {
    async_after: bool,
    inputs: Vec<Mapping>,
    outputs: Vec<Mapping>,
}

/// What the extras record carries after its body, by position.
#[derive(Serialize, Deserialize)]
enum ExtraField4 {
    Multi(Vec<(u32, MultiInstance)>),
    Headers(Vec<(u32, Vec<(String, String)>)>),
}

/// A format-4 row (and its extras row, if any) as today's record.
pub(super) fn read(
    definition: &[u8],
    extras: Option<&[u8]>,
) -> Result<DefinitionRecord, StoreError> {
    let rec: Record4 = codec::decode(definition)?;
    let mut process = rec.process.into_model();
    if let Some(bytes) = extras {
        fill_extras(&mut process, bytes)?;
    }
    Ok(DefinitionRecord {
        process,
        deployed_at: rec.deployed_at,
        file: rec.file,
        fingerprint: rec.fingerprint,
    })
}

fn fill_extras(process: &mut Process, bytes: &[u8]) -> Result<(), StoreError> {
    let (pairs, tail): (Vec<(u32, Extras4)>, Vec<ExtraField4>) = codec::decode_tailed(bytes)?;
    for (idx, x) in pairs {
        if let Some(extras) = extras_at(process, idx) {
            extras.async_after = x.async_after;
            extras.inputs = x.inputs;
            extras.outputs = x.outputs;
        }
    }
    for field in tail {
        match field {
            ExtraField4::Multi(multi) => {
                for (idx, m) in multi {
                    if let Some(extras) = extras_at(process, idx) {
                        extras.multi = Some(m);
                    }
                }
            }
            ExtraField4::Headers(headers) => {
                for (idx, h) in headers {
                    if let Some(extras) = extras_at(process, idx) {
                        extras.headers = h;
                    }
                }
            }
        }
    }
    Ok(())
}

impl Process4 {
    fn into_model(self) -> Process {
        let elements = self
            .elements
            .into_iter()
            .map(|e| Element {
                id: e.id,
                name: e.name,
                kind: e.kind.into_model(),
                incoming: e.incoming,
                outgoing: e.outgoing,
                async_before: e.async_before,
                line: e.line,
                retry: e.retry,
                boundaries: e.boundaries,
                extras: Extras::default(),
            })
            .collect();
        let flows = self
            .flows
            .into_iter()
            .map(|f| Flow {
                id: f.id,
                source: f.source,
                target: f.target,
                condition: f.condition,
            })
            .collect();
        Process::new(self.id, self.name, elements, flows, self.correlation_keys)
    }
}

impl Kind4 {
    /// Today's kind of a format-4 kind: one arm per stored variant.
    fn into_model(self) -> ElementKind {
        use {ActivityKind as A, CatchKind as C, ElementKind as E, GatewayKind as G};
        use {ScopeKind as S, StartKind as St, ThrowKind as T};
        match self {
            Kind4::NoneStart => E::Start(St::Plain),
            Kind4::MessageStart { message } => E::Start(St::Message { message }),
            Kind4::TimerCatch { timer } => E::Catch(C::Timer { timer }),
            Kind4::EventGateway => E::Gateway(G::Event),
            Kind4::Boundary {
                host,
                cancel,
                trigger,
            } => E::Boundary {
                host,
                cancel,
                trigger,
            },
            Kind4::End => E::Throw(T::End),
            Kind4::ExclusiveGateway { default } => E::Gateway(G::Exclusive { default }),
            Kind4::ParallelGateway => E::Gateway(G::Parallel),
            Kind4::SendTask => E::Activity(A::SendTask),
            Kind4::ServiceTask { topic } => E::Activity(A::ServiceTask { topic }),
            Kind4::ReceiveTask { message } => E::Activity(A::ReceiveTask { message }),
            Kind4::MessageCatch { message } => E::Catch(C::Message { message }),
            Kind4::SignalCatch { signal } => E::Catch(C::Signal { signal }),
            Kind4::SignalThrow { signal } => E::Throw(T::Signal { signal }),
            Kind4::NoneThrow => E::Throw(T::Plain),
            Kind4::Publish { topic } => E::Activity(A::Publish { topic }),
            Kind4::Task { manual } => E::Activity(A::Task { manual }),
            Kind4::Delegated { topic, work } => E::Activity(A::Delegated { topic, work }),
            Kind4::TimerStart { timer } => E::Start(St::Timer { timer }),
            Kind4::UserTask { spec } => E::Activity(A::UserTask { spec }),
            Kind4::InclusiveGateway { default } => E::Gateway(G::Inclusive { default }),
            Kind4::TerminateEnd => E::Throw(T::Terminate),
            Kind4::SubProcess { start, children } => E::Scope(S::SubProcess { start, children }),
            Kind4::ErrorEnd { code } => E::Throw(T::Error { code }),
            Kind4::Escalation { code, end } => E::Throw(T::Escalation { code, end }),
            Kind4::EventSubProcess {
                start,
                children,
                trigger,
                interrupting,
            } => E::Scope(S::EventSubProcess {
                start,
                children,
                trigger,
                interrupting,
            }),
            Kind4::CallActivity {
                process,
                version,
                inputs,
                outputs,
            } => E::Activity(A::CallActivity {
                process,
                version,
                inputs,
                outputs,
            }),
            Kind4::Link { name, catch: true } => E::Catch(C::Link { name }),
            Kind4::Link { name, catch: false } => E::Throw(T::Link { name }),
            Kind4::ConditionalCatch { condition } => E::Catch(C::Conditional { condition }),
            Kind4::SignalStart { signal } => E::Start(St::Signal { signal }),
            Kind4::WaitState => E::Activity(A::WaitState),
            Kind4::Compensate {
                activity,
                wait,
                end,
            } => E::Throw(T::Compensate {
                activity,
                wait,
                end,
            }),
            Kind4::CancelEnd { transaction } => E::Throw(T::Cancel { transaction }),
            Kind4::ConditionalStart { condition } => E::Start(St::Conditional { condition }),
            Kind4::AdHoc {
                children,
                completion,
                cancel_remaining,
                sequential,
                active_elements,
            } => E::Scope(S::AdHoc {
                children,
                completion,
                cancel_remaining,
                sequential,
                active_elements,
            }),
            Kind4::Script {
                expression,
                result_variable,
            } => E::Activity(A::Script {
                expression,
                result_variable,
            }),
            Kind4::Decide {
                decision,
                version,
                result_variable,
                mapping,
            } => E::Activity(A::Decide {
                decision,
                version,
                result_variable,
                mapping,
            }),
        }
    }
}

fn extras_at(process: &mut Process, idx: u32) -> Option<&mut Extras> {
    process
        .elements
        .get_mut(idx as usize)
        .map(|e| &mut e.extras)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this build reads FEEL (a build without refuses it).
    static FEEL: bool = cfg!(feature = "feel");

    fn bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Rows written by the format-4 build (one for every element kind its
    /// parser made, with loops, headers and mappings in the extras) read
    /// through the frozen layout as the model their source parses to today,
    /// and each source gives its row again as migration asks.
    #[test]
    fn format4_rows_read_as_the_model_their_source_gives() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/format-v4-definitions.json"
        );
        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut kinds = std::collections::BTreeSet::new();
        for row in &rows {
            let text = |k: &str| row[k].as_str().unwrap().to_string();
            let extras = row["extras"].as_str().map(bytes);
            let (file, xml, id) = (text("file"), text("xml"), text("process"));
            // a build without FEEL cannot read a FEEL expression, stored or parsed
            let Ok(rec) = read(&bytes(&text("definition")), extras.as_deref()) else {
                assert!(!FEEL, "{file}: {id}");
                continue;
            };
            assert_eq!((rec.file.as_str(), rec.fingerprint), (file.as_str(), 42));
            for e in &rec.process.elements {
                // the family and its kind: `Activity::ServiceTask`
                let kind = format!("{:?}", e.kind);
                let mut words = kind
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty());
                let family = words.next().unwrap();
                let name = if family == "Boundary" {
                    ""
                } else {
                    words.next().unwrap()
                };
                kinds.insert(format!("{family}::{name}"));
            }
            // a build without FEEL refuses the FEEL of a source
            let Ok(parsed) = crate::model::parse(&file, &xml, &Default::default()) else {
                assert!(!FEEL, "{file}: {id}");
                continue;
            };
            let today = parsed.into_iter().find(|p| p.id == id).unwrap();
            // without FEEL a decision is a worker's job: the source gives another model
            let same = rec.process.same_model(&today);
            assert!(same || !FEEL, "{file}: {id}");
            assert_eq!(
                crate::store::tables::overrides_giving(&rec, &xml).is_some(),
                same,
                "{file}: {id}"
            );
        }
        // every kind but the send task the parser no longer makes
        let expected = if FEEL { 36 } else { 30 };
        assert!(kinds.len() >= expected, "{} kinds: {kinds:?}", kinds.len());
        assert!(!kinds.contains("Activity::SendTask"));
    }

    /// A pinned send task keeps the pass-through meaning it was stored with.
    #[test]
    fn a_stored_send_task_stays_a_pass_through() {
        assert_eq!(
            Kind4::SendTask.into_model(),
            ElementKind::Activity(ActivityKind::SendTask)
        );
    }
}
