//! `--batch auto`: the largest batch whose arena + weights + staging fit the memory limit.

use std::path::Path;

use arenac_compiler::arena::budget::{Budget, MemoryLimit, bisect_largest, default_budget};

use super::StreamError;
use super::runner::batch_dim;
use crate::{CompileOptions, MemoryLimitSpec, compile_file};

/// The batch `--batch auto` chose and what it costs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoBatch {
    /// Rows per batch.
    pub batch: usize,
    /// Arena + weights at that batch (the plan's total).
    pub plan_bytes: usize,
    /// Staging at that batch: [`staging_bytes`].
    pub staging_bytes: usize,
    /// The limit it fits.
    pub limit: Budget,
}

/// The staging a streaming run of `batch` rows holds besides arena + weights: the reader
/// thread's two staging buffers per input (batch k + 1 read in while batch k runs) and the
/// writer thread's two buffers per output (batch k − 1 written while batch k runs), so
/// twice a batch of input rows and twice a batch of output rows.
pub fn staging_bytes(batch: usize, input_row_bytes: usize, output_row_bytes: usize) -> usize {
    batch
        .saturating_mul(input_row_bytes.saturating_add(output_row_bytes))
        .saturating_mul(2)
}

/// The largest batch, at most `max_rows` (the rows to run; at least 1), whose arena +
/// weights + staging fit `opts.memory_limit` (the physical RAM without one), found with the
/// planner's batch search ([`bisect_largest`]) over plans of the model with its batch dim
/// bound to each candidate. A model with a fixed batch dim gets its own batch, if it fits.
/// Fails when not even one row (or the fixed batch) fits, saying by how much.
pub fn auto_batch(
    model: &Path,
    opts: &CompileOptions,
    input_row_bytes: usize,
    max_rows: usize,
) -> Result<AutoBatch, StreamError> {
    let limit = match &opts.memory_limit {
        Some(spec) => spec.limit.resolve(&spec.text)?,
        None => default_budget().ok_or_else(|| {
            StreamError::Input(
                "--batch auto needs a memory limit: the physical RAM cannot be read, give \
                 --memory-limit"
                    .into(),
            )
        })?,
    };
    let symbol = batch_dim(model, opts)?;
    // Candidates are planned without a limit (the search compares against it itself) and
    // without generating code.
    let mut plan_opts = opts.clone().without_codegen();
    plan_opts.memory_limit = Some(MemoryLimitSpec {
        limit: MemoryLimit::Bytes(usize::MAX),
        text: "none".into(),
    });
    // (plan bytes, model batch) at a binding; compile errors at one row are the user's.
    // (plan bytes, staging bytes, model batch) at a binding.
    let plan_at = |k: Option<usize>| -> Result<(usize, usize, usize), StreamError> {
        let o = match (&symbol, k) {
            (Some(s), Some(k)) => plan_opts.clone().with_shape(s.clone(), vec![k]),
            _ => plan_opts.clone(),
        };
        let m = compile_file(model, &o)?;
        let g = m.graph();
        let b = g
            .inputs
            .first()
            .and_then(|&v| g.value(v).ty.shape.first().copied())
            .unwrap_or(1)
            .max(1);
        let out_bytes: usize = g
            .outputs
            .iter()
            .map(|&v| g.value(v).ty.bytes().unwrap_or(0))
            .sum();
        let staging = staging_bytes(b, input_row_bytes, out_bytes / b);
        Ok((m.plan().total_bytes(), staging, b))
    };
    let over = |k: usize, plan: usize, staging: usize| {
        StreamError::Input(format!(
            "no batch fits {}: {k} row(s) need arena + weights {plan} + staging {staging} = {} \
             bytes",
            limit.source,
            plan.saturating_add(staging)
        ))
    };
    let first = if symbol.is_some() { Some(1) } else { None };
    let (plan1, stage1, b1) = plan_at(first)?;
    if plan1.saturating_add(stage1) > limit.bytes {
        return Err(over(b1, plan1, stage1));
    }
    let max = max_rows.max(1);
    let batch = if symbol.is_none() || max == 1 {
        b1
    } else {
        let fits = |k: usize| {
            plan_at(Some(k))
                .ok()
                .is_some_and(|(p, st, _)| p.saturating_add(st) <= limit.bytes)
        };
        if fits(max) {
            max
        } else {
            bisect_largest(1, max, fits)
        }
    };
    let (plan_bytes, staging_bytes) = if batch == b1 {
        (plan1, stage1)
    } else {
        let (p, st, _) = plan_at(Some(batch))?;
        (p, st)
    };
    Ok(AutoBatch {
        batch,
        plan_bytes,
        staging_bytes,
        limit,
    })
}
