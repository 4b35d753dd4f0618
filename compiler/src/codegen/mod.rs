//! Code generation: the whole model becomes one JIT-compiled program (Cranelift) — a
//! straight-line sequence of kernel calls whose tensor addresses are the arena base plus
//! constant offsets from the plan, and the weights base plus constant offsets.
//!
//! - [`program`]: the JIT module, the kernel cache and the entry function;
//! - [`weights`]: the aligned read-only weights region;
//! - [`kernels`]: the kernel emitters (f32): elementwise with numpy broadcasting (unary math
//!   with an f32x4 exp polynomial, binary, variadic, Where, BatchNormalization folded to a
//!   multiply-add), Softmax/LogSoftmax, Reduce*, LayerNormalization, Gemm/MatMul (calls of
//!   `arenac_sgemm` on B packed at compile time, or at run time into the node's scratch),
//!   1-d and 2-d Conv as one call of `arenac_conv2d` (depthwise direct, 1x1 GEMM on the input,
//!   else im2col tiles packed for the GEMM core; bias and a fused activation in the epilogue),
//!   Max/Average/GlobalAverage pooling, strided copies (Transpose, Slice,
//!   Concat, Split, views of constants) and Gather;
//! - `lower`: what each node becomes (kernel calls with operands);
//! - [`fault`]: the record through which kernels report run-time faults (an index out of
//!   range), checked by [`Executable::run`].
//! - [`profile`]: the per-node profiling marks and what a profile knows at compile time.

mod aligned;
pub mod fault;
pub mod host;
mod io;
pub mod kernels;
mod lower;
mod parallel;
pub mod profile;
pub mod program;
pub mod rows;
pub mod weights;

use std::collections::HashMap;
use std::time::Instant;

use crate::arena::ArenaPlan;
use crate::error::{Error, OpError};
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::types::TensorType;

pub use io::IoSlot;

/// Alignment of the arena base and of every tensor in the weights region.
pub const ARENA_ALIGN: usize = 64;

/// What to generate besides the model's kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodegenOptions {
    /// Per-node profiling: the entry function calls [`profile::arenac_profile_mark`] between
    /// executed nodes, and the executable carries a [`profile::ProfileInfo`]. Off (the
    /// default), the entry has no hook call at all.
    pub profile: bool,
    /// The type the weights of Conv, Gemm and MatMul (constant B) are stored in
    /// ([`crate::gemm::lowp`]; widened to f32 inside the GEMM core). Other constants stay f32
    /// ([`crate::analysis::weights_type::weights_report`] lists them).
    pub weights: crate::gemm::lowp::WeightType,
}

/// A compiled model: JIT code plus its read-only weights region. Owns its JIT module; code
/// memory is released when it is dropped. `Send + Sync`: share it between threads (e.g. in
/// an `Arc`) and give each thread its own arena.
pub struct Executable {
    /// The plan's arena, plus the fault record when some kernel checks.
    arena_bytes: usize,
    /// Arena offset of the fault record and the checked nodes by tag (`None`: no kernel
    /// checks anything).
    faults: Option<(usize, Vec<fault::CheckedNode>)>,
    inputs: Vec<IoSlot>,
    outputs: Vec<IoSlot>,
    /// The JIT module owning the code (taken on drop to free it).
    module: Option<cranelift_jit::JITModule>,
    /// `extern "C" fn(arena, weights, sink)`.
    entry: unsafe extern "C" fn(*mut u8, *const u8, *mut profile::MarkSink),
    weights: weights::WeightsRegion,
    /// Compile-time objects the code points to (FFT kernels): never read here, only kept
    /// alive as long as the code; dropped after it.
    #[allow(dead_code)]
    host: Vec<program::HostObject>,
    /// Distinct kernels compiled.
    kernels: usize,
    /// Wall-clock time of `compile`.
    compile_time: std::time::Duration,
    /// The part of it spent in [`program::Program::finish`]: building the entry function's
    /// IR and Cranelift's machine code for it and every kernel (on the plan's threads).
    jit_time: std::time::Duration,
    /// Threads the plan sized per-thread scratch for (the most a run may use).
    threads: usize,
    /// When `compile` started.
    compile_started: Instant,
    /// The profile's static half (compiled with [`CodegenOptions::profile`]).
    profile: Option<profile::ProfileInfo>,
    /// Calls in the entry function's IR.
    entry_calls: program::EntryCalls,
    /// Bytes stored in the reduced weights type, and the f32 bytes of their sources.
    reduced_weights: (usize, usize),
}

// SAFETY: after `compile` returns, nothing mutates an `Executable`: the JIT module is kept
// only to free its code memory in `drop` (which has exclusive access), the entry pointer is
// immutable finalized code, and the weights region is read-only. The generated code keeps no
// state between calls: it reads the weights and the host objects (immutable FFT kernels,
// `Send + Sync`) and reads/writes only the arena passed to `run` (the gemm core's kernel
// choice is a `OnceLock`). So an `Executable` may move to another
// thread, and several threads may call `run` at once, each with its own arena.
unsafe impl Send for Executable {}
// SAFETY: see `Send` above: `&Executable` only allows `run` (stateless code over the
// caller's arena) and reads of immutable fields.
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the module's code is only reachable through `self.entry`, which cannot
            // be called any more: `run` borrows `self`, which is being dropped.
            unsafe { m.free_memory() };
        }
    }
}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executable")
            .field("arena_bytes", &self.arena_bytes)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("weights_bytes", &self.weights.len())
            .field("kernels", &self.kernels)
            .field("threads", &self.threads)
            .finish()
    }
}

impl Executable {
    /// Bytes of arena a run needs: the plan's arena, plus a [`fault::FAULT_RECORD_BYTES`]
    /// record at its end when a kernel checks run-time values (indices).
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// The nodes whose kernels check run-time values, in tag order.
    pub fn checked_nodes(&self) -> &[fault::CheckedNode] {
        self.faults.as_ref().map_or(&[], |(_, t)| t.as_slice())
    }

    /// Graph inputs, in graph order: the caller writes each at its offset before [`Executable::run`].
    pub fn inputs(&self) -> &[IoSlot] {
        &self.inputs
    }

    /// Graph outputs, in graph order: valid at their offsets after [`Executable::run`].
    pub fn outputs(&self) -> &[IoSlot] {
        &self.outputs
    }

    /// Runs the program once. Allocates nothing. Fails when a kernel found a run-time value
    /// out of its range (an index outside its dim: ONNX calls it an error); the kernel still
    /// used a valid one instead, so nothing was read or written outside the arena, but the
    /// outputs of this run are not valid. The arena stays usable for the next run.
    ///
    /// # Safety
    /// `arena` must be aligned to [`ARENA_ALIGN`], valid for reads and writes of
    /// [`Executable::arena_bytes`] bytes, not accessed by anything else during the call, and
    /// hold every input at its slot.
    pub unsafe fn run(&self, arena: *mut u8) -> Result<(), fault::RunFault<'_>> {
        // SAFETY: the caller's contract is `run_with`'s, without a pool.
        unsafe { self.run_with(arena, None) }
    }

    /// [`Executable::run`] with the parallel kernels spread over `pool` (on at most
    /// [`Executable::threads`] of its threads; `None`: on the calling thread only).
    /// Allocates nothing. Results are bit-identical whatever the pool; the pool has joined
    /// every task before this returns, so the fault record is read after every writer.
    ///
    /// # Safety
    /// As [`Executable::run`].
    pub unsafe fn run_with(
        &self,
        arena: *mut u8,
        pool: Option<&crate::par::Pool>,
    ) -> Result<(), fault::RunFault<'_>> {
        // SAFETY: the caller's contract; no profile sink.
        unsafe { self.run_inner(arena, pool, std::ptr::null_mut()) }
    }

    /// [`Executable::run_with`], and when compiled with [`CodegenOptions::profile`], writes
    /// the nanoseconds since `origin` at each node boundary: `stamps[k]` when node `k` of
    /// [`profile::ProfileInfo::nodes`] starts, `stamps[nodes]` at the end. Slots past
    /// `stamps.len()` are not written. Allocates nothing.
    ///
    /// # Safety
    /// As for [`Executable::run`].
    pub unsafe fn run_profiled(
        &self,
        arena: *mut u8,
        pool: Option<&crate::par::Pool>,
        origin: Instant,
        stamps: &mut [u64],
    ) -> Result<(), fault::RunFault<'_>> {
        let mut sink = profile::MarkSink {
            origin,
            stamps: stamps.as_mut_ptr(),
            len: stamps.len(),
        };
        // SAFETY: the caller's contract; the sink lives on this frame for the whole call and
        // its stamps are an exclusively borrowed slice of `len` elements.
        unsafe { self.run_inner(arena, pool, &mut sink) }
    }

    /// Runs the entry function with the fault record cleared before and read after.
    ///
    /// # Safety
    /// As [`Executable::run`]; `sink` null or a valid [`profile::MarkSink`] for the call.
    unsafe fn run_inner(
        &self,
        arena: *mut u8,
        pool: Option<&crate::par::Pool>,
        sink: *mut profile::MarkSink,
    ) -> Result<(), fault::RunFault<'_>> {
        if let Some((offset, _)) = &self.faults {
            // SAFETY: the record lies at the end of the arena (`offset + FAULT_RECORD_BYTES
            // == arena_bytes`), 64-aligned; nothing runs yet.
            unsafe { fault::clear(arena, *offset) };
        }
        crate::par::with_pool(pool, || {
            // SAFETY: the entry function reads and writes the arena only inside the plan's
            // buffers and the fault record (all below `arena_bytes`; per-thread scratch
            // sized for `threads` threads, which the kernels never exceed), reads the
            // weights region it was compiled against, which `self` owns, and passes `sink`
            // only to the profiling hook; the caller guarantees the arena's contract above.
            unsafe { (self.entry)(arena, self.weights.as_ptr(), sink) }
        });
        match &self.faults {
            None => Ok(()),
            // SAFETY: as for `clear`; the program has returned.
            Some((offset, table)) => match unsafe { fault::read(arena, *offset, table) } {
                None => Ok(()),
                Some(f) => Err(f),
            },
        }
    }

    /// Threads the program was planned for: a run uses at most this many (each parallel
    /// kernel's per-thread scratch has this many slots).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The profile's static half: `Some` when compiled with [`CodegenOptions::profile`].
    pub fn profile(&self) -> Option<&profile::ProfileInfo> {
        self.profile.as_ref()
    }

    /// Calls in the entry function, counted in its IR (kernels and profiling hooks).
    pub fn entry_calls(&self) -> program::EntryCalls {
        self.entry_calls
    }

    /// When `compile` started (time zero of a profile's trace).
    pub fn compile_started(&self) -> Instant {
        self.compile_started
    }

    /// Bytes of the weights stored in the reduced type ([`CodegenOptions::weights`]), and the
    /// f32 bytes the same weights take as given.
    pub fn reduced_weights(&self) -> (usize, usize) {
        self.reduced_weights
    }

    /// Bytes of the read-only weights region.
    pub fn weights_bytes(&self) -> usize {
        self.weights.len()
    }

    /// Distinct kernels compiled (repeated layers share one).
    pub fn kernel_count(&self) -> usize {
        self.kernels
    }

    /// Wall-clock time `compile` took.
    pub fn compile_time(&self) -> std::time::Duration {
        self.compile_time
    }

    /// The part of [`Executable::compile_time`] spent in Cranelift: compiling the kernels and
    /// the entry function, and finalizing the module (the rest is lowering: building the
    /// kernels' IR, the entry's steps and the weights region).
    pub fn jit_time(&self) -> std::time::Duration {
        self.jit_time
    }
}

/// Compiles `g` with its arena plan into an [`Executable`]. An op without a kernel is an
/// [`Error::Node`] naming the node and op.
pub fn compile(g: &Graph, plan: &ArenaPlan) -> Result<Executable, Error> {
    compile_releasing(g, plan, &mut |_| {})
}

/// Constants read between two calls of the `release` hook of [`compile_releasing`].
const RELEASE_EVERY: usize = 4 << 20;

/// Constant bytes node `id` reads.
fn constant_bytes(g: &Graph, id: crate::ir::graph::NodeId) -> usize {
    g.node(id)
        .inputs
        .iter()
        .filter_map(|&v| match &g.value(v).kind {
            ValueKind::Constant(t) => Some(t.bytes().len()),
            _ => None,
        })
        .sum()
}

/// [`compile`], calling `release(None)` each time a few MiB of constants have been copied or
/// packed into the weights region, and at the end: the caller can then drop the source pages
/// (e.g. [`crate::import::tensor_proto::SourceMap::release`] on the mapped model file), so the
/// file's pages and the weights region are not both resident at the peak. While a large
/// weight is packed, `release(Some(bytes))` names a part of a constant's bytes read for the
/// last time (the caller drops those pages if they are the file's, and ignores other memory):
/// the peak holds one panel of the source, not the whole matrix.
pub fn compile_releasing(
    g: &Graph,
    plan: &ArenaPlan,
    release: &mut dyn FnMut(Option<&[u8]>),
) -> Result<Executable, Error> {
    compile_with(g, plan, &CodegenOptions::default(), release)
}

/// [`compile_releasing`] with options (profiling).
pub fn compile_with(
    g: &Graph,
    plan: &ArenaPlan,
    opts: &CodegenOptions,
    release: &mut dyn FnMut(Option<&[u8]>),
) -> Result<Executable, Error> {
    let started = Instant::now();
    // Kernels take their workspace from the plan's scratch buffers and assume 64-aligned
    // tensors: a plan made without either cannot be compiled (found by the `jit_diff` fuzzer).
    if !plan.options.liveness.scratch || !plan.options.align.is_multiple_of(ARENA_ALIGN) {
        return Err(Error::PlanInternal(format!(
            "code generation needs a plan with kernel scratch and {ARENA_ALIGN}-byte alignment \
             (given scratch={}, align={})",
            plan.options.liveness.scratch, plan.options.align
        )));
    }
    let slot = |v: ValueId| -> Result<IoSlot, Error> {
        let val = g.value(v);
        // An input `--activations` stores narrowed: declared f32, stored in 16 bits.
        if g.inputs.contains(&v) && plan.activations.input_narrowed(&val.name) {
            let offset = plan.value_offset(v).ok_or_else(|| Error::Node {
                node: val.name.clone(),
                op: "input".into(),
                source: OpError::Unsupported("a narrowed graph input has no arena slot".into()),
            })?;
            return Ok(IoSlot {
                stored: val.ty.dtype,
                ..IoSlot::new(
                    val.name.clone(),
                    TensorType::new(crate::ir::types::DType::F32, val.ty.shape.clone()),
                    offset,
                )
            });
        }
        let offset = plan.value_offset(v).ok_or_else(|| Error::Node {
            node: val.name.clone(),
            op: "output".into(),
            source: OpError::Unsupported(
                "a graph output that is a constant has no arena slot yet".into(),
            ),
        })?;
        Ok(IoSlot::new(val.name.clone(), val.ty.clone(), offset))
    };
    let inputs = g
        .inputs
        .iter()
        .map(|&v| slot(v))
        .collect::<Result<_, _>>()?;
    let outputs = g
        .outputs
        .iter()
        .map(|&v| slot(v))
        .collect::<Result<_, _>>()?;
    let mut prog = program::Program::new()?;
    // Machine code on as many threads as the model may run on (what the user allows).
    prog.set_compile_threads(plan.options.liveness.threads);
    // The fault record, if a kernel checks, goes after every planned buffer.
    let fault_offset = plan.arena_bytes.next_multiple_of(ARENA_ALIGN);
    prog.set_fault_offset(fault_offset);
    let mut w = weights::WeightsBuilder::with_capacity(weights_estimate(g, plan));
    w.set_storage(opts.weights);
    w.set_release(release);
    let mut consumed = 0usize;
    let root = lower::Frame::root();
    let (live, node_index) = if opts.profile {
        let index: HashMap<_, _> = g.nodes().enumerate().map(|(i, (id, _))| (id, i)).collect();
        (profile::live_bytes_per_step(plan), index)
    } else {
        (Vec::new(), HashMap::new())
    };
    let mut profiled = Vec::new();
    // The Convs that run Winograd (their kernel path in the profile), whatever the weights'
    // storage type (reduced ones are widened by the transform).
    let winograd: std::collections::HashSet<_> = if opts.profile {
        crate::analysis::liveness::winograd::chosen_nodes(g, plan)
            .into_iter()
            .collect()
    } else {
        Default::default()
    };
    for (step, &id) in plan.schedule.iter().enumerate() {
        let before = prog.call_count();
        lower::node(g, plan, &root, id, &mut prog, &mut w)?;
        if opts.profile && prog.call_count() > before {
            prog.mark(before, profiled.len() as u64);
            profiled.push(profile::node_profile(
                g,
                (id, node_index.get(&id).copied().unwrap_or(step)),
                step,
                &lower::epilogue_activation(g, plan, id),
                live.get(step).copied().unwrap_or_default(),
            ));
            if winograd.contains(&id)
                && let Some(p) = profiled.last_mut()
            {
                p.kernel = "conv 3x3/s1 winograd".into();
            }
        }
        // Once a few MiB of constants have been copied or packed into the weights region,
        // their source pages (often the mapped model file) may go.
        consumed += constant_bytes(g, id);
        if consumed >= RELEASE_EVERY {
            consumed = 0;
            w.release_all();
        }
    }
    w.release_all();
    let reduced_weights = w.reduced_bytes();
    if opts.profile {
        prog.mark(prog.call_count(), profiled.len() as u64);
    }
    let kernels = prog.kernels_compiled;
    let (fault_offset, checked) = prog.take_checked();
    let (arena_bytes, faults) = if checked.is_empty() {
        (plan.arena_bytes, None)
    } else {
        let end = fault_offset
            .checked_add(fault::FAULT_RECORD_BYTES)
            .ok_or_else(|| Error::PlanInternal("the arena size overflows".into()))?;
        (end, Some((fault_offset, checked)))
    };
    // Sealed before the program is finalized, so a failure here leaves no module to free.
    let weights = w.finish().map_err(|source| Error::System {
        what: "to make the weights region read-only".into(),
        source,
    })?;
    let finishing = Instant::now();
    let (module, entry, host, entry_calls) = prog.finish()?;
    let jit_time = finishing.elapsed();
    // SAFETY: `entry` is the finalized address of the function defined in `Program::finish`
    // with exactly this signature (three pointer parameters, no result, the host's C ABI).
    let entry: unsafe extern "C" fn(*mut u8, *const u8, *mut profile::MarkSink) =
        unsafe { std::mem::transmute(entry) };
    let profile = opts.profile.then_some(profile::ProfileInfo {
        nodes: profiled,
        hook_calls: entry_calls.hook,
    });
    Ok(Executable {
        arena_bytes,
        faults,
        inputs,
        outputs,
        module: Some(module),
        entry,
        weights,
        host,
        kernels,
        compile_time: started.elapsed(),
        jit_time,
        threads: plan.options.liveness.threads.max(1),
        compile_started: started,
        profile,
        entry_calls,
        reduced_weights,
    })
}

/// A guess at the weights region's size: the constants the scheduled nodes read (each
/// distinct buffer once), plus room for packing's padding and small compile-time tables.
/// Only a reservation: a short guess costs one copy when the region grows, a long one costs
/// nothing resident (untouched pages of a mapped region).
fn weights_estimate(g: &Graph, plan: &ArenaPlan) -> usize {
    let mut seen = std::collections::HashSet::new();
    let mut bytes = 0usize;
    for &id in &plan.schedule {
        for &v in &g.node(id).inputs {
            if let ValueKind::Constant(t) = &g.value(v).kind
                && seen.insert((t.bytes().as_ptr() as usize, t.bytes().len()))
            {
                bytes = bytes.saturating_add(t.bytes().len().next_multiple_of(ARENA_ALIGN));
            }
        }
    }
    bytes
        .saturating_add(bytes / 8)
        .saturating_add(plan.schedule.len().saturating_mul(4 * ARENA_ALIGN))
        .saturating_add(1 << 20)
}
