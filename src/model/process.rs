//! A process as the engine runs it: its elements and flows, with what is
//! derived once at deploy — the index by id, the scopes, and per element the
//! messages it or anything after it will still wait for.
//!
//! Invariant: what is derived is computed from the elements and flows alone
//! (in [`Process::new`] and after decoding), never stored beside them.

use super::*;

/// One executable process of a BPMN file.
#[derive(Debug, Clone)]
pub struct Process {
    /// The BPMN process id (the definition key).
    pub id: String,
    /// The process name, if the model gives one.
    pub name: Option<String>,
    /// The flow nodes, in document order.
    pub elements: Vec<Element>,
    /// The sequence flows, in document order.
    pub flows: Vec<Flow>,
    /// Correlation key variable per message name caught in this process, and
    /// per start message that has a key (the started instance gets that variable).
    pub correlation_keys: BTreeMap<String, String>,
    pub(super) index: foldhash::HashMap<String, usize>,
    /// Per element: message names waited for there or anywhere downstream
    /// (sorted; elements of one cycle, and a chain without catch points, share one set).
    pub(super) reach: Vec<std::sync::Arc<[String]>>,
    /// Per element: the embedded subprocess it is directly inside, if any.
    pub(super) parent: Vec<Option<usize>>,
    /// Per subprocess: message names its boundary events (and what follows
    /// them) wait for; empty for every other element.
    pub(super) boundary_reach: Vec<std::sync::Arc<[String]>>,
    /// The event subprocesses of the process level.
    pub(super) event_subprocesses: Vec<usize>,
    /// Whether anything in it can be compensated (a compensation boundary
    /// event or a compensation event subprocess).
    pub(super) compensates: bool,
    /// Whether it has an ad-hoc subprocess.
    pub(super) ad_hoc: bool,
}

impl Process {
    pub(crate) fn new(
        id: String,
        name: Option<String>,
        elements: Vec<Element>,
        flows: Vec<Flow>,
        correlation_keys: BTreeMap<String, String>,
    ) -> Self {
        let mut p = Self {
            id,
            name,
            elements,
            flows,
            correlation_keys,
            index: Default::default(),
            reach: Vec::new(),
            parent: Vec::new(),
            boundary_reach: Vec::new(),
            event_subprocesses: Vec::new(),
            compensates: false,
            ad_hoc: false,
        };
        p.build_index();
        p
    }

    /// Whether `other` is the same model: the same elements, flows and
    /// correlation keys (what is derived from them aside).
    pub fn same_model(&self, other: &Process) -> bool {
        self.id == other.id
            && self.name == other.name
            && self.elements == other.elements
            && self.flows == other.flows
            && self.correlation_keys == other.correlation_keys
    }

    /// Rebuilds the derived indexes; call after deserialising.
    pub fn build_index(&mut self) {
        self.index = self
            .elements
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), i))
            .collect();
        let n = self.elements.len();
        self.parent = vec![None; n];
        for (i, e) in self.elements.iter().enumerate() {
            if let ElementKind::Scope(ScopeKind::SubProcess { children, .. })
            | ElementKind::Scope(ScopeKind::EventSubProcess { children, .. })
            | ElementKind::Scope(ScopeKind::AdHoc { children, .. }) = &e.kind
            {
                for &c in children.iter().filter(|&&c| c < n && c != i) {
                    self.parent[c] = Some(i);
                }
            }
        }
        self.event_subprocesses = (0..n)
            .filter(|&i| {
                matches!(
                    self.elements[i].kind,
                    ElementKind::Scope(ScopeKind::EventSubProcess { .. })
                ) && self.parent[i].is_none()
            })
            .collect();
        self.compensates = self.elements.iter().any(|e| {
            matches!(
                e.kind,
                ElementKind::Boundary {
                    trigger: Trigger::Compensation { .. },
                    ..
                } | ElementKind::Scope(ScopeKind::EventSubProcess {
                    trigger: Trigger::Compensation { .. },
                    ..
                })
            )
        });
        self.ad_hoc = self
            .elements
            .iter()
            .any(|e| matches!(e.kind, ElementKind::Scope(ScopeKind::AdHoc { .. })));
        self.reach = self.reach_sets();
        self.boundary_reach = (0..n)
            .map(|i| {
                let e = &self.elements[i];
                if !matches!(e.kind, ElementKind::Scope(ScopeKind::SubProcess { .. }))
                    || e.boundaries.is_empty()
                {
                    return std::sync::Arc::from(Vec::new());
                }
                let mut all: Vec<String> = e
                    .boundaries
                    .iter()
                    .filter_map(|&b| self.reach.get(b))
                    .flat_map(|s| s.iter().cloned())
                    .collect();
                all.sort();
                all.dedup();
                std::sync::Arc::from(all)
            })
            .collect();
    }

    /// Where a token at element `v` can go next: along its outgoing flows, to
    /// the boundary events of the activity, into a subprocess (its start), and,
    /// for an element inside a subprocess that ends its token (no outgoing
    /// flows), to what follows the subprocess once its scope completes.
    fn successors(&self, v: usize) -> impl Iterator<Item = usize> + '_ {
        let n = self.elements.len();
        let el = &self.elements[v];
        // into a subprocess at its start, and to its event subprocesses
        // (listening from the moment it is entered)
        let (start, inner): (Option<usize>, &[usize]) = match &el.kind {
            ElementKind::Scope(ScopeKind::SubProcess { start, children }) => {
                (Some(*start), children)
            }
            ElementKind::Scope(ScopeKind::EventSubProcess { start, .. }) => (Some(*start), &[]),
            _ => (None, &[]),
        };
        let listeners = inner.iter().copied().filter(move |&c| {
            matches!(
                self.elements.get(c).map(|e| &e.kind),
                Some(ElementKind::Scope(ScopeKind::EventSubProcess { .. }))
            )
        });
        // an ad-hoc subprocess may run any of its activities without incoming flows
        let ad_hoc: &[usize] = match &el.kind {
            ElementKind::Scope(ScopeKind::AdHoc { children, .. }) => children,
            _ => &[],
        };
        let activatable = ad_hoc
            .iter()
            .copied()
            .filter(move |&c| self.elements.get(c).is_some_and(|e| e.incoming.is_empty()));
        // the first enclosing subprocess that has outgoing flows
        let mut exit = None;
        if el.outgoing.is_empty() {
            let mut at = self.parent.get(v).copied().flatten();
            let mut hops = 0;
            while let Some(sp) = at {
                if !self.elements[sp].outgoing.is_empty() {
                    exit = Some(sp);
                    break;
                }
                at = self.parent.get(sp).copied().flatten();
                hops += 1;
                if hops > n {
                    break;
                }
            }
        }
        let flows_of = move |e: usize| {
            self.elements[e]
                .outgoing
                .iter()
                .filter_map(|&f| self.flows.get(f).map(|fl| fl.target))
        };
        flows_of(v)
            .chain(el.boundaries.iter().copied())
            .chain(start)
            .chain(listeners)
            .chain(activatable)
            .chain(exit.into_iter().flat_map(flows_of))
            .filter(move |&t| t < n)
    }

    /// Whether anything in it can be compensated.
    pub fn has_compensation(&self) -> bool {
        self.compensates
    }

    /// Whether it has an ad-hoc subprocess.
    pub fn has_ad_hoc(&self) -> bool {
        self.ad_hoc
    }

    /// The activities of ad-hoc subprocess `idx` a caller may activate:
    /// its children without incoming flows that are activities (not
    /// events, gateways, or compensation handlers).
    pub fn ad_hoc_enabled(&self, idx: usize) -> Vec<usize> {
        let Some(ElementKind::Scope(ScopeKind::AdHoc { children, .. })) =
            self.elements.get(idx).map(|e| &e.kind)
        else {
            return Vec::new();
        };
        let handlers: Vec<usize> = self
            .elements
            .iter()
            .filter_map(|e| match e.kind {
                ElementKind::Boundary {
                    trigger: Trigger::Compensation { handler },
                    ..
                } => Some(handler),
                _ => None,
            })
            .collect();
        children
            .iter()
            .copied()
            .filter(|&c| {
                let e = &self.elements[c];
                e.incoming.is_empty()
                    && !handlers.contains(&c)
                    && super::parse::runs_as_activity(&e.kind)
            })
            .collect()
    }

    /// The compensation handler of activity `idx` (the activity its
    /// compensation boundary event is associated with), if it has one.
    pub fn compensation_handler(&self, idx: usize) -> Option<usize> {
        self.elements.get(idx)?.boundaries.iter().find_map(|&b| {
            match self.elements.get(b).map(|e| &e.kind) {
                Some(ElementKind::Boundary {
                    trigger: Trigger::Compensation { handler },
                    ..
                }) => Some(*handler),
                _ => None,
            }
        })
    }

    /// The compensation event subprocess directly inside subprocess `idx`,
    /// if it has one.
    pub fn compensation_event_subprocess(&self, idx: usize) -> Option<usize> {
        self.event_subprocesses_of(Some(idx))
            .into_iter()
            .find(|&e| {
                matches!(
                    self.elements[e].kind,
                    ElementKind::Scope(ScopeKind::EventSubProcess {
                        trigger: Trigger::Compensation { .. },
                        ..
                    })
                )
            })
    }

    /// The embedded subprocess element `idx` is directly inside, if any.
    pub fn parent_of(&self, idx: usize) -> Option<usize> {
        self.parent.get(idx).copied().flatten()
    }

    /// The event subprocesses of a scope: of the process (`None`), or directly
    /// inside subprocess or event subprocess `container`.
    pub fn event_subprocesses_of(&self, container: Option<usize>) -> Vec<usize> {
        let Some(c) = container else {
            return self.event_subprocesses.clone();
        };
        match self.elements.get(c).map(|e| &e.kind) {
            Some(
                ElementKind::Scope(ScopeKind::SubProcess { children, .. })
                | ElementKind::Scope(ScopeKind::EventSubProcess { children, .. }),
            ) => children
                .iter()
                .copied()
                .filter(|&i| {
                    matches!(
                        self.elements.get(i).map(|e| &e.kind),
                        Some(ElementKind::Scope(ScopeKind::EventSubProcess { .. }))
                    )
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Message names waited for at or downstream of each element, in time linear
    /// in the graph (times the message names per set): the strongly connected
    /// components (Tarjan, iteratively, so a chain of 100,000 elements does not
    /// overflow the stack) come out successors first, and each component's set
    /// is its own catch points joined with its successors' sets.
    fn reach_sets(&self) -> Vec<std::sync::Arc<[String]>> {
        use std::sync::Arc;
        const UNSEEN: usize = usize::MAX;
        let n = self.elements.len();
        // a token in an activity may leave by its boundary events: they are
        // successors of their host here (see `successors`)
        let targets = |v: usize| self.successors(v);
        let (mut order, mut low) = (vec![UNSEEN; n], vec![0usize; n]);
        let (mut on_stack, mut comp) = (vec![false; n], vec![UNSEEN; n]);
        let mut stack: Vec<usize> = Vec::new();
        let mut sets: Vec<Arc<[String]>> = Vec::new();
        let empty: Arc<[String]> = Arc::from(Vec::new());
        let mut next = 0usize;
        // (element, how many of its outgoing flows were followed)
        let mut calls: Vec<(usize, usize)> = Vec::new();
        for root in 0..n {
            if order[root] != UNSEEN {
                continue;
            }
            order[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            calls.push((root, 0));
            while let Some(&(v, followed)) = calls.last() {
                if let Some(w) = targets(v).nth(followed) {
                    if let Some(top) = calls.last_mut() {
                        top.1 += 1;
                    }
                    if order[w] == UNSEEN {
                        order[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        calls.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(order[w]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(u, _)) = calls.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] != order[v] {
                    continue;
                }
                let c = sets.len();
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    comp[w] = c;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                let own: Vec<&str> = members
                    .iter()
                    .filter_map(|&w| self.elements[w].kind.waits_for_message())
                    .collect();
                let mut later: Vec<&Arc<[String]>> = Vec::new();
                for &w in &members {
                    for t in targets(w) {
                        let d = comp[t];
                        if d != c && d != UNSEEN && !later.iter().any(|s| Arc::ptr_eq(s, &sets[d]))
                        {
                            later.push(&sets[d]);
                        }
                    }
                }
                let set = match (own.is_empty(), later.as_slice()) {
                    (true, []) => empty.clone(),
                    (true, [only]) => Arc::clone(only),
                    _ => {
                        let mut all: Vec<String> = own.iter().map(|m| m.to_string()).collect();
                        all.extend(later.iter().flat_map(|s| s.iter().cloned()));
                        all.sort();
                        all.dedup();
                        Arc::from(all)
                    }
                };
                sets.push(set);
            }
        }
        comp.into_iter()
            .map(|c| sets.get(c).cloned().unwrap_or_else(|| empty.clone()))
            .collect()
    }

    /// Message names a token at element `idx` may still wait for: there, at
    /// the boundary events of the activity, or downstream of either (inside
    /// a subprocess, and after it once it completes).
    pub fn messages_reachable_from(&self, idx: usize) -> &[String] {
        self.reach.get(idx).map(|s| &s[..]).unwrap_or(&[])
    }

    /// Message names the token holding the scope of subprocess `idx` may
    /// still wait for: at its boundary events and after them. (What is
    /// inside, and after its completion, the tokens inside contribute.)
    pub fn messages_reachable_from_scope(&self, idx: usize) -> &[String] {
        self.boundary_reach.get(idx).map(|s| &s[..]).unwrap_or(&[])
    }

    /// The element with this id.
    pub fn element(&self, id: &str) -> Option<&Element> {
        self.index.get(id).map(|&i| &self.elements[i])
    }

    /// The element at an index.
    pub fn at(&self, idx: usize) -> &Element {
        &self.elements[idx]
    }

    /// The index of the element with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// The none start event the instance begins at, if there is one (a
    /// subprocess's own start event is not one).
    pub fn none_start(&self) -> Option<&Element> {
        self.elements
            .iter()
            .enumerate()
            .find(|(i, e)| {
                e.kind == ElementKind::Start(StartKind::Plain) && self.parent_of(*i).is_none()
            })
            .map(|(_, e)| e)
    }

    /// The message start event for `message`, if there is one.
    pub fn message_start(&self, message: &str) -> Option<&Element> {
        self.elements
            .iter()
            .find(|e| matches!(&e.kind, ElementKind::Start(StartKind::Message { message: m }) if m == message))
    }

    /// The correlation key of `message` in `vars`: the value of its key
    /// variable as a string, or `Err(variable)` when that variable is not set.
    pub fn correlation_key<'p>(
        &'p self,
        message: &str,
        vars: &crate::model::Vars,
    ) -> Result<String, &'p str> {
        let var = self
            .correlation_keys
            .get(message)
            .map(String::as_str)
            .unwrap_or("");
        key_of(var, vars).ok_or(var)
    }

    /// Every (message, key) that `vars` hold a correlation key for.
    pub fn correlation_pairs<'p>(
        &'p self,
        vars: &'p crate::model::Vars,
    ) -> impl Iterator<Item = (&'p str, String)> + 'p {
        self.correlation_keys
            .iter()
            .filter_map(|(m, var)| Some((m.as_str(), key_of(var, vars)?)))
    }

    /// Message names this process knows a correlation key for: those it waits
    /// for at catch events and receive tasks, and keyed start messages.
    pub fn keyed_messages(&self) -> impl Iterator<Item = &str> {
        self.correlation_keys.keys().map(String::as_str)
    }

    /// The ids of the elements that catch or start on `message` (catch
    /// events, receive tasks, boundary events, event subprocesses, message
    /// start events), in document order.
    pub fn message_catchers(&self, message: &str) -> Vec<&str> {
        self.elements
            .iter()
            .filter(|e| match &e.kind {
                ElementKind::Start(StartKind::Message { message: m }) => m == message,
                ElementKind::Boundary {
                    trigger: Trigger::Message { message: m },
                    ..
                }
                | ElementKind::Scope(ScopeKind::EventSubProcess {
                    trigger: Trigger::Message { message: m },
                    ..
                }) => m == message,
                kind => kind.waits_for_message() == Some(message),
            })
            .map(|e| e.id.as_str())
            .collect()
    }

    /// Timer start events: (element index, when it fires).
    pub fn timer_starts(&self) -> impl Iterator<Item = (usize, &TimerDef)> + '_ {
        self.elements
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.kind {
                ElementKind::Start(StartKind::Timer { timer }) => Some((i, timer)),
                _ => None,
            })
    }

    /// How many event subprocesses the process has (at every level): a bound
    /// on the listeners one scope can hold.
    pub fn event_subprocess_count(&self) -> usize {
        self.elements
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    ElementKind::Scope(ScopeKind::EventSubProcess { .. })
                )
            })
            .count()
    }

    /// Whether the process has a conditional event (catch, boundary or event
    /// subprocess): only then are its tokens asked after variables change.
    pub fn has_conditions(&self) -> bool {
        self.elements.iter().any(|e| {
            matches!(
                e.kind,
                ElementKind::Catch(CatchKind::Conditional { .. })
                    | ElementKind::Boundary {
                        trigger: Trigger::Condition { .. },
                        ..
                    }
                    | ElementKind::Scope(ScopeKind::EventSubProcess {
                        trigger: Trigger::Condition { .. },
                        ..
                    })
            )
        })
    }

    /// Whether the process has an inclusive gateway that joins (more than
    /// one incoming flow): only then must every token be asked whether it
    /// still can reach one.
    pub fn has_inclusive_join(&self) -> bool {
        self.elements.iter().any(|e| {
            matches!(e.kind, ElementKind::Gateway(GatewayKind::Inclusive { .. }))
                && e.incoming.len() > 1
        })
    }

    /// Whether a token at element `from` can still get to element `to` along
    /// sequence flows (or through the boundary events of the activity it is in).
    pub fn can_reach(&self, from: usize, to: usize) -> bool {
        let mut seen = vec![false; self.elements.len()];
        let mut stack = vec![from];
        while let Some(e) = stack.pop() {
            if e == to {
                return true;
            }
            if std::mem::replace(&mut seen[e], true) {
                continue;
            }
            stack.extend(self.successors(e));
        }
        false
    }

    /// The start events at the process level (not inside a subprocess) whose
    /// kind `pick` takes, by index.
    pub fn process_starts(&self, pick: impl Fn(&StartKind) -> bool) -> Vec<usize> {
        let at_top = |i: usize| self.parent_of(i).is_none();
        self.elements
            .iter()
            .enumerate()
            .filter(|(i, e)| at_top(*i) && matches!(&e.kind, ElementKind::Start(k) if pick(k)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Message names that start this process.
    pub fn start_messages(&self) -> impl Iterator<Item = &str> {
        self.elements.iter().filter_map(|e| match &e.kind {
            ElementKind::Start(StartKind::Message { message }) => Some(message.as_str()),
            _ => None,
        })
    }
}

/// The key a correlation key definition gives for `vars`: a variable, a
/// variable path (`order.id`), or a literal kept quoted (`'A-1'`, from Zeebe's
/// `correlationKey="A-1"`).
/// The variables a correlation key spec reads: the names a FEEL key (`=…`)
/// mentions, else the path and its root variable (a name may hold a dot).
pub fn key_names(spec: &str) -> Vec<String> {
    match spec.strip_prefix('=') {
        Some(expr) => super::feel::words_of(expr),
        None => vec![
            spec.to_string(),
            spec.split('.').next().unwrap_or_default().to_string(),
        ],
    }
}

fn key_of(spec: &str, vars: &crate::model::Vars) -> Option<String> {
    if let Some(expr) = spec.strip_prefix('=') {
        // FEEL (deploy parsed it and refused a clock in it); a key that
        // cannot be computed is no key
        return super::feel::eval_text(expr, vars, 0)
            .ok()
            .as_ref()
            .and_then(key_string);
    }
    if let Some(lit) = spec
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .filter(|_| spec.len() >= 2)
    {
        return Some(lit.to_string());
    }
    // a variable whose own name has a dot wins over the path through it
    key_string(vars.get(spec).or_else(|| path_value(spec, vars))?)
}

/// The string form of a correlation key value (`null` is no key).
pub fn key_string(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}
