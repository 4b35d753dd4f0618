//! The payload of [`super::Error::MemoryBudget`]: why a plan does not fit in the memory limit
//! and what would. `crate::arena::budget` builds it; it lives here so that errors read no
//! planning module. Also the two byte formats its message and the plan report share.

use std::fmt;

/// What would fit within the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// A smaller value of the symbolic batch dim fits.
    LargestBatch {
        /// The symbol (e.g. `N`).
        symbol: String,
        /// Its value in this compile.
        current: usize,
        /// The largest value whose plan fits.
        largest: usize,
    },
    /// Not even `symbol = 1` fits.
    NoBatchFits {
        /// The symbol.
        symbol: String,
        /// Bytes over the limit at `symbol = 1`.
        over_at_one: usize,
    },
    /// No symbolic batch dim to shrink: how many bytes over the limit the plan is.
    Over {
        /// Bytes over.
        bytes: usize,
    },
}

/// Why a plan does not fit in the memory limit (the payload of [`Error::MemoryBudget`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetExceeded {
    /// The limit in bytes.
    pub limit: usize,
    /// Where the limit comes from.
    pub source: String,
    /// Arena bytes of the plan.
    pub arena_bytes: usize,
    /// Weight bytes.
    pub weights_bytes: usize,
    /// The peak step.
    pub peak_step: usize,
    /// Steps in the schedule.
    pub steps: usize,
    /// The node running at the peak and its op (`None` for a graph without nodes).
    pub peak_node: Option<(String, String)>,
    /// The largest buffers live at the peak: `(name, bytes)`, largest first.
    pub largest: Vec<(String, usize)>,
    /// What would fit.
    pub fit: Fit,
}

fn sized(n: usize) -> String {
    format!("{} ({} bytes)", human_bytes(n), grouped(n))
}

impl fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let need = self.arena_bytes.saturating_add(self.weights_bytes);
        write!(
            f,
            "memory limit exceeded: needs {} ({} bytes: arena {} + weights {}), limit {} ({} bytes, {}); peak at step {} of {}",
            human_bytes(need),
            grouped(need),
            human_bytes(self.arena_bytes),
            human_bytes(self.weights_bytes),
            human_bytes(self.limit),
            grouped(self.limit),
            self.source,
            self.peak_step,
            self.steps,
        )?;
        if let Some((node, op)) = &self.peak_node {
            write!(f, ", node '{node}' ({op})")?;
        }
        if !self.largest.is_empty() {
            let list: Vec<String> = self
                .largest
                .iter()
                .map(|(n, b)| format!("'{n}' {}", human_bytes(*b)))
                .collect();
            write!(f, "; largest buffers live there: {}", list.join(", "))?;
        }
        match &self.fit {
            Fit::LargestBatch {
                symbol,
                current,
                largest,
            } => write!(
                f,
                "; largest {symbol} that fits: {largest} (compiled with {symbol}={current}; \
                 pass --shape {symbol}={largest})"
            ),
            Fit::NoBatchFits {
                symbol,
                over_at_one,
            } => write!(
                f,
                "; nothing fits: even {symbol}=1 is {} over",
                human_bytes(*over_at_one)
            ),
            Fit::Over { bytes } => write!(f, "; {} over the limit", sized(*bytes)),
        }
    }
}

/// `12.3 MiB` (binary units; bytes below 1 KiB as `N B`).
pub fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// `12,345,678`.
pub fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
