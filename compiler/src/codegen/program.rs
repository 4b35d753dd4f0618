//! The JIT module of one executable: kernels (Cranelift functions of pointer parameters,
//! cached by a key of op, types and attributes) and the entry function
//! `extern "C" fn(arena: *mut u8, weights: *const u8, sink: *mut MarkSink)` that calls them in
//! schedule order with addresses `base + constant offset`. `sink` is read only by the
//! profiling marks ([`Program::mark`]); a program without marks ignores it.
//!
//! The entry function is a tree of [`Step`]s: kernel calls, row-split calls, and the control
//! flow of `If` nodes (a branch on a bool byte in the arena between two blocks of steps) and
//! loops (a counted loop over a block, optionally stopped by a bool byte, optionally storing
//! its counter in the arena; [`Operand::Indexed`] addresses move with a loop's counter).
//! Lowering builds a nested block with [`Program::open`] ... [`Program::close`] and hands it
//! to [`Program::branch`] or [`Program::repeat`]. Profiling marks sit between the steps of
//! the outermost block only (a node with control flow is one step there).

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

use cranelift_codegen::ir::types::{F32, I32, I64};
use cranelift_codegen::ir::{
    AbiParam, FuncRef, Function, InstBuilder, Signature, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{Context, isa::CallConv};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, default_libcall_names};

mod entry;

use super::fault::CheckedNode;
use super::parallel::{Pending, compile_and_define};
use crate::error::{Error, OpError};
use entry::{Bases, emit_steps};

/// `ln(x)` for the generated code (one call per Softmax line, never per element).
pub extern "C" fn arenac_logf(x: f32) -> f32 {
    x.ln()
}

/// A JIT module whose code memory is released when it is dropped — cranelift-jit's own drop
/// leaks it — unless [`OwnedModule::into_inner`] hands the module over (to an `Executable`,
/// whose drop frees it). A compilation that fails half way therefore leaks nothing.
struct OwnedModule(ManuallyDrop<JITModule>);

impl OwnedModule {
    fn into_inner(self) -> JITModule {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the module is moved out of it exactly once.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl Drop for OwnedModule {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, so the module is taken once. No address of its code has
        // left the `Program` (only `finish` returns one, after `into_inner`), so nothing can
        // call into the memory freed here.
        unsafe { ManuallyDrop::take(&mut self.0).free_memory() };
    }
}

impl Deref for OwnedModule {
    type Target = JITModule;
    fn deref(&self) -> &JITModule {
        &self.0
    }
}

impl DerefMut for OwnedModule {
    fn deref_mut(&mut self) -> &mut JITModule {
        &mut self.0
    }
}

/// An address the entry function passes to a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// Arena base + byte offset.
    Arena(usize),
    /// Weights base + byte offset.
    Weights(usize),
    /// A null pointer (an absent scratch).
    Null,
    /// An integer passed as is (a checking kernel's node tag, see [`super::fault`]).
    Imm(u64),
    /// An absolute address: a compile-time object the executable owns ([`Program::keep`]).
    Host(usize),
    /// `offset + i * step` bytes from the arena base (or the weights base when `weights`),
    /// where `i` is the counter of the enclosing loop number `level` (0 = outermost): the
    /// slice of a scan input or output that iteration `i` reads or writes.
    Indexed {
        /// From the weights base instead of the arena base.
        weights: bool,
        /// Address at iteration 0.
        offset: usize,
        /// Bytes added per iteration (negative for a reversed scan).
        step: isize,
        /// Which enclosing loop's counter.
        level: usize,
    },
}

/// One step of the entry function.
#[derive(Clone, Debug)]
enum Step {
    /// A kernel called with these operands.
    Call(FuncId, Vec<Operand>),
    /// A row-split call ([`super::rows`]): `arenac_par_rows(weights + desc, arena, weights,
    /// full, tail)`.
    Rows {
        /// Weights offset of the [`super::rows::RowsDesc`].
        desc: usize,
        /// The kernel for a whole chunk of rows.
        full: FuncId,
        /// The kernel for the last chunk.
        tail: FuncId,
    },
    /// `if byte at cond != 0 { then } else { otherwise }`.
    Branch {
        cond: Operand,
        then: Vec<Step>,
        otherwise: Vec<Step>,
    },
    /// `for i in 0..trips { if byte at cond == 0 { break } store i at iter; body }`.
    Loop { spec: LoopSpec, body: Vec<Step> },
}

/// A counted loop of the entry function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopSpec {
    /// Most iterations.
    pub trips: usize,
    /// Where each iteration first stores its counter (an i64), if anywhere.
    pub iter: Option<Operand>,
    /// A bool byte checked before each iteration: the loop stops when it is 0.
    pub cond: Option<Operand>,
}

/// A block of steps built between [`Program::open`] and [`Program::close`].
#[derive(Debug, Default)]
pub struct Block(Vec<Step>);

/// A compile-time object the generated code points to (an FFT kernel with its plan): owned by
/// the program, then by the executable, so it outlives every run. Immutable once made, hence
/// shareable between threads running the executable at once.
pub type HostObject = Box<dyn std::any::Any + Send + Sync>;

/// Function references of the Rust helpers, declared in the kernel being built.
pub struct Externs {
    /// `arenac_sgemm`.
    pub sgemm: FuncRef,
    /// `arenac_sgemm_lowp` (B stored in a reduced type).
    pub sgemm_lowp: FuncRef,
    /// `arenac_pack_b`.
    pub pack_b: FuncRef,
    /// `arenac_logf`.
    pub logf: FuncRef,
    /// `arenac_conv2d`.
    pub conv2d: FuncRef,
    /// `arenac_pool2d`.
    pub pool2d: FuncRef,
    /// `arenac_dft`.
    pub dft: FuncRef,
    /// `arenac_mel`.
    pub mel: FuncRef,
    /// `arenac_host` (a precompiled Rust kernel, `super::host`).
    pub host: FuncRef,
}

/// A program-level failure (ISA, symbols, finalization) as an error.
pub(crate) fn program_error(what: impl std::fmt::Display) -> Error {
    Error::Node {
        node: "<program>".into(),
        op: "codegen".into(),
        source: OpError::Unsupported(format!("code generation failed: {what}")),
    }
}

/// The extern helpers: name, address, parameter types, return type.
type ExternDef = (
    &'static str,
    *const u8,
    &'static [cranelift_codegen::ir::Type],
    Option<cranelift_codegen::ir::Type>,
);

fn extern_defs() -> [ExternDef; 11] {
    [
        (
            "arenac_sgemm",
            crate::gemm::arenac_sgemm as *const u8,
            &[I64, I64, I64, I64, I64, I64, I64, I64, I32, I64, I64],
            None,
        ),
        (
            "arenac_sgemm_lowp",
            crate::gemm::lowp::arenac_sgemm_lowp as *const u8,
            &[I64, I64, I64, I64, I64, I64, I64, I64, I32, I64, I64, I64],
            None,
        ),
        (
            "arenac_pack_b",
            crate::gemm::arenac_pack_b as *const u8,
            &[I64, I64, I64, I64, I64, I64],
            None,
        ),
        ("arenac_logf", arenac_logf as *const u8, &[F32], Some(F32)),
        (
            "arenac_conv2d",
            crate::gemm::conv::arenac_conv2d as *const u8,
            &[I64, I64, I64, I64, I64, I64],
            None,
        ),
        (
            "arenac_pool2d",
            crate::gemm::pool::arenac_pool2d as *const u8,
            &[I64, I64, I64],
            None,
        ),
        (
            "arenac_par_rows",
            super::rows::arenac_par_rows as *const u8,
            &[I64, I64, I64, I64, I64],
            None,
        ),
        (
            "arenac_dft",
            crate::fft::arenac_dft as *const u8,
            &[I64, I64, I64, I64, I64],
            None,
        ),
        (
            "arenac_mel",
            crate::fft::arenac_mel as *const u8,
            &[I64, I64, I64, I64, I64],
            None,
        ),
        (
            "arenac_host",
            super::host::arenac_host as *const u8,
            &[I64, I64, I64, I64, I64, I64, I64, I64, I64],
            None,
        ),
        (
            "arenac_profile_mark",
            super::profile::arenac_profile_mark as *const u8,
            &[I64, I64],
            None,
        ),
    ]
}

/// Builds the kernels and the entry function.
pub struct Program {
    module: OwnedModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
    cache: HashMap<String, FuncId>,
    externs: Vec<(&'static str, FuncId)>,
    registered: Vec<&'static str>,
    /// The entry's steps (first) and the blocks being built inside it.
    blocks: Vec<Vec<Step>>,
    /// Nodes whose kernels check run-time values, in tag order (tag = position + 1).
    checked: Vec<CheckedNode>,
    /// Arena offset of the fault record, used once a node checks.
    fault_offset: usize,
    host: Vec<HostObject>,
    /// Profiling marks: `(position in the entry's own steps, mark index)`, positions
    /// non-decreasing.
    marks: Vec<(usize, u64)>,
    /// Kernels compiled (cache misses).
    pub kernels_compiled: usize,
    /// Kernels whose IR is built, compiled to machine code together in [`Program::finish`].
    pending: Vec<Pending>,
    /// Threads [`Program::finish`] compiles them on.
    compile_threads: usize,
    /// The ISA the entry function is compiled for.
    entry_isa: cranelift_codegen::isa::OwnedTargetIsa,
}

/// The host CPU's ISA (its AVX/FMA flags), not PIC, with `extra` flags. The IR verifier runs in
/// debug builds only (the tests' builds): in release it was a third of Cranelift's time
/// (EfficientNet-B0), checking IR that the debug builds already checked.
fn host_isa(extra: &[(&str, &str)]) -> Result<cranelift_codegen::isa::OwnedTargetIsa, Error> {
    let mut flags = settings::builder();
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    for &(k, v) in [
        ("opt_level", "speed"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        ("enable_verifier", verify),
    ]
    .iter()
    .chain(extra)
    {
        flags.set(k, v).map_err(program_error)?;
    }
    cranelift_native::builder()
        .map_err(program_error)?
        .finish(settings::Flags::new(flags))
        .map_err(program_error)
}

impl Program {
    /// A fresh module for the host CPU ([`host_isa`]): kernels at `opt_level=speed`, the entry
    /// function at `opt_level=none` with the single-pass register allocator.
    pub fn new() -> Result<Program, Error> {
        let isa = host_isa(&[("opt_level", "speed")])?;
        // The entry is straight-line calls with constant arguments: nothing to optimize, and
        // the single-pass register allocator halves its compile time (EfficientNet-B0's entry,
        // 1627 instructions: ~1.8 -> ~0.8 ms) at no measurable run-time cost.
        let entry_isa = host_isa(&[("opt_level", "none"), ("regalloc_algorithm", "single_pass")])?;
        let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
        let mut registered = Vec::new();
        for (name, addr, _, _) in extern_defs() {
            jb.symbol(name, addr);
            registered.push(name);
        }
        let mut module = JITModule::new(jb);
        let mut externs = Vec::new();
        for (name, _, params, ret) in extern_defs() {
            let mut sig = module.make_signature();
            sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
            sig.returns.extend(ret.map(AbiParam::new));
            let id = module
                .declare_function(name, Linkage::Import, &sig)
                .map_err(program_error)?;
            externs.push((name, id));
        }
        Ok(Program {
            entry_isa,
            ctx: module.make_context(),
            module: OwnedModule(ManuallyDrop::new(module)),
            fctx: FunctionBuilderContext::new(),
            cache: HashMap::new(),
            externs,
            registered,
            blocks: vec![Vec::new()],
            checked: Vec::new(),
            fault_offset: 0,
            host: Vec::new(),
            marks: Vec::new(),
            kernels_compiled: 0,
            pending: Vec::new(),
            compile_threads: 1,
        })
    }

    /// Compiles the kernels on up to `threads` threads (default one) in [`Program::finish`].
    pub fn set_compile_threads(&mut self, threads: usize) {
        self.compile_threads = threads.max(1);
    }

    /// Sets where the fault record goes: a 64-aligned arena offset past every planned buffer.
    pub fn set_fault_offset(&mut self, offset: usize) {
        self.fault_offset = offset;
    }

    /// Registers node `node` (op `op`) as checking `what` at run time, and returns the two
    /// extra operands its kernel takes, after its others: the fault record's address and the
    /// node's tag (see [`super::fault`]).
    pub fn fault_sink(&mut self, node: &str, op: &str, what: &'static str) -> [Operand; 2] {
        self.sink(CheckedNode {
            node: node.to_string(),
            op: op.to_string(),
            what,
            detail: None,
        })
    }

    /// Like [`Program::fault_sink`], for a kernel that only faults, with `detail` as the
    /// whole message (see [`CheckedNode::detail`]).
    pub fn trap_sink(&mut self, node: &str, op: &str, detail: String) -> [Operand; 2] {
        self.sink(CheckedNode {
            node: node.to_string(),
            op: op.to_string(),
            what: "branch",
            detail: Some(detail),
        })
    }

    fn sink(&mut self, entry: CheckedNode) -> [Operand; 2] {
        self.checked.push(entry);
        [
            Operand::Arena(self.fault_offset),
            Operand::Imm(self.checked.len() as u64),
        ]
    }

    /// The checked nodes registered so far, in tag order; with the record's offset.
    pub fn take_checked(&mut self) -> (usize, Vec<CheckedNode>) {
        (self.fault_offset, std::mem::take(&mut self.checked))
    }

    fn ptr_sig(&self, n: usize) -> Signature {
        let mut sig = Signature::new(CallConv::SystemV);
        sig.call_conv = self.module.isa().default_call_conv();
        sig.params.extend((0..n).map(|_| AbiParam::new(I64)));
        sig
    }

    fn extern_id(&self, name: &str) -> Result<FuncId, Error> {
        self.externs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, id)| id)
            .ok_or_else(|| program_error(format!("helper {name} is not declared")))
    }

    /// The kernel for `key` taking `n_ptrs` pointers, compiled by `emit` on a cache miss.
    /// `node`/`op` name the failure.
    pub fn kernel(
        &mut self,
        key: String,
        n_ptrs: usize,
        (node, op): (&str, &str),
        emit: impl FnOnce(&mut FunctionBuilder<'_>, &[Value], &Externs),
    ) -> Result<FuncId, Error> {
        if let Some(&id) = self.cache.get(&key) {
            return Ok(id);
        }
        let fail = |e: String| Error::Node {
            node: node.to_string(),
            op: op.to_string(),
            source: OpError::Unsupported(format!("code generation failed: {e}")),
        };
        let sig = self.ptr_sig(n_ptrs);
        let name = format!("k{}", self.cache.len());
        let id = self
            .module
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| fail(e.to_string()))?;
        self.ctx.clear();
        self.ctx.func.signature = sig;
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        let sgemm_lowp = self.extern_id("arenac_sgemm_lowp")?;
        let (sgemm, pack_b, logf, conv2d, pool2d, dft, mel, host) = (
            self.extern_id("arenac_sgemm")?,
            self.extern_id("arenac_pack_b")?,
            self.extern_id("arenac_logf")?,
            self.extern_id("arenac_conv2d")?,
            self.extern_id("arenac_pool2d")?,
            self.extern_id("arenac_dft")?,
            self.extern_id("arenac_mel")?,
            self.extern_id("arenac_host")?,
        );
        let ext = Externs {
            sgemm: self.module.declare_func_in_func(sgemm, &mut self.ctx.func),
            sgemm_lowp: self
                .module
                .declare_func_in_func(sgemm_lowp, &mut self.ctx.func),
            pack_b: self.module.declare_func_in_func(pack_b, &mut self.ctx.func),
            logf: self.module.declare_func_in_func(logf, &mut self.ctx.func),
            conv2d: self.module.declare_func_in_func(conv2d, &mut self.ctx.func),
            pool2d: self.module.declare_func_in_func(pool2d, &mut self.ctx.func),
            dft: self.module.declare_func_in_func(dft, &mut self.ctx.func),
            mel: self.module.declare_func_in_func(mel, &mut self.ctx.func),
            host: self.module.declare_func_in_func(host, &mut self.ctx.func),
        };
        {
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let params = b.block_params(entry).to_vec();
            emit(&mut b, &params, &ext);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(self.module.isa().frontend_config());
        }
        // Compiled to machine code with the others in `finish` (on several threads).
        self.pending.push(Pending {
            id,
            func: std::mem::replace(&mut self.ctx.func, Function::new()),
            node: node.to_string(),
            op: op.to_string(),
            entry: false,
        });
        self.cache.insert(key, id);
        self.kernels_compiled += 1;
        Ok(id)
    }

    /// Keeps `obj` for the executable's lifetime; returns its address for [`Operand::Host`]
    /// (stable: the box's contents never move).
    pub fn keep<T: std::any::Any + Send + Sync>(&mut self, obj: Box<T>) -> Operand {
        let addr = std::ptr::from_ref::<T>(&obj) as usize;
        self.host.push(obj);
        Operand::Host(addr)
    }

    /// Appends a call of `f` with `args` to the block being built (the entry function's own
    /// steps when no block is open).
    pub fn call(&mut self, f: FuncId, args: Vec<Operand>) {
        self.push(Step::Call(f, args));
    }

    /// Appends a row-split call ([`super::rows::arenac_par_rows`]) of the descriptor at
    /// weights offset `desc` with kernels `full` and `tail`.
    pub fn call_rows(&mut self, desc: usize, full: FuncId, tail: FuncId) {
        self.push(Step::Rows { desc, full, tail });
    }

    fn push(&mut self, step: Step) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(step);
        }
    }

    /// Starts a nested block: the following calls go into it until [`Program::close`].
    pub fn open(&mut self) {
        self.blocks.push(Vec::new());
    }

    /// Ends the block started by the matching [`Program::open`] and returns it.
    pub fn close(&mut self) -> Block {
        if self.blocks.len() > 1 {
            Block(self.blocks.pop().unwrap_or_default())
        } else {
            Block::default()
        }
    }

    /// Appends `if byte at cond != 0 { then } else { otherwise }`.
    pub fn branch(&mut self, cond: Operand, then: Block, otherwise: Block) {
        self.push(Step::Branch {
            cond,
            then: then.0,
            otherwise: otherwise.0,
        });
    }

    /// Appends the loop `spec` over `body` (whose [`Operand::Indexed`] operands of this loop's
    /// level move with its counter).
    pub fn repeat(&mut self, spec: LoopSpec, body: Block) {
        self.push(Step::Loop { spec, body: body.0 });
    }

    /// Steps in the entry function's own block so far (the position the next one takes).
    pub fn call_count(&self) -> usize {
        self.blocks.first().map_or(0, Vec::len)
    }

    /// Puts a call of the profiling hook `arenac_profile_mark(sink, index)` before the call at
    /// `position` (after the last call when `position` is [`Program::call_count`]). Marks must
    /// be added in order of position.
    pub fn mark(&mut self, position: usize, index: u64) {
        self.marks.push((position, index));
    }

    /// Builds the entry function `fn(arena, weights, profile sink)`, checks every imported
    /// symbol is registered, finalizes; returns the module, the entry address, the objects
    /// the code points to and the calls in the entry's IR.
    pub fn finish(mut self) -> Result<(JITModule, *const u8, Vec<HostObject>, EntryCalls), Error> {
        let sig = self.ptr_sig(3);
        let id = self
            .module
            .declare_function("arenac_entry", Linkage::Local, &sig)
            .map_err(program_error)?;
        self.ctx.clear();
        self.ctx.func.signature = sig;
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        let par_rows = self.extern_id("arenac_par_rows")?;
        let hook = if self.marks.is_empty() {
            None
        } else {
            let id = self.extern_id("arenac_profile_mark")?;
            Some(self.module.declare_func_in_func(id, &mut self.ctx.func))
        };
        {
            let steps = self.blocks.first().map(Vec::as_slice).unwrap_or_default();
            let mut funcs = vec![par_rows];
            called(steps, &mut funcs);
            let mut refs: HashMap<FuncId, FuncRef> = HashMap::new();
            for f in funcs {
                if let std::collections::hash_map::Entry::Vacant(e) = refs.entry(f) {
                    e.insert(self.module.declare_func_in_func(f, &mut self.ctx.func));
                }
            }
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let params = b.block_params(entry).to_vec();
            let bases = Bases {
                arena: params[0],
                weights: params[1],
                par_rows,
            };
            let sink = params[2];
            let mut marks = self.marks.iter().peekable();
            let mut mark_until = |b: &mut FunctionBuilder<'_>, pos: usize| {
                while let Some(&&(at, index)) = marks.peek() {
                    if at > pos {
                        break;
                    }
                    marks.next();
                    if let Some(hook) = hook {
                        let i = b.ins().iconst(I64, index as i64);
                        b.ins().call(hook, &[sink, i]);
                    }
                }
            };
            for (pos, step) in steps.iter().enumerate() {
                mark_until(&mut b, pos);
                emit_steps(
                    &mut b,
                    std::slice::from_ref(step),
                    &refs,
                    bases,
                    &mut Vec::new(),
                );
            }
            mark_until(&mut b, usize::MAX);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(self.module.isa().frontend_config());
        }
        let entry_calls = EntryCalls {
            all: count_calls(&self.ctx.func, None),
            hook: hook.map_or(0, |h| count_calls(&self.ctx.func, Some(h))),
        };
        let mut pending = std::mem::take(&mut self.pending);
        pending.push(Pending {
            id,
            func: std::mem::replace(&mut self.ctx.func, Function::new()),
            node: "<program>".into(),
            op: "codegen".into(),
            entry: true,
        });
        compile_and_define(
            &mut self.module,
            &*self.entry_isa,
            pending,
            self.compile_threads,
        )?;
        for (name, _) in &self.externs {
            if !self.registered.contains(name) {
                return Err(program_error(format!("symbol {name} is not registered")));
            }
        }
        self.module.finalize_definitions().map_err(program_error)?;
        let entry = self.module.get_finalized_function(id);
        let host = std::mem::take(&mut self.host);
        Ok((self.module.into_inner(), entry, host, entry_calls))
    }
}

/// Call instructions in the entry function, counted in its IR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryCalls {
    /// Every call (kernels and hooks).
    pub all: usize,
    /// Calls of the profiling hook `arenac_profile_mark`.
    pub hook: usize,
}

/// Calls in `func`'s instructions: all of them, or those of `target`.
fn count_calls(func: &cranelift_codegen::ir::Function, target: Option<FuncRef>) -> usize {
    use cranelift_codegen::ir::InstructionData;
    func.layout
        .blocks()
        .flat_map(|b| func.layout.block_insts(b))
        .filter(|&inst| match func.dfg.insts[inst] {
            InstructionData::Call { func_ref, .. } => target.is_none_or(|t| t == func_ref),
            _ => false,
        })
        .count()
}

/// Every kernel `steps` call, in order (repeats included).
fn called(steps: &[Step], out: &mut Vec<FuncId>) {
    for s in steps {
        match s {
            Step::Call(f, _) => out.push(*f),
            Step::Rows { full, tail, .. } => out.extend([*full, *tail]),
            Step::Branch {
                then, otherwise, ..
            } => {
                called(then, out);
                called(otherwise, out);
            }
            Step::Loop { body, .. } => called(body, out),
        }
    }
}
