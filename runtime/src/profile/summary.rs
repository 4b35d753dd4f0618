//! Where a profiled model's time goes: per op type and per kernel path, each node's median
//! over the recorded runs, with the share of time, GFLOP/s and GB/s.

use std::collections::HashMap;

use super::Profile;

/// One row of a [`ProfileSummary`]: a group of nodes (an op type or a kernel path).
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// The op type (`Conv`) or kernel path (`conv 3x3/s1 im2col`).
    pub key: String,
    /// Nodes in the group (calls per run).
    pub calls: usize,
    /// Sum of the nodes' median times, nanoseconds.
    pub time_ns: u64,
    /// Share of the sum over all nodes, 0..=1.
    pub share: f64,
    /// FLOPs of the group per run.
    pub flops: u64,
    /// Bytes moved by the group per run.
    pub bytes: u64,
}

impl SummaryRow {
    /// GFLOP/s over the group's time (0 without time).
    pub fn gflops(&self) -> f64 {
        if self.time_ns == 0 {
            0.0
        } else {
            self.flops as f64 / self.time_ns as f64
        }
    }

    /// GB/s moved over the group's time (0 without time).
    pub fn gbytes_per_s(&self) -> f64 {
        if self.time_ns == 0 {
            0.0
        } else {
            self.bytes as f64 / self.time_ns as f64
        }
    }
}

/// Per-op-type and per-kernel-path totals of a [`Profile`] (see [`Profile::summary`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileSummary {
    /// Runs the medians are taken over.
    pub runs: usize,
    /// Executed nodes per run.
    pub nodes: usize,
    /// Median of the runs' whole time ([`crate::Session::run_profiled`], inputs copied in),
    /// nanoseconds.
    pub run_ns: u64,
    /// Sum of the nodes' medians, nanoseconds.
    pub nodes_ns: u64,
    /// By op type, most time first.
    pub by_op: Vec<SummaryRow>,
    /// By kernel path, most time first.
    pub by_kernel: Vec<SummaryRow>,
}

fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

fn group(keys: &[(String, u64, u64, u64)], total: u64) -> Vec<SummaryRow> {
    let mut rows: Vec<SummaryRow> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for (key, ns, flops, bytes) in keys {
        let i = *at.entry(key.as_str()).or_insert_with(|| {
            rows.push(SummaryRow {
                key: key.clone(),
                calls: 0,
                time_ns: 0,
                share: 0.0,
                flops: 0,
                bytes: 0,
            });
            rows.len() - 1
        });
        let r = &mut rows[i];
        r.calls += 1;
        r.time_ns += ns;
        r.flops = r.flops.saturating_add(*flops);
        r.bytes = r.bytes.saturating_add(*bytes);
    }
    for r in &mut rows {
        r.share = if total == 0 {
            0.0
        } else {
            r.time_ns as f64 / total as f64
        };
    }
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.key.cmp(&b.key)));
    rows
}

impl Profile {
    /// Each node's median time over the recorded runs, grouped by op type and by kernel path.
    pub fn summary(&self) -> ProfileSummary {
        let nodes = self.nodes();
        let runs: Vec<_> = (0..self.runs()).filter_map(|r| self.run(r)).collect();
        let mut buf = Vec::with_capacity(runs.len());
        let medians: Vec<u64> = (0..nodes.len())
            .map(|k| {
                buf.clear();
                buf.extend(runs.iter().filter_map(|r| r.node(k)).map(|(_, d)| d));
                median(&mut buf)
            })
            .collect();
        let nodes_ns: u64 = medians.iter().sum();
        let mut whole: Vec<u64> = runs.iter().map(|r| r.end.saturating_sub(r.start)).collect();
        let by = |key: &dyn Fn(usize) -> String| -> Vec<SummaryRow> {
            let keys: Vec<(String, u64, u64, u64)> = nodes
                .iter()
                .enumerate()
                .map(|(k, n)| (key(k), medians[k], n.flops, n.bytes_moved()))
                .collect();
            group(&keys, nodes_ns)
        };
        ProfileSummary {
            runs: runs.len(),
            nodes: nodes.len(),
            run_ns: median(&mut whole),
            nodes_ns,
            by_op: by(&|k| nodes[k].op_type.to_string()),
            by_kernel: by(&|k| nodes[k].kernel.clone()),
        }
    }
}

fn table(out: &mut String, title: &str, rows: &[SummaryRow]) {
    use std::fmt::Write as _;
    let width = rows
        .iter()
        .map(|r| r.key.chars().count())
        .max()
        .unwrap_or(0)
        .max(title.len());
    let _ = writeln!(
        out,
        "{title:<width$}  {:>10}  {:>6}  {:>5}  {:>9}  {:>8}  {:>7}",
        "time ms", "share", "calls", "avg µs", "GFLOP/s", "GB/s"
    );
    for r in rows {
        let avg = r.time_ns as f64 / 1e3 / r.calls.max(1) as f64;
        let _ = writeln!(
            out,
            "{:<width$}  {:>10.3}  {:>5.1}%  {:>5}  {:>9.1}  {:>8.1}  {:>7.1}",
            r.key,
            r.time_ns as f64 / 1e6,
            r.share * 100.0,
            r.calls,
            avg,
            r.gflops(),
            r.gbytes_per_s()
        );
    }
}

impl ProfileSummary {
    /// The summary as text: a header line, then the two tables.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "profile: {} run(s), {} nodes per run; median run {:.3} ms, of which nodes {:.3} ms \
             (sum of per-node medians)",
            self.runs,
            self.nodes,
            self.run_ns as f64 / 1e6,
            self.nodes_ns as f64 / 1e6
        );
        table(&mut out, "op type", &self.by_op);
        out.push('\n');
        table(&mut out, "kernel", &self.by_kernel);
        out
    }
}
