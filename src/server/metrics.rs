//! `/metrics`: what postfach counts and holds, in the OpenMetrics text format
//! written by `prometheus-client`.
//!
//! Invariants:
//! - A scrape reads one database snapshot: every gauge and counter of the
//!   engine comes from the same read transaction.
//! - The engine's counters live in the database (they survive restarts), so
//!   they are collected at scrape time, not kept in registered metric objects.
//! - Label values are escaped here: `prometheus-client` writes them as given.

use crate::alarms::Alarms;
use crate::ingress::{ACK_LATENCY_BOUNDS, ConsumerState, Consumers};
use crate::ops::{Histogram, Reader};
use crate::store::{Counter, Reason, StoreError};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, LabelValueEncoder, MetricEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The content type of [`render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Everything one scrape shows, read before encoding.
#[derive(Debug)]
struct Scrape {
    counters: BTreeMap<String, u64>,
    buffered: u64,
    oldest_buffered_s: f64,
    parked: BTreeMap<&'static str, u64>,
    /// (element, tokens resting there, age of the oldest in seconds)
    waiting: Vec<(String, u64, f64)>,
    jobs_due: u64,
    incidents: u64,
    /// Events about parked messages kept and not yet confirmed by the broker.
    parked_events: u64,
    /// (element, open user tasks, age of the oldest in seconds)
    tasks: Vec<(String, u64, f64)>,
    alarms: Vec<(String, bool)>,
    commit_latency: (Vec<(f64, u64)>, f64),
    commit_batch: (Vec<(f64, u64)>, f64),
    /// What opening the database repaired.
    recovery: crate::Recovery,
    /// (subscription, up, [received, acked, nacked, correlated, buffered, duplicate, parked])
    consumers: Vec<(String, bool, u64, [u64; 7])>,
    ack_latency: Option<(Vec<(f64, u64)>, f64)>,
    /// When the newest good backup was taken (Unix seconds), and the
    /// backups that failed.
    backups: (Option<f64>, u64),
}

/// The metrics of `r`'s snapshot, the alarms, the writer's commit statistics
/// and the Pub/Sub consumers.
pub fn render(
    r: &Reader,
    backups: &super::backups::Backups,
    alarms: &Alarms,
    commits: &crate::runtime::CommitStats,
    recovery: crate::Recovery,
    consumers: &Consumers,
) -> Result<String, StoreError> {
    let all = consumers.all();
    let ack_latency = (!all.is_empty()).then(|| {
        let merged = Histogram::new(ACK_LATENCY_BOUNDS);
        for c in &all {
            merged.add(&c.ack_latency);
        }
        merged.buckets()
    });
    let (jobs_due, incidents) = r.job_counts()?;
    let scrape = Scrape {
        counters: r.counters()?,
        buffered: r.buffered_count()?,
        oldest_buffered_s: r.oldest_buffered_age()?.unwrap_or(0) as f64 / 1000.0,
        parked: r.parked_by_reason()?,
        waiting: r
            .waiting_summary()?
            .into_iter()
            .map(|(e, n, since)| (e, n, r.now().saturating_sub(since) as f64 / 1000.0))
            .collect(),
        jobs_due,
        incidents,
        parked_events: r.parked_events(0)?.1,
        tasks: r
            .open_tasks_summary()?
            .into_iter()
            .map(|(e, n, oldest)| (e, n, r.now().saturating_sub(oldest) as f64 / 1000.0))
            .collect(),
        alarms: alarms.active(),
        commit_latency: commits.latency_seconds.buckets(),
        commit_batch: commits.batch_size.buckets(),
        recovery,
        consumers: all
            .iter()
            .map(|c| {
                let [cor, buf, dup, park] = c.outcomes();
                (
                    c.subscription.clone(),
                    c.state() == ConsumerState::Running,
                    c.streams_running() as u64,
                    [
                        c.received.load(Ordering::Relaxed),
                        c.acked.load(Ordering::Relaxed),
                        c.nacked.load(Ordering::Relaxed),
                        cor,
                        buf,
                        dup,
                        park,
                    ],
                )
            })
            .collect(),
        ack_latency,
        backups: (backups.last_good(), backups.failed()),
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|_| StoreError::Aborted("metrics could not be encoded".into()))?;
    Ok(out)
}

/// A label value with `\`, `"` and newlines escaped as the text format requires.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Escaped<'a>(&'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

type Labels<'a> = Vec<(&'static str, Escaped<'a>)>;

fn family<'e>(
    enc: &'e mut DescriptorEncoder<'_>,
    name: &'e str,
    help: &str,
    kind: MetricType,
) -> Result<MetricEncoder<'e>, std::fmt::Error> {
    enc.encode_descriptor(name, help, None, kind)
}

fn histogram(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    (buckets, sum): &(Vec<(f64, u64)>, f64),
) -> Result<(), std::fmt::Error> {
    let count = buckets.iter().map(|b| b.1).sum();
    family(enc, name, help, MetricType::Histogram)?
        .encode_histogram::<Labels>(*sum, count, buckets, None)
}

impl Scrape {
    /// An engine counter as scraped (0 when it never counted).
    fn count(&self, c: Counter) -> u64 {
        self.counters.get(c.name().as_ref()).copied().unwrap_or(0)
    }

    /// Messages by outcome, the buffer and the parked messages.
    fn encode_messages(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut m = family(
            enc,
            "postfach_messages",
            "Messages accepted, by outcome.",
            MetricType::Counter,
        )?;
        for (outcome, c) in [
            ("correlated", Counter::MessagesCorrelated),
            (
                "correlated_from_buffer",
                Counter::MessagesCorrelatedFromBuffer,
            ),
            ("buffered", Counter::MessagesBuffered),
            ("duplicate", Counter::MessagesDuplicate),
        ] {
            let labels: Labels = vec![("outcome", Escaped(outcome))];
            m.encode_family(&labels)?
                .encode_counter::<Labels, _, f64>(&self.count(c), None)?;
        }
        for reason in Reason::ALL {
            let labels: Labels = vec![
                ("outcome", Escaped("parked")),
                ("reason", Escaped(reason.as_str())),
            ];
            m.encode_family(&labels)?.encode_counter::<Labels, _, f64>(
                &self.count(Counter::MessagesParked(reason)),
                None,
            )?;
        }

        family(
            enc,
            "postfach_messages_buffered",
            "Messages waiting in the buffer for their subscription.",
            MetricType::Gauge,
        )?
        .encode_gauge(&self.buffered)?;
        family(
            enc,
            "postfach_oldest_buffered_age_seconds",
            "Age of the oldest buffered message.",
            MetricType::Gauge,
        )?
        .encode_gauge(&self.oldest_buffered_s)?;

        let mut m = family(
            enc,
            "postfach_messages_parked",
            "Parked messages waiting for an operator, by reason.",
            MetricType::Gauge,
        )?;
        for reason in Reason::ALL.map(Reason::as_str) {
            let labels: Labels = vec![("reason", Escaped(reason))];
            m.encode_family(&labels)?
                .encode_gauge(&self.parked.get(reason).copied().unwrap_or(0))?;
        }
        Ok(())
    }

    /// Tokens waiting per element and their oldest wait.
    fn encode_waits(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut m = family(
            enc,
            "postfach_instances_waiting",
            "Tokens resting at each element.",
            MetricType::Gauge,
        )?;
        for (element, n, _) in &self.waiting {
            let labels: Labels = vec![("element", Escaped(element))];
            m.encode_family(&labels)?.encode_gauge(n)?;
        }
        let mut m = family(
            enc,
            "postfach_oldest_wait_age_seconds",
            "Age of the oldest token resting at each element.",
            MetricType::Gauge,
        )?;
        for (element, _, age) in &self.waiting {
            let labels: Labels = vec![("element", Escaped(element))];
            m.encode_family(&labels)?.encode_gauge(age)?;
        }
        Ok(())
    }

    /// Jobs, incidents, events, user tasks, signals, attempts and alarms.
    fn encode_work(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        family(
            enc,
            "postfach_jobs_due",
            "Jobs due now and not taken yet.",
            MetricType::Gauge,
        )?
        .encode_gauge(&self.jobs_due)?;
        family(
            enc,
            "postfach_incidents",
            "Jobs that ran out of attempts and wait for an operator.",
            MetricType::Gauge,
        )?
        .encode_gauge(&self.incidents)?;
        family(
        enc,
        "postfach_parked_events_unpublished",
        "Events about parked messages kept and not yet confirmed by the broker ([notifications] parked_topic).",
        MetricType::Gauge,
    )?
    .encode_gauge(&self.parked_events)?;
        let mut m = family(
            enc,
            "postfach_tasks_open",
            "Open user tasks at each element.",
            MetricType::Gauge,
        )?;
        for (element, n, _) in &self.tasks {
            let labels: Labels = vec![("element", Escaped(element))];
            m.encode_family(&labels)?.encode_gauge(n)?;
        }
        let mut m = family(
            enc,
            "postfach_oldest_task_age_seconds",
            "Age of the oldest open user task at each element.",
            MetricType::Gauge,
        )?;
        for (element, _, age) in &self.tasks {
            let labels: Labels = vec![("element", Escaped(element))];
            m.encode_family(&labels)?.encode_gauge(age)?;
        }
        family(
            enc,
            "postfach_signals_unreached",
            "Signals thrown that reached no subscription.",
            MetricType::Counter,
        )?
        .encode_counter::<Labels, _, f64>(&self.count(Counter::SignalsUnreached), None)?;
        let mut m = family(
            enc,
            "postfach_job_attempts",
            "Handler and worker attempts, by result.",
            MetricType::Counter,
        )?;
        for (result, c) in [
            ("completed", Counter::JobAttemptsCompleted),
            ("failed", Counter::JobAttemptsFailed),
        ] {
            let labels: Labels = vec![("result", Escaped(result))];
            m.encode_family(&labels)?
                .encode_counter::<Labels, _, f64>(&self.count(c), None)?;
        }

        let mut m = family(
            enc,
            "alarm_active",
            "Whether a configured alarm is firing.",
            MetricType::Gauge,
        )?;
        for (name, on) in &self.alarms {
            let labels: Labels = vec![("name", Escaped(name))];
            m.encode_family(&labels)?.encode_gauge(&u64::from(*on))?;
        }
        Ok(())
    }

    /// The backups: when the last good one was taken, how many failed.
    fn encode_backups(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (last, failed) = self.backups;
        if let Some(at) = last {
            family(
                enc,
                "postfach_backup_last_success_timestamp_seconds",
                "When the newest good backup of this partition in [backup] to was taken (alert on time() minus this).",
                MetricType::Gauge,
            )?
            .encode_gauge(&at)?;
        }
        family(
            enc,
            "postfach_backup_failures",
            "Backups that failed since the server started.",
            MetricType::Counter,
        )?
        .encode_counter::<Labels, _, f64>(&failed, None)
    }

    /// The write-ahead log at open and the commit path.
    fn encode_log(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        family(
        enc,
        "postfach_wal_torn_tail_bytes",
        "Bytes of a torn record cut from the end of the write-ahead log when this process opened the database.",
        MetricType::Counter,
    )?
    .encode_counter::<Labels, _, f64>(&self.recovery.torn_tail_bytes, None)?;
        family(
            enc,
            "postfach_wal_replayed_batches",
            "Batches replayed from the write-ahead log when this process opened the database.",
            MetricType::Counter,
        )?
        .encode_counter::<Labels, _, f64>(&(self.recovery.replayed_batches as u64), None)?;

        histogram(
            enc,
            "postfach_commit_latency_seconds",
            "Time to apply a batch and sync it to the log.",
            &self.commit_latency,
        )?;
        histogram(
            enc,
            "postfach_commit_batch_size",
            "Commands committed together.",
            &self.commit_batch,
        )?;
        Ok(())
    }

    /// The Pub/Sub consumers, when the server runs any.
    fn encode_pubsub(&self, enc: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        if let Some(latency) = &self.ack_latency {
            let mut m = family(
                enc,
                "postfach_pubsub_consumer_up",
                "Whether the consumer of a subscription is consuming.",
                MetricType::Gauge,
            )?;
            for (sub, up, _, _) in &self.consumers {
                let labels: Labels = vec![("subscription", Escaped(sub))];
                m.encode_family(&labels)?.encode_gauge(&u64::from(*up))?;
            }
            let mut m = family(
                enc,
                "postfach_pubsub_streams_running",
                "Streaming pulls of a subscription that receive deliveries now.",
                MetricType::Gauge,
            )?;
            for (sub, _, running, _) in &self.consumers {
                let labels: Labels = vec![("subscription", Escaped(sub))];
                m.encode_family(&labels)?.encode_gauge(running)?;
            }
            let mut m = family(
                enc,
                "postfach_pubsub_deliveries",
                "Deliveries by what was done with them.",
                MetricType::Counter,
            )?;
            for (sub, _, _, counts) in &self.consumers {
                let what = [
                    "received",
                    "acked",
                    "nacked",
                    "correlated",
                    "buffered",
                    "duplicate",
                    "parked",
                ];
                for (w, v) in what.iter().zip(counts) {
                    let labels: Labels =
                        vec![("subscription", Escaped(sub)), ("result", Escaped(w))];
                    m.encode_family(&labels)?
                        .encode_counter::<Labels, _, f64>(v, None)?;
                }
            }
            histogram(
                enc,
                "postfach_pubsub_ack_latency_seconds",
                "Broker publish time to ack, per delivery.",
                latency,
            )?;
        }
        Ok(())
    }
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.encode_messages(&mut enc)?;
        self.encode_waits(&mut enc)?;
        self.encode_work(&mut enc)?;
        self.encode_log(&mut enc)?;
        self.encode_backups(&mut enc)?;
        self.encode_pubsub(&mut enc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        #[derive(Debug)]
        struct One;
        impl Collector for One {
            fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
                let labels: Labels = vec![("element", Escaped("a\"b\\c\nd"))];
                family(&mut enc, "x", "help", MetricType::Gauge)?
                    .encode_family(&labels)?
                    .encode_gauge(&1u64)
            }
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One));
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(r#"x{element="a\"b\\c\nd"} 1"#), "{out}");
        assert!(out.ends_with("# EOF\n"), "{out}");
    }
}
