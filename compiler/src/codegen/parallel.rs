//! Machine code for a program's functions, generated on several threads: each function's IR
//! is built on the lowering thread (it needs the module to declare what it calls), then
//! compiled by Cranelift (the expensive part: optimization, register allocation, emission)
//! on up to `threads` threads, each with its own [`Context`], and finally defined in the
//! module from the bytes, in the order the functions were declared.
//!
//! The result does not depend on the thread count: each function is compiled alone from the
//! same IR with the same ISA, so its bytes are the same whichever thread compiles it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::TargetIsa;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module, ModuleReloc};

use crate::error::{Error, OpError};

/// A function whose IR is built and which waits for its machine code.
pub(super) struct Pending {
    pub id: FuncId,
    pub func: Function,
    /// The node and op named when its compilation fails.
    pub node: String,
    pub op: String,
    /// The entry function (compiled for the entry's ISA).
    pub entry: bool,
}

/// One function's machine code, ready to be defined in the module.
struct Compiled {
    alignment: u64,
    bytes: Vec<u8>,
    relocs: Vec<ModuleReloc>,
}

/// Compiles one function (on any thread).
fn compile_one(isa: &dyn TargetIsa, p: &Pending, ctx: &mut Context) -> Result<Compiled, Error> {
    ctx.clear();
    ctx.func = p.func.clone();
    let fail = |what: String| Error::Node {
        node: p.node.clone(),
        op: p.op.clone(),
        source: OpError::Unsupported(format!("code generation failed: {what}")),
    };
    ctx.compile(isa, &mut ControlPlane::default())
        .map_err(|e| fail(format!("{:?}", e.inner)))?;
    let code = ctx
        .compiled_code()
        .ok_or_else(|| fail("no machine code".into()))?;
    let relocs = code
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, p.id))
        .collect();
    Ok(Compiled {
        alignment: u64::from(code.buffer.alignment),
        bytes: code.code_buffer().to_vec(),
        relocs,
    })
}

/// Compiles `pending` (kernels for the module's ISA, the entry for `entry_isa`) on up to
/// `threads` threads (the calling one included) and defines each
/// function in `module`. The largest functions are started first, so that one long function
/// does not finish alone at the end. The first error (in declaration order) is returned.
pub(super) fn compile_and_define(
    module: &mut JITModule,
    entry_isa: &dyn TargetIsa,
    pending: Vec<Pending>,
    threads: usize,
) -> Result<(), Error> {
    if pending.is_empty() {
        return Ok(());
    }
    let mut order: Vec<usize> = (0..pending.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(pending[i].func.dfg.num_insts()));
    let results: Vec<Mutex<Option<Result<Compiled, Error>>>> =
        pending.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let isa = module.isa();
    let work = || {
        let mut ctx = Context::new();
        loop {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(n) else { break };
            let p = &pending[i];
            let out = compile_one(if p.entry { entry_isa } else { isa }, p, &mut ctx);
            if let Ok(mut slot) = results[i].lock() {
                *slot = Some(out);
            }
        }
    };
    let threads = threads.clamp(1, pending.len());
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    for (p, slot) in pending.iter().zip(results) {
        let compiled = slot
            .into_inner()
            .ok()
            .flatten()
            .ok_or_else(|| super::program::program_error("a compiler thread panicked"))??;
        module
            .define_function_bytes(p.id, compiled.alignment, &compiled.bytes, &compiled.relocs)
            .map_err(|e| Error::Node {
                node: p.node.clone(),
                op: p.op.clone(),
                source: OpError::Unsupported(format!("code generation failed: {e}")),
            })?;
    }
    Ok(())
}
