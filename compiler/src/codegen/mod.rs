//! Code generation: the whole model becomes one JIT-compiled program (Cranelift) — a
//! straight-line sequence of kernel calls whose tensor addresses are the arena base plus
//! constant offsets from the plan, and the weights base plus constant offsets.
//!
//! (Interface only; the Cranelift implementation is being written. `compile` reports every
//! model as unsupported until then.)

use crate::arena::ArenaPlan;
use crate::error::{Error, OpError};
use crate::ir::graph::Graph;
use crate::ir::types::TensorType;

/// Alignment of the arena base and of every tensor in the weights region.
pub const ARENA_ALIGN: usize = 64;

/// Where a graph input or output lives in the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoSlot {
    /// Value name in the model.
    pub name: String,
    /// Dtype and static shape.
    pub ty: TensorType,
    /// Byte offset in the arena (a multiple of [`ARENA_ALIGN`]).
    pub offset: usize,
}

/// A compiled model: JIT code plus its read-only weights region. Owns its JIT module; code
/// memory is released when it is dropped.
pub struct Executable {
    arena_bytes: usize,
    inputs: Vec<IoSlot>,
    outputs: Vec<IoSlot>,
}

impl std::fmt::Debug for Executable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executable")
            .field("arena_bytes", &self.arena_bytes)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish()
    }
}

impl Executable {
    /// Bytes of arena a run needs (the plan's arena).
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// Graph inputs, in graph order: the caller writes each at its offset before [`Executable::run`].
    pub fn inputs(&self) -> &[IoSlot] {
        &self.inputs
    }

    /// Graph outputs, in graph order: valid at their offsets after [`Executable::run`].
    pub fn outputs(&self) -> &[IoSlot] {
        &self.outputs
    }

    /// Runs the program once. Allocates nothing.
    ///
    /// # Safety
    /// `arena` must be aligned to [`ARENA_ALIGN`], valid for reads and writes of
    /// [`Executable::arena_bytes`] bytes, not accessed by anything else during the call, and
    /// hold every input at its slot.
    pub unsafe fn run(&self, arena: *mut u8) {
        let _ = arena;
    }
}

/// Compiles `g` with its arena plan into an [`Executable`]. An op without a kernel is an
/// [`Error::Node`] naming the node and op.
pub fn compile(g: &Graph, plan: &ArenaPlan) -> Result<Executable, Error> {
    let _ = plan;
    match g.nodes().next() {
        Some((_, n)) => Err(Error::Node {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            source: OpError::Unsupported("no kernel yet".into()),
        }),
        None => Err(Error::InvalidModel("nothing to compile".into())),
    }
}
