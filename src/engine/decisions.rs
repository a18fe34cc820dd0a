//! DMN decisions: deploying a decision file (each decision versioned by its
//! id, as a process is) and business rule tasks that decide in the step the
//! token arrives in.
//!
//! Invariant: a decision is evaluated against the variables the token sees
//! and the step's instant, with the latest version deployed when the token
//! arrives; the instance's history records the decision, its version and the
//! rules that matched. A decision that is not deployed, or that DMN cannot
//! evaluate, stops the token at an incident naming it — the task never
//! moves on without its result.

use super::*;
use crate::model::DecisionMapping;

impl<'a, 't> Engine<'a, 't> {
    /// Stores the decisions of DMN file `file`: each gets a new version
    /// unless its latest version came from the identical file.
    pub(super) fn deploy_decisions(&mut self, file: &str, xml: &str) -> R<Vec<Deployed>> {
        let model = model::dmn::cached(file, xml)?;
        let fingerprint = fingerprint(xml, &BTreeMap::new());
        let mut out = Vec::new();
        for d in &model.outline.decisions {
            let latest = self.t.latest_decision(&d.id)?;
            if latest > 0
                && let Some(prev) = self.t.decision(&d.id, latest)?
                && prev.fingerprint == fingerprint
            {
                out.push(Deployed {
                    process: d.id.clone(),
                    decision: true,
                    version: latest,
                    new_version: false,
                });
                continue;
            }
            self.t.put_decision(&DecisionRecord {
                id: d.id.clone(),
                name: d.name.clone(),
                version: latest + 1,
                deployed_at: self.now,
                file: file.to_string(),
                fingerprint,
                xml: xml.to_string(),
            })?;
            out.push(Deployed {
                process: d.id.clone(),
                decision: true,
                version: latest + 1,
                new_version: true,
            });
        }
        Ok(out)
    }

    /// Token `token` reaches business rule task `idx`: its decision (the
    /// version the model binds, else the latest) is evaluated, its result
    /// set as the task's mapping says (through the element's output
    /// mappings) and the token moves on.
    pub(super) fn run_decision(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let ElementKind::Activity(ActivityKind::Decide {
            decision,
            version,
            result_variable,
            mapping,
        }) = &el.kind
        else {
            return Ok(());
        };
        let (decision, result_variable, mapping) =
            (decision.as_str(), result_variable.as_deref(), *mapping);
        let version = match version {
            Some(v) => *v,
            None => self.t.latest_decision(decision)?,
        };
        let Some(rec) = self.t.decision(decision, version)? else {
            let which = if version == 0 {
                String::new()
            } else {
                format!(" (version {version})")
            };
            let error = format!(
                "decision '{decision}'{which} is not deployed: deploy its DMN file, then move this token here again"
            );
            self.incident(inst, token, &el.id, error);
            return Ok(());
        };
        let mut vars = self.vars_all(inst, token)?;
        let decided = model::mapped(&el.extras.inputs, &vars, self.now).and_then(|inputs| {
            vars.extend(inputs);
            let m = model::dmn::cached(&rec.file, &rec.xml).map_err(|e| e.to_string())?;
            let d = m.decide(decision, &vars, self.now)?;
            let outputs = m
                .decision(decision)
                .map(|o| o.outputs.clone())
                .unwrap_or_default();
            Ok((
                result_of(&d.value, &outputs, mapping, result_variable)?,
                d.rules,
            ))
        });
        let outcome = decided
            .map(|(result, rules)| {
                let event = format!("decided {decision} v{version}: rules {}", rule_list(&rules));
                (result, event)
            })
            .map_err(|e| {
                format!(
                    "decision '{decision}' (version {version}): {e}: fix the variables it reads or deploy a corrected decision, then move this token here again"
                )
            });
        self.finish_evaluation(inst, token, idx, outcome)
    }
}

/// Rule ids as the history lists them.
fn rule_list(rules: &[String]) -> String {
    if rules.is_empty() {
        "none".into()
    } else {
        rules.join(",")
    }
}

/// The variables a decision's `value` sets: under `result_variable`, shaped
/// as `mapping` says; with [`DecisionMapping::Outputs`] each output of the
/// first result as a variable of its own.
fn result_of(
    value: &serde_json::Value,
    outputs: &[String],
    mapping: DecisionMapping,
    result_variable: Option<&str>,
) -> Result<Vars, String> {
    use serde_json::Value;
    // one context per matched rule, named by the table's outputs
    let rows: Vec<serde_json::Map<String, Value>> = {
        let items = match value {
            Value::Null => Vec::new(),
            Value::Array(items) if !matches!(mapping, DecisionMapping::Value) => items.clone(),
            v => vec![v.clone()],
        };
        items
            .into_iter()
            .map(|v| match v {
                Value::Object(m) if outputs.len() > 1 => m,
                v => serde_json::Map::from_iter([(
                    outputs.first().cloned().unwrap_or_else(|| "result".into()),
                    v,
                )]),
            })
            .collect()
    };
    let single = |what: &str| {
        if rows.len() > 1 {
            Err(format!(
                "{what} expects at most one matched rule, {} matched",
                rows.len()
            ))
        } else {
            Ok(rows.first().cloned())
        }
    };
    let entry = |row: &serde_json::Map<String, Value>, what: &str| {
        if row.len() == 1 {
            Ok(row.values().next().cloned().unwrap_or(Value::Null))
        } else {
            Err(format!(
                "{what} expects one output, the decision has {}",
                row.len()
            ))
        }
    };
    let result = match mapping {
        DecisionMapping::Value => value.clone(),
        DecisionMapping::ResultList => {
            Value::Array(rows.iter().cloned().map(Value::Object).collect())
        }
        DecisionMapping::SingleResult => single("singleResult")?.map_or(Value::Null, Value::Object),
        DecisionMapping::SingleEntry => match single("singleEntry")? {
            Some(row) => entry(&row, "singleEntry")?,
            None => Value::Null,
        },
        DecisionMapping::CollectEntries => Value::Array(
            rows.iter()
                .map(|r| entry(r, "collectEntries"))
                .collect::<Result<_, _>>()?,
        ),
        DecisionMapping::Outputs => {
            return Ok(rows.into_iter().next().unwrap_or_default());
        }
    };
    Ok(result_variable
        .map(|v| Vars::from_iter([(v.to_string(), result)]))
        .unwrap_or_default())
}
