//! What the gateway makes of the partitions' answers to one read: cursors with a
//! position per partition, lists and statistics merged, metrics labelled.
//!
//! Invariants: paging a gathered list with its cursors yields every item of
//! every partition exactly once (a partition that did not answer keeps its
//! position, skipped for the rest of the walk, and the walk's last page
//! answers the cursor to resume it from); a walk ends; a merge never invents or drops
//! an item; a cursor that is not one of ours is refused, never misread.

use serde_json::{Map, Value, json};
use std::cmp::Reverse;

/// Where a gathered list stands on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// Not asked yet: the first page.
    Start,
    /// Asked before: the partition's own `next` cursor.
    After(String),
    /// Read to its end.
    Done,
    /// Down when last asked, at this position (`None`: not asked yet): not
    /// asked again in this walk, which ends when the others are read and
    /// answers the position to resume it from.
    Down(Option<String>),
}

impl Position {
    /// Whether a page asks the partition.
    pub fn live(&self) -> bool {
        matches!(self, Position::Start | Position::After(_))
    }

    /// The position of a partition that did not answer.
    pub fn down(&self) -> Position {
        match self {
            Position::Start => Position::Down(None),
            Position::After(c) => Position::Down(Some(c.clone())),
            other => other.clone(),
        }
    }

    /// A skipped partition's position, to read it again.
    pub fn resumed(&self) -> Position {
        match self {
            Position::Down(None) => Position::Start,
            Position::Down(Some(c)) => Position::After(c.clone()),
            other => other.clone(),
        }
    }
}

/// The cursor of a gathered list: one position per partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor(pub Vec<Position>);

impl Cursor {
    /// The first page on `count` partitions.
    pub fn start(count: u32) -> Self {
        Cursor(vec![Position::Start; count as usize])
    }

    /// Whether every partition is read to its end.
    pub fn done(&self) -> bool {
        self.0.iter().all(|p| *p == Position::Done)
    }

    /// Whether a page still has a partition to ask.
    pub fn live(&self) -> bool {
        self.0.iter().any(Position::live)
    }

    /// Whether partitions were skipped for being down.
    pub fn skipped(&self) -> Vec<usize> {
        (0..self.0.len())
            .filter(|&i| matches!(self.0[i], Position::Down(_)))
            .collect()
    }

    /// The cursor that reads the skipped partitions again.
    pub fn resumed(&self) -> Cursor {
        Cursor(self.0.iter().map(Position::resumed).collect())
    }

    /// The cursor as the `next` of a page: hex of a JSON array (null: start,
    /// a string: after it, false: done, `{"down": …}`: skipped), so it
    /// travels in a query unescaped.
    pub fn encode(&self) -> String {
        let list: Vec<Value> = self
            .0
            .iter()
            .map(|p| match p {
                Position::Start => Value::Null,
                Position::After(c) => Value::String(c.clone()),
                Position::Done => Value::Bool(false),
                Position::Down(at) => json!({ "down": at }),
            })
            .collect();
        let text = Value::Array(list).to_string();
        text.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// A cursor given back as `after`, for a cluster of `count` partitions.
    pub fn parse(text: &str, count: u32) -> Result<Self, String> {
        let bad =
            || format!("after {text:?}: expected the `next` cursor of a page of this gateway");
        if !text.len().is_multiple_of(2) || text.len() > 64 * 1024 {
            return Err(bad());
        }
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| bad())?;
        let Ok(Value::Array(list)) = serde_json::from_slice::<Value>(&bytes) else {
            return Err(bad());
        };
        if list.len() != count as usize {
            return Err(format!(
                "after: the cursor is of a cluster of {} partitions, this one has {count}",
                list.len()
            ));
        }
        list.into_iter()
            .map(|v| match v {
                Value::Null => Ok(Position::Start),
                Value::String(s) => Ok(Position::After(s)),
                Value::Bool(false) => Ok(Position::Done),
                Value::Object(o) if o.len() == 1 => match o.get("down") {
                    Some(Value::Null) => Ok(Position::Down(None)),
                    Some(Value::String(c)) => Ok(Position::Down(Some(c.clone()))),
                    _ => Err(bad()),
                },
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Cursor)
    }
}

/// How many items to ask each partition for, for a page of `limit`: the
/// partitions not read to their end (nor skipped for being down) share it
/// evenly, the first ones one more
/// when it does not divide; when `limit` is below their number, the first
/// `limit` of them are asked (the others keep their position for a later
/// page). The shares add up to `limit` exactly, so a page never holds more.
pub fn shares(cursor: &Cursor, limit: usize) -> Vec<usize> {
    let live: Vec<usize> = (0..cursor.0.len())
        .filter(|i| cursor.0[*i].live())
        .collect();
    let mut out = vec![0; cursor.0.len()];
    if live.is_empty() {
        return out;
    }
    let (each, extra) = (limit / live.len(), limit % live.len());
    for (n, i) in live.into_iter().enumerate() {
        out[i] = each + usize::from(n < extra);
    }
    out
}

/// The numeric id of a list item (`instance`, `id`, `job`, `task`), as a
/// string or a number; items without one sort first.
fn item_id(v: &Value) -> u64 {
    for field in ["instance", "id", "job", "task"] {
        match v.get(field) {
            Some(Value::String(s)) => {
                if let Ok(n) = s.parse() {
                    return n;
                }
            }
            Some(Value::Number(n)) => {
                if let Some(n) = n.as_u64() {
                    return n;
                }
            }
            _ => {}
        }
    }
    0
}

/// Sorts a merged list as a partition sorts its own: instances newest first
/// unless `oldest_first`, jobs and tasks by id; messages stay as the
/// partitions gave them (parked before buffered on each).
pub fn sort(list: super::route::List, items: &mut [Value], oldest_first: bool) {
    use super::route::List;
    match list {
        List::Instances if !oldest_first => items.sort_by_key(|v| Reverse(item_id(v))),
        List::Instances | List::Jobs | List::Tasks => items.sort_by_key(item_id),
        List::Messages => {}
    }
}

/// Merges objects answered by several partitions: arrays are concatenated,
/// numbers summed, objects merged the same way, anything else taken from the
/// first partition that has it.
pub fn merge(answers: &[Value]) -> Value {
    let mut out = Map::new();
    for a in answers {
        let Value::Object(o) = a else { continue };
        for (k, v) in o {
            let merged = match (out.remove(k), v) {
                (None, v) => v.clone(),
                (Some(Value::Array(mut mine)), Value::Array(theirs)) => {
                    mine.extend(theirs.iter().cloned());
                    Value::Array(mine)
                }
                (Some(Value::Number(a)), Value::Number(b)) => sum(&a, b),
                (Some(mine @ Value::Object(_)), theirs @ Value::Object(_)) => {
                    merge(&[mine, theirs.clone()])
                }
                (Some(mine), _) => mine,
            };
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

fn sum(a: &serde_json::Number, b: &serde_json::Number) -> Value {
    match (a.as_u64(), b.as_u64()) {
        (Some(x), Some(y)) => json!(x.saturating_add(y)),
        _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
    }
}

/// A process's statistics summed element by element: counts added, parked
/// counts added by reason, the oldest wait the oldest of any partition.
pub fn statistics(answers: &[Value]) -> Value {
    let Some(first) = answers.first() else {
        return Value::Null;
    };
    let mut out = first.clone();
    let Some(Value::Array(elements)) = out.get_mut("elements") else {
        return out;
    };
    for other in &answers[1..] {
        let Some(Value::Array(theirs)) = other.get("elements") else {
            continue;
        };
        for t in theirs {
            let Some(mine) = elements
                .iter_mut()
                .find(|e| e.get("element") == t.get("element"))
            else {
                elements.push(t.clone());
                continue;
            };
            add_element(mine, t);
        }
    }
    out
}

fn add_element(mine: &mut Value, theirs: &Value) {
    for field in ["waiting", "jobs_ready", "incidents", "buffered"] {
        let n = mine.get(field).and_then(Value::as_u64).unwrap_or(0)
            + theirs.get(field).and_then(Value::as_u64).unwrap_or(0);
        mine[field] = json!(n);
    }
    if let Some(Value::Object(parked)) = theirs.get("parked") {
        let mut sum = mine.get("parked").cloned().unwrap_or_else(|| json!({}));
        for (reason, n) in parked {
            let have = sum.get(reason).and_then(Value::as_u64).unwrap_or(0);
            sum[reason] = json!(have + n.as_u64().unwrap_or(0));
        }
        mine["parked"] = sum;
    }
    let age = |v: &Value| v.get("oldest_wait_ms").and_then(Value::as_u64);
    if age(theirs) > age(mine) {
        mine["oldest_wait_ms"] = theirs.get("oldest_wait_ms").cloned().unwrap_or(Value::Null);
        mine["oldest_wait_since"] = theirs
            .get("oldest_wait_since")
            .cloned()
            .unwrap_or(Value::Null);
    }
}

/// The deployed processes of every partition, each version once (a deployment
/// reaches every partition, so they normally agree; a version one partition
/// lacks still shows).
pub fn processes(answers: &[Value]) -> Value {
    let mut out: Vec<Value> = Vec::new();
    for a in answers {
        let Some(Value::Array(list)) = a.get("processes") else {
            continue;
        };
        for p in list {
            let Some(mine) = out
                .iter_mut()
                .find(|o| o.get("process") == p.get("process"))
            else {
                out.push(p.clone());
                continue;
            };
            let latest = |v: &Value| v.get("latest_version").and_then(Value::as_u64);
            if latest(p) > latest(mine) {
                mine["latest_version"] = p["latest_version"].clone();
            }
            let theirs = p
                .get("versions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(Value::Array(versions)) = mine.get_mut("versions") {
                for v in theirs {
                    if !versions
                        .iter()
                        .any(|m| m.get("version") == v.get("version"))
                    {
                        versions.push(v);
                    }
                }
                versions.sort_by_key(|v| v.get("version").and_then(Value::as_u64));
            }
        }
    }
    json!({"processes": out})
}

/// The metric families of an exposition, in order: each family's metadata
/// lines (`# HELP`, `# TYPE`, `# UNIT`) and its sample lines. A sample
/// belongs to the family named by the metadata before it (an exposition
/// keeps a family's samples together); one without metadata is a family of
/// its own name.
#[derive(Debug, Default)]
pub struct Families {
    /// The families in the order they first appeared.
    list: Vec<Family>,
    /// Where each family is in `list`, by name.
    at: std::collections::HashMap<String, usize>,
}

/// One metric family: its metadata (from the first partition that
/// described it) and the samples of every partition.
#[derive(Debug)]
struct Family {
    name: String,
    meta: Vec<String>,
    meta_from: Option<u32>,
    samples: Vec<String>,
}

impl Families {
    /// Adds partition `partition`'s exposition, every sample labelled
    /// `partition="N"`; the metadata of a family is kept from the first
    /// partition that has it.
    pub fn add(&mut self, text: &str, partition: u32) {
        let mut current: Option<usize> = None;
        for line in text.lines() {
            if let Some(meta) = line.strip_prefix("# ") {
                let mut words = meta.split_whitespace();
                let (Some(kind), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                if !matches!(kind, "HELP" | "TYPE" | "UNIT") {
                    continue; // `# EOF` and comments
                }
                let f = self.family(name);
                let family = &mut self.list[f];
                if *family.meta_from.get_or_insert(partition) == partition {
                    family.meta.push(line.to_string());
                }
                current = Some(f);
                continue;
            }
            if line.is_empty() {
                continue;
            }
            let name = &line[..line.find(['{', ' ']).unwrap_or(line.len())];
            // a sample belongs to the family described before it, if its
            // name is the family's (`_total`, `_bucket`, … included)
            let f = match current {
                Some(f) if name.starts_with(self.list[f].name.as_str()) => f,
                _ => self.family(name),
            };
            self.list[f].samples.push(labelled(line, partition));
        }
    }

    /// The index of family `name`, registered when new.
    fn family(&mut self, name: &str) -> usize {
        if let Some(&f) = self.at.get(name) {
            return f;
        }
        self.list.push(Family {
            name: name.to_string(),
            meta: Vec::new(),
            meta_from: None,
            samples: Vec::new(),
        });
        self.at.insert(name.to_string(), self.list.len() - 1);
        self.list.len() - 1
    }

    /// The exposition: each family once, its metadata and then the samples
    /// of every partition together (no `# EOF`: the caller ends it).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for family in &self.list {
            for line in family.meta.iter().chain(&family.samples) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// A sample line with `partition="N"` as its first label.
fn labelled(line: &str, partition: u32) -> String {
    let label = format!("partition=\"{partition}\"");
    // name{a="b"} value  |  name value
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    match rest.strip_prefix('{') {
        Some(inner) if inner.starts_with('}') => format!("{name}{{{label}{inner}"),
        Some(inner) => format!("{name}{{{label},{inner}"),
        None => format!("{name}{{{label}}}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::gateway::route::List;

    /// A partition that was down is skipped by the pages after it, so a
    /// walk whose other partitions are read ends, and it resumes where the
    /// partition stood.
    #[test]
    fn a_partition_down_is_skipped_and_resumed_where_it_stood() {
        let at = Position::After("p:9".into());
        let c = Cursor(vec![Position::Done, at.down(), Position::Start.down()]);
        assert!(!c.live(), "nothing left to ask: the walk ends");
        assert_eq!(c.skipped(), vec![1, 2]);
        assert_eq!(shares(&c, 10), vec![0, 0, 0]);
        let again = c.resumed();
        assert_eq!(again.0, vec![Position::Done, at, Position::Start]);
        assert!(again.live());
        assert_eq!(shares(&again, 10), vec![0, 5, 5]);
        // with one still readable, the page asks only that one
        let c = Cursor(vec![Position::Start, Position::Down(None)]);
        assert!(c.live());
        assert_eq!(shares(&c, 1), vec![1, 0]);
        // for a malformed skip marker, the cursor is refused
        let bad: String = r#"[{"down":1}]"#.bytes().map(|b| format!("{b:02x}")).collect();
        assert!(Cursor::parse(&bad, 1).is_err());
    }

    #[test]
    fn a_cursor_round_trips_and_a_foreign_one_is_refused() {
        let c = Cursor(vec![
            Position::Start,
            Position::After("p:17".into()),
            Position::Done,
            Position::Down(None),
            Position::Down(Some("p:9".into())),
        ]);
        let text = c.encode();
        assert!(text.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(Cursor::parse(&text, 5).unwrap(), c);
        assert!(
            Cursor::parse(&text, 4)
                .unwrap_err()
                .contains("5 partitions")
        );
        for bad in ["", "zz", "123", "5b5d", &"00".repeat(40_000)] {
            assert!(Cursor::parse(bad, 3).is_err(), "{bad}");
        }
        assert!(Cursor::start(2).0.iter().all(|p| *p == Position::Start));
        assert!(Cursor(vec![Position::Done; 2]).done());
    }

    #[test]
    fn a_page_asks_each_partition_for_its_share_and_never_more_than_the_limit() {
        let start = Cursor::start(4);
        assert_eq!(shares(&start, 100), vec![25, 25, 25, 25]);
        assert_eq!(shares(&start, 10), vec![3, 3, 2, 2]);
        assert_eq!(shares(&start, 2), vec![1, 1, 0, 0]);
        let some_done = Cursor(vec![
            Position::Done,
            Position::After("x".into()),
            Position::Done,
            Position::Start,
        ]);
        assert_eq!(shares(&some_done, 5), vec![0, 3, 0, 2]);
        assert_eq!(shares(&Cursor(vec![Position::Done; 3]), 5), vec![0, 0, 0]);
        for limit in 1..50 {
            assert_eq!(shares(&start, limit).iter().sum::<usize>(), limit);
        }
    }

    #[test]
    fn lists_sort_as_a_partition_sorts_and_counts_add_up() {
        let mut v = vec![
            json!({"instance": "4"}),
            json!({"instance": "9"}),
            json!({"instance": "1"}),
        ];
        sort(List::Instances, &mut v, false);
        assert_eq!(v[0]["instance"], "9");
        sort(List::Instances, &mut v, true);
        assert_eq!(v[0]["instance"], "1");
        let m = merge(&[
            json!({"jobs": [1], "n": 2, "name": "a", "by": {"x": 1}}),
            json!({"jobs": [2, 3], "n": 5, "name": "b", "by": {"x": 2, "y": 1}}),
        ]);
        assert_eq!(
            m,
            json!({"jobs": [1, 2, 3], "n": 7, "name": "a", "by": {"x": 3, "y": 1}})
        );
    }

    #[test]
    fn statistics_add_up_element_by_element() {
        let a = json!({"process": "p", "elements": [
            {"element": "w", "waiting": 2, "jobs_ready": 0, "incidents": 1, "buffered": 0,
             "parked": {"late": 1}, "oldest_wait_ms": 10, "oldest_wait_since": "A"}]});
        let b = json!({"process": "p", "elements": [
            {"element": "w", "waiting": 3, "jobs_ready": 1, "incidents": 0, "buffered": 4,
             "parked": {"late": 2, "ambiguous": 1}, "oldest_wait_ms": 50, "oldest_wait_since": "B"}]});
        let s = statistics(&[a, b]);
        let w = &s["elements"][0];
        assert_eq!(w["waiting"], 5);
        assert_eq!(w["buffered"], 4);
        assert_eq!(w["parked"], json!({"late": 3, "ambiguous": 1}));
        assert_eq!(w["oldest_wait_since"], "B");
    }

    #[test]
    fn processes_show_each_version_once() {
        let a = json!({"processes": [{"process": "p", "latest_version": 1, "versions": [{"version": 1}]}]});
        let b = json!({"processes": [{"process": "p", "latest_version": 2, "versions": [{"version": 1}, {"version": 2}]}]});
        let p = processes(&[a, b]);
        assert_eq!(p["processes"][0]["latest_version"], 2);
        assert_eq!(p["processes"][0]["versions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn metrics_carry_their_partition_and_each_family_stays_together() {
        let text = "# HELP a A\n# TYPE a counter\na_total 3\n# HELP b B\n# TYPE b gauge\nb{reason=\"late\"} 1\nb{} 2\n# EOF\n";
        let mut f = Families::default();
        f.add(text, 2);
        f.add(text, 5);
        assert_eq!(
            f.render(),
            "# HELP a A\n# TYPE a counter\na_total{partition=\"2\"} 3\na_total{partition=\"5\"} 3\n\
             # HELP b B\n# TYPE b gauge\nb{partition=\"2\",reason=\"late\"} 1\nb{partition=\"2\"} 2\n\
             b{partition=\"5\",reason=\"late\"} 1\nb{partition=\"5\"} 2\n"
        );
        // a family only a later partition has keeps its metadata
        let mut f = Families::default();
        f.add("# TYPE a gauge\na 1\n# EOF\n", 0);
        f.add("# TYPE c gauge\nc 1\n# TYPE a gauge\na 2\n", 1);
        assert_eq!(
            f.render(),
            "# TYPE a gauge\na{partition=\"0\"} 1\na{partition=\"1\"} 2\n# TYPE c gauge\nc{partition=\"1\"} 1\n"
        );
    }
}
