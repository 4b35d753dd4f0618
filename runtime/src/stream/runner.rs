//! The batch runner: one compiled program run over row ranges of mapped inputs, each batch's
//! output rows handed to a [`RowSink`].

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel, sync_channel};
use std::time::{Duration, Instant};

use arenac_compiler::import::inputs::{bind_inputs, declared_inputs};
use arenac_compiler::import::load_model_file;
use arenac_compiler::ir::types::ShapeDisplay;

use super::reader::{ReadJob, Staged, read_batches};
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
    /// Batches run.
    pub batches: usize,
    /// Arena + weights of the tail program, when the last batch ran on one (a symbolic batch
    /// dim and `rows` not a multiple of `batch`); a fixed-batch model pads its tail instead.
    pub tail_plan_bytes: Option<usize>,
    /// Time spent running and handing rows to the sink (compiling excluded).
    pub elapsed: Duration,
}

/// One model compiled for batches of a fixed number of rows, with its session.
///
/// A symbolic (or `-1`/`?`) first dim of the graph's inputs is bound to the batch size asked
/// for; a model whose inputs have a fixed first dim runs at that batch whatever was asked
/// ([`BatchRunner::fixed_batch`]). Every graph input and output must have the batch as its
/// first dim.
///
/// **The last, partial batch is exact for every model.** With a symbolic batch dim it runs
/// on a second program compiled for its row count when it is reached; the main program and
/// its arena are freed first, so the two never live at once (the tail's arena is the
/// smaller one for every planner-monotone model; [`StreamStats::tail_plan_bytes`] tells),
/// and the next [`BatchRunner::run`] compiles the main one again. A fixed-batch model
/// cannot run fewer rows: its tail is padded with zero rows whose outputs are dropped, exact
/// for models whose rows do not interact (no op reducing or mixing across the batch dim).
///
/// While batch k runs, a reader thread reads batch k + 1's rows from the files (`pread`, not
/// through the map: no mapped page becomes resident) into the second of two staging buffers
/// per input (recycled, allocated once per run); the running thread copies a staged batch
/// into the arena.
#[derive(Debug)]
pub struct BatchRunner {
    path: PathBuf,
    opts: CompileOptions,
    /// The program loaded: the main one (full batches) or a tail one.
    program: Option<Program>,
    batch: usize,
    symbol: Option<String>,
    inputs: Vec<RowSlot>,
    outputs: Vec<RowSlot>,
    arena_bytes: usize,
    weights_bytes: usize,
    plan_bytes: usize,
}

/// A compiled program for batches of `rows` rows, its session and its slot shapes.
#[derive(Debug)]
struct Program {
    rows: usize,
    model: Model,
    session: Session,
    /// `[rows, ...row shape]` of each input and output.
    input_shapes: Vec<Vec<usize>>,
    output_shapes: Vec<Vec<usize>>,
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

/// The model's free batch dim ([`batch_symbol`]), checked against `opts`' shape bindings:
/// in batches, the batch size sets that dim (and the tail's row count, for the tail
/// program), so a binding of it (the symbol, `x[0]`, or a whole input shape) is an error
/// naming that `--shape`; bindings of the other dims are kept.
pub(super) fn batch_dim(
    model: &Path,
    opts: &CompileOptions,
) -> Result<Option<String>, StreamError> {
    let proto = load_model_file(model)?;
    let graph = proto.graph.as_ref().ok_or_else(|| {
        StreamError::Input(format!("{}: the model has no graph", model.display()))
    })?;
    let declared = declared_inputs(graph)?;
    let Some(symbol) = declared.iter().find_map(|d| d.leading_symbol()) else {
        return Ok(None);
    };
    if opts.shapes.is_empty() {
        return Ok(Some(symbol));
    }
    // The user's bindings on their own first: their errors are theirs.
    bind_inputs(&declared, &opts.shapes)?;
    for (name, dims) in &opts.shapes {
        let binds_batch = [1, 2].into_iter().any(|k| {
            let pair = [(symbol.clone(), vec![k]), (name.clone(), dims.clone())];
            bind_inputs(&declared, &pair).is_err()
        });
        if binds_batch {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            return Err(StreamError::Input(format!(
                "--shape {name}={}: binds the batch dim {symbol}, which --batch sets (the \
                 batch size, and the last batch's row count); give --shape for the other \
                 dims only",
                dims.join("x")
            )));
        }
    }
    Ok(Some(symbol))
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
        let symbol = batch_dim(model, opts)?;
        let main = Program::compile(model, opts, symbol.as_deref(), batch)?;
        let batch = main.rows;
        // Program::compile checked that every slot's first dim is the batch.
        let rows_of = |slots: &[crate::IoSlot]| -> Vec<RowSlot> {
            slots
                .iter()
                .map(|s| {
                    let row = s.ty.shape.get(1..).unwrap_or_default();
                    RowSlot {
                        name: s.name.clone(),
                        dtype: s.ty.dtype,
                        row_shape: row.to_vec(),
                        row_bytes: arenac_compiler::ir::types::checked_numel(row)
                            .unwrap_or(0)
                            .saturating_mul(s.ty.dtype.size()),
                    }
                })
                .collect()
        };
        let inputs = rows_of(main.session.inputs());
        let outputs = rows_of(main.session.outputs());
        Ok(BatchRunner {
            path: model.to_path_buf(),
            opts: opts.clone(),
            batch,
            symbol,
            inputs,
            outputs,
            arena_bytes: main.session.arena_bytes(),
            weights_bytes: main.model.summary().weights_bytes,
            plan_bytes: main.model.plan().total_bytes(),
            program: Some(main),
        })
    }

    /// Rows per batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Whether the model fixes its batch (no free first dim): it ran at [`Self::batch`]
    /// whatever was asked, and its tail batch is padded.
    pub fn fixed_batch(&self) -> bool {
        self.symbol.is_none()
    }

    /// The main program (full batches); `None` after a run that ended on a tail program,
    /// until the next run compiles it again.
    pub fn model(&self) -> Option<&Model> {
        self.program
            .as_ref()
            .filter(|p| p.rows == self.batch)
            .map(|p| &p.model)
    }

    /// The main program's arena bytes.
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// The model's weight bytes.
    pub fn weights_bytes(&self) -> usize {
        self.weights_bytes
    }

    /// The main program's arena + weights.
    pub fn plan_bytes(&self) -> usize {
        self.plan_bytes
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
    /// `sink`. A reader thread stages batch k + 1 while batch k runs (see the type's doc).
    /// Fails before running anything on a mismatch,
    /// naming the inputs; an error on the reader thread (bad bool data) ends the run with
    /// that error.
    pub fn run(
        &mut self,
        inputs: &[(&str, &MappedNpy)],
        sink: &mut (impl RowSink + ?Sized),
    ) -> Result<StreamStats, StreamError> {
        let ordered = self.check(inputs)?;
        let rows = ordered.first().map_or(0, |m| m.rows());
        let started = Instant::now();
        let batch = self.batch;
        let job = ReadJob {
            inputs: ordered,
            dtypes: self.inputs.iter().map(|s| s.dtype).collect(),
            batch,
            pad_tail: self.symbol.is_none(),
        };
        // Two sets of staging buffers, allocated here once and recycled.
        let (give_back, free) = channel::<Vec<Vec<u8>>>();
        for _ in 0..2 {
            let set = self
                .inputs
                .iter()
                .map(|s| vec![0u8; batch.saturating_mul(s.row_bytes)])
                .collect();
            // The receiver is alive (held above): cannot fail.
            let _ = give_back.send(set);
        }
        let (to_runner, filled) = sync_channel::<Result<Staged, StreamError>>(1);
        let (batches, tail_plan_bytes) = std::thread::scope(|scope| {
            let reader = std::thread::Builder::new()
                .name("arenac-reader".into())
                .spawn_scoped(scope, move || read_batches(job, free, to_runner))
                .map_err(|e| StreamError::Input(format!("cannot start the reader thread: {e}")))?;
            // Hanging up (`filled` and `give_back` dropped by `run_batches`) stops the reader.
            let ran = self.run_batches(filled, give_back, sink);
            let joined = reader.join();
            match (ran, joined) {
                (Err(e), _) => Err(e),
                (Ok(_), Err(_)) => Err(StreamError::Input("the reader thread panicked".into())),
                (Ok(done), Ok(())) => Ok(done),
            }
        })?;
        Ok(StreamStats {
            rows,
            batch,
            batches,
            tail_plan_bytes,
            elapsed: started.elapsed(),
        })
    }

    /// The running side: each staged batch through its program, outputs to `sink`, buffers
    /// back to the reader. Returns the batches run and the tail program's arena + weights.
    fn run_batches(
        &mut self,
        filled: Receiver<Result<Staged, StreamError>>,
        give_back: Sender<Vec<Vec<u8>>>,
        sink: &mut (impl RowSink + ?Sized),
    ) -> Result<(usize, Option<usize>), StreamError> {
        let mut batches = 0;
        let mut tail_plan = None;
        for staged in filled {
            let staged = staged?;
            let n = staged.rows;
            // A full batch (every batch of a fixed-batch model) runs on the main program,
            // a symbolic-batch tail on one compiled for its rows. Only one lives at a time:
            // the other is dropped (its arena freed) before compiling.
            let want = if self.symbol.is_none() { self.batch } else { n };
            if self.program.as_ref().is_none_or(|p| p.rows != want) {
                self.program = None;
                self.program = Some(Program::compile(
                    &self.path,
                    &self.opts,
                    self.symbol.as_deref(),
                    want,
                )?);
            }
            let Some(program) = self.program.as_mut() else {
                return Err(StreamError::Input("no program is loaded".into()));
            };
            if program.rows != self.batch {
                tail_plan = Some(program.model.plan().total_bytes());
            }
            let views = staged
                .bufs
                .iter()
                .zip(&self.inputs)
                .zip(&program.input_shapes)
                .map(|((buf, slot), shape)| {
                    let data = buf.get(..program.rows * slot.row_bytes).unwrap_or_default();
                    Ok((
                        slot.name.as_str(),
                        TensorRef::from_bytes(slot.dtype, shape, data)?,
                    ))
                })
                .collect::<Result<Vec<_>, StreamError>>()?;
            let outputs = program.session.run(&views)?;
            for (i, (slot, shape)) in self
                .outputs
                .iter()
                .zip(&mut program.output_shapes)
                .enumerate()
            {
                let t = outputs.get(i).ok_or_else(|| {
                    StreamError::Input(format!("output {i} '{}' is missing", slot.name))
                })?;
                // Padding rows (a fixed-batch tail) are dropped.
                let kept = t.bytes().get(..n * slot.row_bytes).unwrap_or_default();
                let full = std::mem::replace(&mut shape[0], n);
                let sent = TensorRef::from_bytes(slot.dtype, shape, kept)
                    .map_err(StreamError::from)
                    .and_then(|rows| sink.write_rows(i, staged.start, rows));
                shape[0] = full;
                sent?;
            }
            drop(views);
            batches += 1;
            let done = staged.start + n;
            // The reader may have stopped (it sent its last batch): nothing to give back to.
            let _ = give_back.send(staged.bufs);
            sink.batch_done(done);
        }
        Ok((batches, tail_plan))
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

impl Program {
    /// Compiles `model` for batches of `rows` rows: the symbolic batch dim bound to `rows`,
    /// or the model's own batch when it fixes it. Every graph input and output must have
    /// the batch as its first dim.
    fn compile(
        model: &Path,
        opts: &CompileOptions,
        symbol: Option<&str>,
        rows: usize,
    ) -> Result<Program, StreamError> {
        let opts = match symbol {
            Some(s) => opts.clone().with_shape(s, vec![rows]),
            None => opts.clone(),
        };
        let compiled = compile_file(model, &opts)?;
        let session = compiled.session()?;
        let rows = match (symbol, session.inputs().first()) {
            (Some(_), _) => rows,
            (None, Some(slot)) => slot.ty.shape.first().copied().unwrap_or(1),
            (None, None) => {
                return Err(StreamError::Input(format!(
                    "{}: the model has no inputs to stream",
                    model.display()
                )));
            }
        };
        let shapes =
            |kind: &str, slots: &[crate::IoSlot]| -> Result<Vec<Vec<usize>>, StreamError> {
                slots
                    .iter()
                    .map(|s| match s.ty.shape.first() {
                        Some(&b) if b == rows => Ok(s.ty.shape.clone()),
                        _ => Err(StreamError::Input(format!(
                            "{kind} '{}' {} does not have the batch ({rows}) as its first dim, so \
                         the model cannot be run in batches of rows",
                            s.name, s.ty
                        ))),
                    })
                    .collect()
            };
        let input_shapes = shapes("input", session.inputs())?;
        let output_shapes = shapes("output", session.outputs())?;
        Ok(Program {
            rows,
            model: compiled,
            session,
            input_shapes,
            output_shapes,
        })
    }
}
