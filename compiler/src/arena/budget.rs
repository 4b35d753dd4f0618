//! The memory budget: a user's cap on arena + weights, enforced at compile time.
//!
//! A limit is bytes with an optional unit (`123456`, `64MiB`, `1.5GiB`, `500MB`; KiB/MiB/GiB/TiB
//! are binary, KB/MB/GB/TB decimal, `B` plain bytes; units are case-insensitive) or a
//! percentage of the machine's physical RAM (`10%`, read from `MemTotal` in `/proc/meminfo`).
//! Without a limit, the physical RAM is the limit (and nothing is enforced where it cannot be
//! read).
//!
//! When a plan does not fit, [`enforce`] builds a [`BudgetExceeded`] naming the peak and, when
//! a graph input's first dim is open (a named symbol, or `-1`/`?`: a free batch dim), binary-
//! searches the largest value of that dim whose plan fits, re-importing the model with each
//! candidate binding (`--shape N=k`, or `--shape x[0]=k` for an anonymous dim).

use std::path::Path;
use std::str::FromStr;

use arenac_proto::ModelProto;

use super::{ArenaPlan, PlanOptions, human_bytes, plan_graph};
use crate::error::Error;
use crate::error::budget::{BudgetExceeded, Fit};
use crate::import::inputs::{DeclaredInput, declared_inputs};
use crate::import::{ImportOptions, import_model};
use crate::ir::graph::Graph;

/// A memory limit as the user gave it.
#[derive(Clone, Debug, PartialEq)]
pub enum MemoryLimit {
    /// A number of bytes.
    Bytes(usize),
    /// A percentage (0 < p ≤ 100) of the machine's physical RAM.
    PercentOfRam(f64),
}

impl FromStr for MemoryLimit {
    type Err = Error;

    fn from_str(spec: &str) -> Result<MemoryLimit, Error> {
        let err = |reason: &str| Error::MemoryLimitSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let s = spec.trim();
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| err("expected a percentage such as 10%"))?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(err("a percentage must be above 0 and at most 100"));
            }
            return Ok(MemoryLimit::PercentOfRam(p));
        }
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = (s[..split].trim(), s[split..].trim());
        let scale: f64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "kb" => 1e3,
            "mb" => 1e6,
            "gb" => 1e9,
            "tb" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => {
                return Err(err(
                    "unknown unit (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, or N%)",
                ));
            }
        };
        let value: f64 = num
            .parse()
            .map_err(|_| err("expected a size such as 64MiB, 1.5GiB, 500MB, 123456 or 10%"))?;
        if unit.is_empty() && num.contains('.') {
            return Err(err("a plain byte count must be a whole number"));
        }
        let bytes = (value * scale).round();
        if !(bytes >= 1.0 && bytes < usize::MAX as f64) {
            return Err(err("the limit must be at least 1 byte and fit in memory"));
        }
        Ok(MemoryLimit::Bytes(bytes as usize))
    }
}

/// A resolved limit: bytes and how to describe them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The limit in bytes.
    pub bytes: usize,
    /// Where it comes from, e.g. `--memory-limit 64MiB` or `physical RAM`.
    pub source: String,
}

impl MemoryLimit {
    /// The limit in bytes (a percentage reads the physical RAM).
    pub fn resolve(&self, spec: &str) -> Result<Budget, Error> {
        match *self {
            MemoryLimit::Bytes(bytes) => Ok(Budget {
                bytes,
                source: format!("--memory-limit {spec}"),
            }),
            MemoryLimit::PercentOfRam(p) => {
                let ram = physical_ram().map_err(|reason| Error::MemoryLimitSpec {
                    spec: spec.to_string(),
                    reason,
                })?;
                Ok(Budget {
                    bytes: ((ram as f64) * p / 100.0) as usize,
                    source: format!("--memory-limit {spec} of {} physical RAM", human_bytes(ram)),
                })
            }
        }
    }
}

/// The default budget: the machine's physical RAM, `None` where it cannot be read.
pub fn default_budget() -> Option<Budget> {
    physical_ram().ok().map(|bytes| Budget {
        bytes,
        source: "the machine's physical RAM (no --memory-limit given)".into(),
    })
}

/// The machine's physical RAM in bytes (`MemTotal` of `/proc/meminfo`).
pub fn physical_ram() -> Result<usize, String> {
    let text = std::fs::read_to_string("/proc/meminfo").map_err(|e| {
        format!(
            "cannot read /proc/meminfo for the physical RAM ({e}); give bytes instead, e.g. 8GiB"
        )
    })?;
    parse_meminfo(&text)
        .ok_or_else(|| "no MemTotal line in /proc/meminfo; give bytes instead, e.g. 8GiB".into())
}

/// `MemTotal:  16314372 kB` → bytes.
pub fn parse_meminfo(text: &str) -> Option<usize> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let n: usize = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") | Some("KB") | Some("kb") => n.checked_mul(1024),
        None | Some("B") => Some(n),
        _ => None,
    }
}

/// Largest buffers listed in a [`BudgetExceeded`].
pub const LARGEST_LISTED: usize = 3;

/// Checks `plan` (of `g`, imported from `model` with `import`) against `budget`; when it does
/// not fit, returns [`Error::MemoryBudget`] with what would fit.
pub fn enforce(
    model: &ModelProto,
    dir: Option<&Path>,
    import: &ImportOptions,
    plan_opts: &PlanOptions,
    g: &Graph,
    plan: &ArenaPlan,
    budget: &Budget,
) -> Result<(), Error> {
    let need = plan.total_bytes();
    if need <= budget.bytes {
        return Ok(());
    }
    let fit = what_fits(model, dir, import, plan_opts, g, budget).unwrap_or(Fit::Over {
        bytes: need - budget.bytes,
    });
    Err(Error::MemoryBudget(Box::new(BudgetExceeded {
        limit: budget.bytes,
        source: budget.source.clone(),
        arena_bytes: plan.arena_bytes,
        weights_bytes: plan.weights.bytes,
        peak_step: plan.peak_step,
        steps: plan.schedule.len(),
        peak_node: plan.peak_node().map(|id| {
            let n = g.node(id);
            (n.name.clone(), n.op.name().to_string())
        }),
        largest: plan
            .peak_buffers(LARGEST_LISTED)
            .into_iter()
            .map(|(_, b)| (b.name.clone(), b.interval.size))
            .collect(),
        fit,
    })))
}

/// The fit over the first symbolic batch dim, `None` when the graph has none.
fn what_fits(
    model: &ModelProto,
    dir: Option<&Path>,
    import: &ImportOptions,
    plan_opts: &PlanOptions,
    g: &Graph,
    budget: &Budget,
) -> Option<Fit> {
    let declared = declared_inputs(model.graph.as_ref()?).ok()?;
    let (input, symbol) = declared
        .iter()
        .find_map(|d| d.leading_symbol().map(|s| (d.name.clone(), s)))?;
    let current = g
        .inputs
        .iter()
        .map(|&v| g.value(v))
        .find(|v| v.name == input)?
        .ty
        .shape
        .first()
        .copied()?;
    // Total memory with `symbol = k`; `None` when that binding does not import or plan.
    let need = |k: usize| -> Option<usize> {
        let mut shapes: Vec<(String, Vec<usize>)> = Vec::new();
        let is_symbol = |label: Option<String>| label.as_deref() == Some(symbol.as_str());
        for (name, dims) in &import.shapes {
            // The user's own binding of the symbol (by its label or as `INPUT[i]`) is replaced.
            let names_symbol = |d: &DeclaredInput| {
                (0..d.dims.as_ref().map_or(0, Vec::len))
                    .any(|i| *name == format!("{}[{i}]", d.name) && is_symbol(d.dim_label(i)))
            };
            if *name == symbol || declared.iter().any(names_symbol) {
                continue;
            }
            let mut dims = dims.clone();
            if let Some(d) = declared.iter().find(|d| d.name == *name) {
                for (i, dim) in dims.iter_mut().enumerate() {
                    if is_symbol(d.dim_label(i)) {
                        *dim = k;
                    }
                }
            }
            shapes.push((name.clone(), dims));
        }
        shapes.push((symbol.clone(), vec![k]));
        let mut imported = import_model(
            model,
            dir,
            &ImportOptions {
                shapes,
                ..Default::default()
            },
        )
        .ok()?;
        plan_graph(&mut imported.graph, plan_opts)
            .ok()
            .map(|p| p.total_bytes())
    };
    let fits = |k: usize| need(k).is_some_and(|n| n <= budget.bytes);
    if current <= 1 || !fits(1) {
        let over_at_one = need(1).map_or(0, |n| n.saturating_sub(budget.bytes));
        return Some(Fit::NoBatchFits {
            symbol,
            over_at_one,
        });
    }
    // fits(1) holds, fits(current) does not (it was just planned over the limit).
    let largest = bisect_largest(1, current, fits);
    Some(Fit::LargestBatch {
        symbol,
        current,
        largest,
    })
}

/// The batch search: the largest `k` in `lo..hi` with `fits(k)`, given that `fits(lo)` holds,
/// `fits(hi)` does not and `fits` is monotone (true up to some k, false after). Calls `fits`
/// about log2(hi - lo) times. Used by [`enforce`] and by streaming's `--batch auto`.
pub fn bisect_largest(lo: usize, hi: usize, mut fits: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (lo, hi.max(lo + 1));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}
