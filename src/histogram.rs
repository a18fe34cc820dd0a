//! A histogram: observations counted in fixed buckets, updated from any
//! thread (the commit path's latencies and batch sizes, the Pub/Sub ack
//! latency); the metrics and the benchmarks read it.
//!
//! Invariant: `count` is the sum of the buckets, and every observation lands
//! in exactly one bucket (the last one holds what is above every bound).

/// Observations counted in fixed buckets, safe to update from any thread: the
/// data of a Prometheus histogram (the server's metrics module encodes it) and
/// the quantiles the demo and benchmarks report.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<std::sync::atomic::AtomicU64>,
    sum: std::sync::Mutex<f64>,
}

impl Histogram {
    /// Empty, with these upper bucket bounds (ascending).
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| Default::default()).collect(),
            sum: Default::default(),
        }
    }

    /// Counts one observation.
    pub fn observe(&self, v: f64) {
        use std::sync::atomic::Ordering;
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        if let Ok(mut s) = self.sum.lock() {
            *s += v;
        }
    }

    /// Adds the counts of another histogram with the same bounds.
    pub fn add(&self, other: &Histogram) {
        use std::sync::atomic::Ordering;
        for (a, b) in self.counts.iter().zip(&other.counts) {
            a.fetch_add(b.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        if let (Ok(mut s), Ok(o)) = (self.sum.lock(), other.sum.lock()) {
            *s += *o;
        }
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        use std::sync::atomic::Ordering;
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// The `q` quantile (0..=1), interpolated linearly inside its bucket as
    /// Prometheus' `histogram_quantile` does; `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        use std::sync::atomic::Ordering;
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 && (below + n) as f64 >= rank {
                let lo = if i == 0 { 0.0 } else { self.bounds[i - 1] };
                let Some(&hi) = self.bounds.get(i) else {
                    return Some(lo); // above the last bound
                };
                return Some(lo + (hi - lo) * ((rank - below as f64) / n as f64).clamp(0.0, 1.0));
            }
            below += n;
        }
        self.bounds.last().copied()
    }

    /// (upper bound, observations in that bucket) per bucket, the last one
    /// unbounded (`f64::MAX`), and the sum of all observations.
    pub fn buckets(&self) -> (Vec<(f64, u64)>, f64) {
        use std::sync::atomic::Ordering;
        let buckets = self
            .bounds
            .iter()
            .copied()
            .chain([f64::MAX])
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        (buckets, self.sum.lock().map(|s| *s).unwrap_or(0.0))
    }
}
