//! Running a compiled model: a [`Session`] owns one aligned arena, allocated once when it is
//! created, and [`Session::run`] copies the inputs into their slots, runs the JIT program and
//! hands back views of the outputs, without a single heap allocation.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;

use arenac_compiler::codegen::{ARENA_ALIGN, Executable, IoSlot};
use arenac_compiler::ir::lowp;
use arenac_compiler::ir::types::{DType, ShapeDisplay, TensorType, checked_numel};
use arenac_compiler::par::Pool;

use crate::Model;
use crate::profile::Profile;

/// A borrowed view of a tensor: dtype, shape and its little-endian, C-order bytes.
///
/// The bytes need no particular alignment; [`TensorRef::as_f32`] gives a typed slice when they
/// happen to be aligned (outputs always are). The storage types (8-/4-bit floats, 4-/2-bit
/// integers) take one byte per element, their code in the low bits (4-/2-bit integers are
/// sign- or zero-extended in outputs; inputs are read by their low bits): see
/// `arenac_compiler::ir::lowp`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TensorRef<'a> {
    dtype: DType,
    shape: &'a [usize],
    data: &'a [u8],
}

/// Element types a [`TensorRef`] can be built from as a typed slice.
pub trait Element: Copy + sealed::Sealed {
    /// The dtype of this element type.
    const DTYPE: DType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
        }
    )*};
}
element!(f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8,
    u16 => U16, u32 => U32, u64 => U64, bool => Bool);

impl<'a> TensorRef<'a> {
    /// A view over raw little-endian bytes. Fails when `data` does not hold exactly the
    /// elements of `shape`.
    pub fn from_bytes(
        dtype: DType,
        shape: &'a [usize],
        data: &'a [u8],
    ) -> Result<TensorRef<'a>, RunError> {
        let expected = checked_numel(shape).and_then(|n| n.checked_mul(dtype.size()));
        if expected != Some(data.len()) {
            return Err(RunError::DataLength {
                dtype,
                shape: shape.to_vec(),
                expected,
                actual: data.len(),
            });
        }
        Ok(TensorRef { dtype, shape, data })
    }

    /// A view over a typed slice (`f32`, `i64`, `bool`...). Fails when `values` does not hold
    /// exactly the elements of `shape`.
    pub fn from_slice<T: Element>(
        shape: &'a [usize],
        values: &'a [T],
    ) -> Result<TensorRef<'a>, RunError> {
        // SAFETY: every `Element` type is a plain scalar without padding (bool is one byte,
        // 0 or 1), so its memory is `size_of_val(values)` initialized bytes, borrowed for 'a.
        let data = unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values))
        };
        TensorRef::from_bytes(T::DTYPE, shape, data)
    }

    /// A view whose length the caller has already checked.
    pub(crate) fn new_unchecked(dtype: DType, shape: &'a [usize], data: &'a [u8]) -> Self {
        debug_assert_eq!(
            checked_numel(shape).map(|n| n * dtype.size()),
            Some(data.len())
        );
        TensorRef { dtype, shape, data }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Static shape.
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The data as `&[f32]`: `None` unless the dtype is f32 and the bytes are 4-aligned
    /// (outputs of a session always are).
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        if self.dtype != DType::F32 {
            return None;
        }
        // SAFETY: every bit pattern is a valid f32; `align_to` only puts correctly aligned,
        // whole elements in the middle slice.
        let (head, mid, tail) = unsafe { self.data.align_to::<f32>() };
        (head.is_empty() && tail.is_empty()).then_some(mid)
    }

    /// Element `i` converted to `f32` (floats rounded, integers and bools as numbers), or
    /// `None` past the end.
    pub fn get_f32(&self, i: usize) -> Option<f32> {
        let size = self.dtype.size();
        let b = self
            .data
            .get(i.checked_mul(size)?..(i + 1).checked_mul(size)?)?;
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(b);
        let u = u64::from_le_bytes(w);
        Some(match self.dtype {
            DType::F32 => f32::from_bits(u as u32),
            DType::F64 => f64::from_bits(u) as f32,
            DType::F16 => half::f16::from_bits(u as u16).to_f32(),
            DType::BF16 => half::bf16::from_bits(u as u16).to_f32(),
            DType::I8 => u as u8 as i8 as f32,
            DType::I16 => u as u16 as i16 as f32,
            DType::I32 => u as u32 as i32 as f32,
            DType::I64 => u as i64 as f32,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => u as f32,
            DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
                lowp::decode_int(self.dtype, u as u8) as f32
            }
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1 => lowp::decode_float(self.dtype, u as u8),
        })
    }

    /// Writes every element converted to `f32` into `out` (no allocation). Fails unless
    /// `out.len()` equals the element count.
    pub fn copy_to_f32(&self, out: &mut [f32]) -> Result<(), RunError> {
        if out.len() != self.numel() {
            return Err(RunError::DataLength {
                dtype: DType::F32,
                shape: self.shape.to_vec(),
                expected: Some(self.numel() * 4),
                actual: out.len() * 4,
            });
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.get_f32(i).unwrap_or(0.0);
        }
        Ok(())
    }

    /// Every element converted to `f32`, in a new vector (allocates; for callers, not for the
    /// run itself).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        (0..self.numel())
            .map(|i| self.get_f32(i).unwrap_or(0.0))
            .collect()
    }

    /// The dtype and shape as a [`TensorType`].
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape.to_vec())
    }
}

/// For a dtype numpy has no type for, where to get a tensor of it.
fn pb_hint(dtype: DType) -> &'static str {
    if dtype == DType::BF16 || dtype.is_storage() {
        " (numpy has no such dtype: give it as a TensorProto .pb, e.g. written by \
         onnx.numpy_helper.from_array)"
    } else {
        ""
    }
}

/// Why a session could not be created or a run was refused. A refused run leaves the session
/// usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// An input name the model does not have.
    #[error("unknown input '{name}'; the model's inputs are: {known}")]
    UnknownInput {
        /// The name given.
        name: String,
        /// The model's inputs with their types, comma-separated.
        known: String,
    },
    /// The same input given twice.
    #[error("input '{name}' is given twice")]
    DuplicateInput {
        /// The input.
        name: String,
    },
    /// A model input that was not given.
    #[error("missing input '{name}' (expected {expected})")]
    MissingInput {
        /// The input.
        name: String,
        /// Its type.
        expected: TensorType,
    },
    /// An input of the wrong element type.
    #[error("input '{name}': expected dtype {expected}, given {given}{}", pb_hint(*expected))]
    WrongDType {
        /// The input.
        name: String,
        /// Its dtype in the model.
        expected: DType,
        /// The dtype given.
        given: DType,
    },
    /// An input of the wrong shape.
    #[error(
        "input '{name}': expected shape {}, given {} (recompile with --shape / CompileOptions::with_shape to change it)",
        ShapeDisplay(&expected.shape),
        ShapeDisplay(given)
    )]
    WrongShape {
        /// The input.
        name: String,
        /// Its type in the model.
        expected: TensorType,
        /// The shape given.
        given: Vec<usize>,
    },
    /// Positional inputs: not as many as the model has.
    #[error("the model has {expected} inputs, {given} were given")]
    InputCount {
        /// The model's input count.
        expected: usize,
        /// The number given.
        given: usize,
    },
    /// Bytes that do not match the dtype and shape.
    #[error(
        "data of {actual} bytes does not fit {dtype}{} ({})",
        ShapeDisplay(shape),
        match expected { Some(e) => format!("needs {e} bytes"), None => "too many elements".into() }
    )]
    DataLength {
        /// Element type.
        dtype: DType,
        /// Shape.
        shape: Vec<usize>,
        /// Bytes needed (`None` when the count overflows).
        expected: Option<usize>,
        /// Bytes given.
        actual: usize,
    },
    /// A profile was asked of a model compiled without `CompileOptions::profile`.
    #[error(
        "the model was compiled without profiling (CompileOptions::profile / arenac run --profile)"
    )]
    NotProfiled,
    /// [`Session::run_profiled`] was given a profile made for another compiled model.
    #[error("the profile was made for another compiled model than this session's")]
    ProfileMismatch,
    /// The model was compiled with `CompileOptions::codegen` off, so there is nothing to run.
    #[error("the model was compiled without code generation (CompileOptions::codegen is false)")]
    NotCompiled,
    /// The arena could not be allocated.
    #[error("cannot allocate the arena of {bytes} bytes")]
    ArenaAlloc {
        /// Requested size.
        bytes: usize,
    },
    /// More threads asked of a session than the model was planned for.
    #[error(
        "{asked} threads asked, but the model was compiled for {planned} (its per-thread \
         scratch has {planned} slots): recompile with --threads {asked} / \
         CompileOptions::with_threads({asked})"
    )]
    TooManyThreads {
        /// Threads asked.
        asked: usize,
        /// Threads planned.
        planned: usize,
    },
    /// The operating system refused a thread.
    #[error("cannot start a pool of {threads} threads: {reason}")]
    Threads {
        /// Threads asked.
        threads: usize,
        /// The system's error.
        reason: String,
    },
    /// A kernel found a run-time value out of its range — an index outside its dim (Gather,
    /// GatherElements, GatherND, ScatterElements, ScatterND) or a sequence length outside
    /// the time dim (ReverseSequence) — which ONNX calls an error. Kernels replace such values by valid ones,
    /// so nothing outside the arena was touched, but this run's outputs are not valid. The
    /// first one reported is named; the session stays usable.
    #[error(
        "node '{node}' ({op}): {what} {value} is out of range (valid: {lo} to {hi}); this run's \
         outputs are not valid"
    )]
    OutOfRange {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// What was out of range ("index", "sequence length").
        what: &'static str,
        /// The value the input held.
        value: i64,
        /// Lowest valid value.
        lo: i64,
        /// Highest valid value.
        hi: i64,
    },
    /// The run took an `If` branch that cannot run with the shapes the program was compiled
    /// for (its import failed; the compile warned). Nothing outside the arena was touched,
    /// but this run's outputs are not valid; the session stays usable.
    #[error("node '{node}' ({op}): {reason}; this run's outputs are not valid")]
    Unrunnable {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// Which branch and why it cannot run.
        reason: String,
    },
    /// An input or output slot lies outside the arena (an arenac bug).
    #[error("slot '{name}' lies outside the arena of {arena_bytes} bytes (an arenac bug)")]
    SlotOutOfBounds {
        /// The value.
        name: String,
        /// Arena size.
        arena_bytes: usize,
    },
}

fn describe_slots(slots: &[IoSlot]) -> String {
    slots
        .iter()
        .map(|s| format!("{} {}", s.name, s.ty))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks one given tensor against its slot.
fn check_one(slot: &IoSlot, t: &TensorRef<'_>) -> Result<(), RunError> {
    if t.dtype != slot.ty.dtype {
        return Err(RunError::WrongDType {
            name: slot.name.clone(),
            expected: slot.ty.dtype,
            given: t.dtype,
        });
    }
    if t.shape != slot.ty.shape.as_slice() {
        return Err(RunError::WrongShape {
            name: slot.name.clone(),
            expected: slot.ty.clone(),
            given: t.shape.to_vec(),
        });
    }
    if Some(t.data.len()) != slot.ty.bytes() {
        return Err(RunError::DataLength {
            dtype: t.dtype,
            shape: t.shape.to_vec(),
            expected: slot.ty.bytes(),
            actual: t.data.len(),
        });
    }
    Ok(())
}

/// Checks named inputs against the model's input slots: every name known, none twice, none
/// missing, each with the slot's dtype and exact shape. Allocates only when it fails.
pub fn validate_named(slots: &[IoSlot], inputs: &[(&str, TensorRef<'_>)]) -> Result<(), RunError> {
    for (j, (name, t)) in inputs.iter().enumerate() {
        let Some(slot) = slots.iter().find(|s| s.name == *name) else {
            return Err(RunError::UnknownInput {
                name: name.to_string(),
                known: describe_slots(slots),
            });
        };
        if inputs[..j].iter().any(|(n, _)| n == name) {
            return Err(RunError::DuplicateInput {
                name: name.to_string(),
            });
        }
        check_one(slot, t)?;
    }
    if let Some(slot) = slots
        .iter()
        .find(|s| !inputs.iter().any(|(n, _)| *n == s.name))
    {
        return Err(RunError::MissingInput {
            name: slot.name.clone(),
            expected: slot.ty.clone(),
        });
    }
    Ok(())
}

/// Checks inputs given in the model's input order. Allocates only when it fails.
pub fn validate_positional(slots: &[IoSlot], inputs: &[TensorRef<'_>]) -> Result<(), RunError> {
    if inputs.len() != slots.len() {
        return Err(RunError::InputCount {
            expected: slots.len(),
            given: inputs.len(),
        });
    }
    for (slot, t) in slots.iter().zip(inputs) {
        check_one(slot, t)?;
    }
    Ok(())
}

/// A fault a kernel reported as the run's error.
fn fault_error(f: arenac_compiler::codegen::fault::RunFault<'_>) -> RunError {
    if let Some(reason) = f.detail {
        return RunError::Unrunnable {
            node: f.node.to_string(),
            op: f.op.to_string(),
            reason: reason.to_string(),
        };
    }
    RunError::OutOfRange {
        node: f.node.to_string(),
        op: f.op.to_string(),
        what: f.what,
        value: f.value,
        lo: f.lo,
        hi: f.hi,
    }
}

/// A model ready to run: its compiled program and one arena, allocated once.
///
/// `Send`: a session may move to another thread. For parallel runs, create one session per
/// thread from the same [`Model`] (the compiled code is shared, each session owns its arena).
///
/// See the crate documentation for an example.
pub struct Session {
    exe: Arc<Executable>,
    arena: NonNull<u8>,
    layout: Layout,
    /// The intra-op pool (`None`: one thread), made once with the session.
    pool: Option<Pool>,
}

// SAFETY: a `Session` owns its arena block alone (allocated in `from_executable`, freed in
// `drop`) and shares only the `Executable`, which is `Send + Sync`; running needs `&mut self`.
// Moving a session to another thread moves that ownership.
unsafe impl Send for Session {}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("arena_bytes", &self.layout.size())
            .field("threads", &self.threads())
            .field("inputs", &self.exe.inputs())
            .field("outputs", &self.exe.outputs())
            .finish()
    }
}

impl Session {
    /// Creates a session: allocates the zeroed arena (aligned to [`ARENA_ALIGN`]) and starts
    /// the thread pool of the thread count the model was compiled for
    /// ([`crate::CompileOptions::threads`]). Fails with [`RunError::NotCompiled`] when the
    /// model was compiled with `codegen` off.
    pub fn new(model: &Model) -> Result<Session, RunError> {
        let exe = model.executable().ok_or(RunError::NotCompiled)?.clone();
        Session::from_executable(exe)
    }

    /// Creates a session over an executable (shared, e.g. by several sessions), running on
    /// the threads it was planned for.
    pub fn from_executable(exe: Arc<Executable>) -> Result<Session, RunError> {
        let threads = exe.threads();
        Session::with_threads(exe, threads)
    }

    /// Creates a session running on `threads` threads: at least 1, at most the count the
    /// executable was planned for ([`Executable::threads`]; more is
    /// [`RunError::TooManyThreads`]). The pool's `threads - 1` workers are started now and
    /// parked between runs.
    pub fn with_threads(exe: Arc<Executable>, threads: usize) -> Result<Session, RunError> {
        let threads = threads.max(1);
        if threads > exe.threads() {
            return Err(RunError::TooManyThreads {
                asked: threads,
                planned: exe.threads(),
            });
        }
        let pool = if threads > 1 {
            Some(Pool::new(threads).map_err(|e| RunError::Threads {
                threads,
                reason: e.to_string(),
            })?)
        } else {
            None
        };
        let arena_bytes = exe.arena_bytes();
        let (inputs, outputs) = (exe.inputs().iter(), exe.outputs().iter());
        let aligned = inputs.map(|s| (s, ARENA_ALIGN));
        // An output may sit inside a Concat's buffer: aligned to its element size only.
        let elem = outputs.map(|s| (s, s.ty.dtype.size().max(1)));
        for (slot, align) in aligned.chain(elem) {
            let end = slot.stored_bytes().and_then(|b| b.checked_add(slot.offset));
            if end.is_none_or(|e| e > arena_bytes) || !slot.offset.is_multiple_of(align) {
                return Err(RunError::SlotOutOfBounds {
                    name: slot.name.clone(),
                    arena_bytes,
                });
            }
        }
        let size = arena_bytes.max(1);
        let layout = Layout::from_size_align(size, ARENA_ALIGN)
            .map_err(|_| RunError::ArenaAlloc { bytes: size })?;
        // SAFETY: `layout` has a non-zero size (at least 1).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let arena = NonNull::new(ptr).ok_or(RunError::ArenaAlloc { bytes: size })?;
        Ok(Session {
            exe,
            arena,
            layout,
            pool,
        })
    }

    /// Threads a run uses.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, Pool::threads)
    }

    /// The model's inputs (name, type, arena offset), in graph order.
    pub fn inputs(&self) -> &[IoSlot] {
        self.exe.inputs()
    }

    /// The model's outputs, in graph order.
    pub fn outputs(&self) -> &[IoSlot] {
        self.exe.outputs()
    }

    /// Bytes of the arena this session holds.
    pub fn arena_bytes(&self) -> usize {
        self.exe.arena_bytes()
    }

    /// Runs the model on named inputs: each must be a model input, given once, with its exact
    /// dtype and shape. Makes no heap allocation (unless it fails). On an input error nothing
    /// ran; on [`RunError::OutOfRange`] (an index out of range at run time) the run finished
    /// without valid outputs. Either way the session stays usable.
    pub fn run(&mut self, inputs: &[(&str, TensorRef<'_>)]) -> Result<Outputs<'_>, RunError> {
        validate_named(self.exe.inputs(), inputs)?;
        for (name, t) in inputs {
            if let Some(i) = self.exe.inputs().iter().position(|s| s.name == *name) {
                self.write(i, t.data);
            }
        }
        self.execute()
    }

    /// Runs the model on inputs given in the model's input order (see [`Session::run`]).
    pub fn run_positional(&mut self, inputs: &[TensorRef<'_>]) -> Result<Outputs<'_>, RunError> {
        validate_positional(self.exe.inputs(), inputs)?;
        for (i, t) in inputs.iter().enumerate() {
            self.write(i, t.data);
        }
        self.execute()
    }

    /// [`Session::run`], recording the run's node times into `profile` (made for this
    /// session's model, compiled with `CompileOptions::profile`). Makes no heap allocation. A
    /// full profile still runs the model and counts the run as dropped. On an error nothing
    /// ran and nothing was recorded.
    pub fn run_profiled(
        &mut self,
        inputs: &[(&str, TensorRef<'_>)],
        profile: &mut Profile,
    ) -> Result<Outputs<'_>, RunError> {
        if !Arc::ptr_eq(&profile.exe, &self.exe) {
            return Err(RunError::ProfileMismatch);
        }
        let start = profile.now();
        validate_named(self.exe.inputs(), inputs)?;
        for (name, t) in inputs {
            if let Some(i) = self.exe.inputs().iter().position(|s| s.name == *name) {
                self.write(i, t.data);
            }
        }
        let origin = profile.origin;
        let pool = self.pool.as_ref();
        let (recorded, ran) = match profile.next_slots() {
            Some(slots) => {
                let n = slots.len();
                if let Some(first) = slots.first_mut() {
                    *first = start;
                }
                let marks = slots.get_mut(1..n.saturating_sub(1)).unwrap_or_default();
                // SAFETY: as in `execute`: the arena is aligned, `arena_bytes` long,
                // exclusively borrowed and holds the inputs just written.
                let ran = unsafe {
                    self.exe
                        .run_profiled(self.arena.as_ptr(), pool, origin, marks)
                };
                (true, ran.map_err(fault_error))
            }
            None => {
                // SAFETY: as above.
                let ran = unsafe { self.exe.run_with(self.arena.as_ptr(), pool) };
                (false, ran.map_err(fault_error))
            }
        };
        if recorded {
            let end = profile.now();
            if let Some(last) = profile.next_slots().and_then(|s| s.last_mut()) {
                *last = end;
            }
        }
        profile.commit(recorded);
        ran?;
        Ok(self.output_views())
    }

    /// Writes input `i`'s data into its slot: copied, or rounded to 16 bits for an input
    /// stored narrowed ([`IoSlot::store`]; in place, no allocation).
    fn write(&mut self, i: usize, data: &[u8]) {
        let Some(slot) = self.exe.inputs().get(i) else {
            return;
        };
        // Checked at creation: every slot lies inside the arena.
        let len = slot.stored_bytes().unwrap_or(0);
        debug_assert!(slot.offset + len <= self.layout.size());
        // SAFETY: `slot.offset + len` is within the arena (slot bounds checked in
        // `with_threads`); the arena is our own allocation, exclusively borrowed through
        // `&mut self`, and cannot overlap `data`, whose borrow predates this call.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(self.arena.as_ptr().add(slot.offset), len) };
        slot.store(data, dst);
    }

    fn execute(&mut self) -> Result<Outputs<'_>, RunError> {
        // SAFETY: the arena is aligned to ARENA_ALIGN, valid for `arena_bytes` (at least) bytes,
        // exclusively borrowed through `&mut self`, and holds every input (validated and
        // copied by the caller).
        let ran = unsafe { self.exe.run_with(self.arena.as_ptr(), self.pool.as_ref()) };
        ran.map_err(fault_error)?;
        Ok(self.output_views())
    }

    fn output_views(&self) -> Outputs<'_> {
        // SAFETY: the arena is `layout.size()` initialized bytes (zeroed at creation, then
        // written only by us and the program); the shared borrow lives as long as `&self`.
        let arena = unsafe { std::slice::from_raw_parts(self.arena.as_ptr(), self.layout.size()) };
        Outputs {
            arena,
            slots: self.exe.outputs(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: `arena` was allocated by `alloc_zeroed` with exactly `layout` and is freed
        // only here.
        unsafe { std::alloc::dealloc(self.arena.as_ptr(), self.layout) };
    }
}

/// The outputs of one run: views into the session's arena, valid until the next run.
#[derive(Clone, Copy, Debug)]
pub struct Outputs<'s> {
    arena: &'s [u8],
    slots: &'s [IoSlot],
}

impl<'s> Outputs<'s> {
    /// Number of outputs.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the model has no outputs.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Output `i` in graph-output order.
    pub fn get(&self, i: usize) -> Option<TensorRef<'s>> {
        let slot = self.slots.get(i)?;
        let len = slot.ty.bytes()?;
        Some(TensorRef {
            dtype: slot.ty.dtype,
            shape: &slot.ty.shape,
            data: self.arena.get(slot.offset..slot.offset + len)?,
        })
    }

    /// The output named `name`.
    pub fn by_name(&self, name: &str) -> Option<TensorRef<'s>> {
        let i = self.slots.iter().position(|s| s.name == name)?;
        self.get(i)
    }

    /// Output names, in graph-output order.
    pub fn names(&self) -> impl Iterator<Item = &'s str> + 's {
        self.slots.iter().map(|s| s.name.as_str())
    }

    /// `(name, view)` for each output, in graph-output order.
    pub fn iter(&self) -> impl Iterator<Item = (&'s str, TensorRef<'s>)> + '_ {
        (0..self.len()).filter_map(|i| Some((self.slots[i].name.as_str(), self.get(i)?)))
    }
}
