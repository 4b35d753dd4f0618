//! The batch runner: one compiled program run over row ranges of mapped inputs, each batch's
//! output rows handed to a [`RowSink`].

use std::path::Path;
use std::time::{Duration, Instant};

use arenac_compiler::import::inputs::declared_inputs;
use arenac_compiler::import::load_model_file;
use arenac_compiler::ir::types::ShapeDisplay;

use super::{MappedNpy, StreamError};
use crate::session::{Session, TensorRef};
use crate::{CompileOptions, DType, Model, compile_file};

/// Where a batch's output rows go. `rows` is a view of output `output`'s rows
/// `first_row..first_row + rows.shape()[0]`: shape `[n, ...row shape]`, padding rows of a
/// tail batch already dropped.
pub trait RowSink {
    /// Takes the rows of one output of one batch; batches arrive in row order.
    fn write_rows(
        &mut self,
        output: usize,
        first_row: usize,
        rows: TensorRef<'_>,
    ) -> Result<(), StreamError>;

    /// Called after each batch with the rows done so far (for progress).
    fn batch_done(&mut self, _rows_done: usize) {}
}

/// Caller-provided output buffers, one per graph output (in graph-output order), each
/// holding all rows: row `r` of output `i` goes to `self[i][r * row_bytes..]`.
impl RowSink for [&mut [u8]] {
    fn write_rows(
        &mut self,
        output: usize,
        first_row: usize,
        rows: TensorRef<'_>,
    ) -> Result<(), StreamError> {
        let bytes = rows.bytes();
        let n = rows.shape().first().copied().unwrap_or(1).max(1);
        let at = first_row * (bytes.len() / n);
        let dst = self
            .get_mut(output)
            .and_then(|buf| buf.get_mut(at..at + bytes.len()))
            .ok_or_else(|| {
                StreamError::Input(format!(
                    "output buffer {output} is missing or too small for rows {first_row}..{}",
                    first_row + n
                ))
            })?;
        dst.copy_from_slice(bytes);
        Ok(())
    }
}

/// A tensor slot seen as rows: name, dtype, the shape of one row and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowSlot {
    /// Graph input or output name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape without the batch dim.
    pub row_shape: Vec<usize>,
    /// Bytes of one row.
    pub row_bytes: usize,
}

/// What a streaming run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamStats {
    /// Rows run.
    pub rows: usize,
    /// Rows per batch.
    pub batch: usize,
    /// Batches run (the last one padded when `rows` is not a multiple of `batch`).
    pub batches: usize,
    /// Time spent running and handing rows to the sink (compiling excluded).
    pub elapsed: Duration,
}

/// One model compiled for batches of a fixed number of rows, with its session.
///
/// A symbolic (or `-1`/`?`) first dim of the graph's inputs is bound to the batch size asked
/// for; a model whose inputs have a fixed first dim runs at that batch whatever was asked
/// ([`BatchRunner::fixed_batch`]). The last, partial batch is **padded**: its rows are
/// copied into a staging buffer whose remaining rows are zero, and the outputs of the
/// padding rows are dropped. This is exact for every model whose rows do not interact
/// (no op reduces or mixes across the batch dim), which is what batching a data set assumes.
/// Every graph input and output must have the batch as its first dim. While batch k runs,
/// the kernel reads batch k + 1's rows in (`MADV_WILLNEED`); consumed rows are released.
#[derive(Debug)]
pub struct BatchRunner {
    model: Model,
    session: Session,
    batch: usize,
    symbol: Option<String>,
    inputs: Vec<RowSlot>,
    outputs: Vec<RowSlot>,
    /// One staging buffer per input for the padded tail batch (allocated when first needed).
    tail: Vec<Vec<u8>>,
}

/// The label of the graph's free batch dim (`N`, or `x[0]` for an anonymous one): the first
/// input's whose first dim is not fixed; `None` when every input's first dim is fixed.
pub fn batch_symbol(model: &Path) -> Result<Option<String>, StreamError> {
    let proto = load_model_file(model)?;
    let graph = proto.graph.as_ref().ok_or_else(|| {
        StreamError::Input(format!("{}: the model has no graph", model.display()))
    })?;
    Ok(declared_inputs(graph)?
        .iter()
        .find_map(|d| d.leading_symbol()))
}

impl BatchRunner {
    /// Compiles `model` with `opts` for batches of `batch` rows (see the type's doc for
    /// fixed-batch models) and creates its session.
    pub fn new(model: &Path, opts: &CompileOptions, batch: usize) -> Result<Self, StreamError> {
        if batch == 0 {
            return Err(StreamError::Input(
                "the batch size must be at least 1".into(),
            ));
        }
        let symbol = batch_symbol(model)?;
        let opts = match &symbol {
            Some(s) => opts.clone().with_shape(s.clone(), vec![batch]),
            None => opts.clone(),
        };
        let compiled = compile_file(model, &opts)?;
        let session = compiled.session()?;
        let batch = match (&symbol, session.inputs().first()) {
            (Some(_), _) => batch,
            (None, Some(slot)) => slot.ty.shape.first().copied().unwrap_or(1),
            (None, None) => {
                return Err(StreamError::Input(format!(
                    "{}: the model has no inputs to stream",
                    model.display()
                )));
            }
        };
        let rows_of = |kind: &str, slots: &[crate::IoSlot]| -> Result<Vec<RowSlot>, StreamError> {
            slots
                .iter()
                .map(|s| match s.ty.shape.split_first() {
                    Some((&b, row)) if b == batch => Ok(RowSlot {
                        name: s.name.clone(),
                        dtype: s.ty.dtype,
                        row_shape: row.to_vec(),
                        row_bytes: arenac_compiler::ir::types::checked_numel(row)
                            .unwrap_or(0)
                            .saturating_mul(s.ty.dtype.size()),
                    }),
                    _ => Err(StreamError::Input(format!(
                        "{kind} '{}' {} does not have the batch ({batch}) as its first dim, so \
                         the model cannot be run in batches of rows",
                        s.name, s.ty
                    ))),
                })
                .collect()
        };
        let inputs = rows_of("input", session.inputs())?;
        let outputs = rows_of("output", session.outputs())?;
        Ok(BatchRunner {
            model: compiled,
            session,
            batch,
            symbol,
            tail: vec![Vec::new(); inputs.len()],
            inputs,
            outputs,
        })
    }

    /// Rows per batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Whether the model fixes its batch (no free first dim): it ran at [`Self::batch`]
    /// whatever was asked.
    pub fn fixed_batch(&self) -> bool {
        self.symbol.is_none()
    }

    /// The compiled model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The session's arena bytes.
    pub fn arena_bytes(&self) -> usize {
        self.session.arena_bytes()
    }

    /// The inputs as rows, in graph-input order.
    pub fn inputs(&self) -> &[RowSlot] {
        &self.inputs
    }

    /// The outputs as rows, in graph-output order.
    pub fn outputs(&self) -> &[RowSlot] {
        &self.outputs
    }

    /// Runs every row of `inputs` (each graph input by name, once; all with the same row
    /// count, the slot's dtype and row shape), batch by batch, handing each output's rows to
    /// `sink`. Input pages behind the cursor are released as it goes. Fails before running
    /// anything on a mismatch, naming the inputs.
    pub fn run(
        &mut self,
        inputs: &[(&str, &MappedNpy)],
        sink: &mut (impl RowSink + ?Sized),
    ) -> Result<StreamStats, StreamError> {
        let ordered = self.check(inputs)?;
        let rows = ordered.first().map_or(0, |m| m.rows());
        let started = Instant::now();
        let batch = self.batch;
        let mut out_shape: Vec<Vec<usize>> = self
            .outputs
            .iter()
            .map(|o| {
                std::iter::once(0)
                    .chain(o.row_shape.iter().copied())
                    .collect()
            })
            .collect();
        let mut batches = 0;
        let mut start = 0;
        while start < rows {
            let n = batch.min(rows - start);
            let mut full = Vec::with_capacity(ordered.len());
            for (k, m) in ordered.iter().enumerate() {
                let slot = &self.inputs[k];
                let bytes = m.rows_bytes(start..start + n).ok_or_else(|| {
                    StreamError::Input(format!(
                        "{}: rows {start}..{} are past the end of the file",
                        m.path().display(),
                        start + n
                    ))
                })?;
                if slot.dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
                    return Err(StreamError::Input(format!(
                        "{}: bool data holds a byte other than 0 or 1 in rows {start}..{}",
                        m.path().display(),
                        start + n
                    )));
                }
                if n < batch {
                    // The tail: a copy padded with zero rows, whose outputs are dropped.
                    let buf = &mut self.tail[k];
                    buf.clear();
                    buf.extend_from_slice(bytes);
                    buf.resize(batch * slot.row_bytes, 0);
                }
                full.push(bytes);
            }
            let shapes: Vec<Vec<usize>> = self
                .inputs
                .iter()
                .map(|s| {
                    std::iter::once(batch)
                        .chain(s.row_shape.iter().copied())
                        .collect()
                })
                .collect();
            let views = full
                .iter()
                .zip(&self.inputs)
                .zip(&shapes)
                .zip(&self.tail)
                .map(|(((bytes, slot), shape), tail)| {
                    let data: &[u8] = if n == batch { bytes } else { tail };
                    Ok((
                        slot.name.as_str(),
                        TensorRef::from_bytes(slot.dtype, shape, data)?,
                    ))
                })
                .collect::<Result<Vec<_>, StreamError>>()?;
            // The next batch's rows are read in by the kernel while this one runs.
            for m in &ordered {
                m.prefetch(start + n..start + n + batch);
            }
            let outputs = self.session.run(&views)?;
            for (i, (slot, shape)) in self.outputs.iter().zip(&mut out_shape).enumerate() {
                let t = outputs.get(i).ok_or_else(|| {
                    StreamError::Input(format!("output {i} '{}' is missing", slot.name))
                })?;
                shape[0] = n;
                let kept = t.bytes().get(..n * slot.row_bytes).unwrap_or_default();
                sink.write_rows(i, start, TensorRef::from_bytes(slot.dtype, shape, kept)?)?;
            }
            start += n;
            batches += 1;
            for m in &ordered {
                m.release_before(start);
            }
            sink.batch_done(start);
        }
        Ok(StreamStats {
            rows,
            batch,
            batches,
            elapsed: started.elapsed(),
        })
    }

    /// The inputs in graph-input order, checked against the slots and each other.
    fn check<'m>(
        &self,
        given: &[(&str, &'m MappedNpy)],
    ) -> Result<Vec<&'m MappedNpy>, StreamError> {
        for (i, (name, _)) in given.iter().enumerate() {
            if !self.inputs.iter().any(|s| s.name == *name) {
                return Err(StreamError::Input(format!(
                    "'{name}' is not an input of the model (inputs: {})",
                    self.input_names()
                )));
            }
            if given[..i].iter().any(|(n, _)| n == name) {
                return Err(StreamError::Input(format!("input '{name}' is given twice")));
            }
        }
        let mut ordered = Vec::with_capacity(self.inputs.len());
        for slot in &self.inputs {
            let m = given
                .iter()
                .find(|(n, _)| *n == slot.name)
                .map(|(_, m)| *m)
                .ok_or_else(|| {
                    StreamError::Input(format!(
                        "input '{}' is not given (inputs: {})",
                        slot.name,
                        self.input_names()
                    ))
                })?;
            if m.dtype() != slot.dtype || m.row_shape() != slot.row_shape.as_slice() {
                return Err(StreamError::Input(format!(
                    "{}: rows of {}{} do not fit input '{}', whose rows are {}{}",
                    m.path().display(),
                    m.dtype(),
                    ShapeDisplay(m.row_shape()),
                    slot.name,
                    slot.dtype,
                    ShapeDisplay(&slot.row_shape)
                )));
            }
            ordered.push(m);
        }
        if let Some(first) = ordered.first()
            && ordered.iter().any(|m| m.rows() != first.rows())
        {
            let counts: Vec<String> = self
                .inputs
                .iter()
                .zip(&ordered)
                .map(|(s, m)| format!("'{}' {} rows ({})", s.name, m.rows(), m.path().display()))
                .collect();
            return Err(StreamError::Input(format!(
                "inputs have different row counts (first dims): {}",
                counts.join(", ")
            )));
        }
        Ok(ordered)
    }

    fn input_names(&self) -> String {
        let names: Vec<&str> = self.inputs.iter().map(|s| s.name.as_str()).collect();
        names.join(", ")
    }
}
