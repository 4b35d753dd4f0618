//! The entry function's body: each [`Step`] of a block emitted as Cranelift IR (kernel calls
//! with `base + offset` addresses, row-split calls, `If` branches, counted loops).

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I8, I64};
use cranelift_codegen::ir::{BlockArg, FuncRef, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use cranelift_module::FuncId;

use super::{Operand, Step};

/// The entry function's two base addresses, and the row-split helper.
#[derive(Clone, Copy)]
pub(super) struct Bases {
    pub(super) arena: Value,
    pub(super) weights: Value,
    pub(super) par_rows: FuncId,
}

/// The address `a` stands for; `counters` are the enclosing loops' counters, outermost first.
fn address(b: &mut FunctionBuilder<'_>, a: Operand, bases: Bases, counters: &[Value]) -> Value {
    match a {
        Operand::Arena(o) => b.ins().iadd_imm_u(bases.arena, o as i64),
        Operand::Weights(o) => b.ins().iadd_imm_u(bases.weights, o as i64),
        Operand::Null => b.ins().iconst(I64, 0),
        Operand::Imm(v) => b.ins().iconst(I64, v as i64),
        Operand::Host(a) => b.ins().iconst(I64, a as i64),
        Operand::Indexed {
            weights,
            offset,
            step,
            level,
        } => {
            let base = if weights { bases.weights } else { bases.arena };
            let at = b.ins().iadd_imm_u(base, offset as i64);
            match counters.get(level) {
                Some(&i) => {
                    let by = b.ins().imul_imm_s(i, step as i64);
                    b.ins().iadd(at, by)
                }
                // Lowering only indexes by a loop it is inside of.
                None => at,
            }
        }
    }
}

/// Emits `steps` at the builder's current block; the builder ends in a block that follows
/// them.
pub(super) fn emit_steps(
    b: &mut FunctionBuilder<'_>,
    steps: &[Step],
    refs: &HashMap<FuncId, FuncRef>,
    bases: Bases,
    counters: &mut Vec<Value>,
) {
    for s in steps {
        match s {
            Step::Call(f, args) => {
                let vals: Vec<Value> = args
                    .iter()
                    .map(|&a| address(b, a, bases, counters))
                    .collect();
                if let Some(&r) = refs.get(f) {
                    b.ins().call(r, &vals);
                }
            }
            Step::Rows { desc, full, tail } => {
                if let (Some(&full), Some(&tail), Some(&par)) =
                    (refs.get(full), refs.get(tail), refs.get(&bases.par_rows))
                {
                    let d = b.ins().iadd_imm_u(bases.weights, *desc as i64);
                    let full = b.ins().func_addr(I64, full);
                    let tail = b.ins().func_addr(I64, tail);
                    b.ins()
                        .call(par, &[d, bases.arena, bases.weights, full, tail]);
                }
            }
            Step::Branch {
                cond,
                then,
                otherwise,
            } => {
                let p = address(b, *cond, bases, counters);
                let c = b.ins().load(I8, MemFlagsData::new().with_notrap(), p, 0);
                let (t, e, merge) = (b.create_block(), b.create_block(), b.create_block());
                b.ins().brif(c, t, &[], e, &[]);
                b.switch_to_block(t);
                emit_steps(b, then, refs, bases, counters);
                b.ins().jump(merge, &[]);
                b.switch_to_block(e);
                emit_steps(b, otherwise, refs, bases, counters);
                b.ins().jump(merge, &[]);
                b.switch_to_block(merge);
            }
            Step::Loop { spec, body } => {
                let (header, run, exit) = (b.create_block(), b.create_block(), b.create_block());
                b.append_block_param(header, I64);
                let zero = b.ins().iconst(I64, 0);
                b.ins().jump(header, &[BlockArg::Value(zero)]);
                b.switch_to_block(header);
                let i = b.block_params(header)[0];
                let more = b
                    .ins()
                    .icmp_imm_u(IntCC::UnsignedLessThan, i, spec.trips as i64);
                match spec.cond {
                    Some(cond) => {
                        let check = b.create_block();
                        b.ins().brif(more, check, &[], exit, &[]);
                        b.switch_to_block(check);
                        let p = address(b, cond, bases, counters);
                        let c = b.ins().load(I8, MemFlagsData::new().with_notrap(), p, 0);
                        b.ins().brif(c, run, &[], exit, &[]);
                    }
                    None => {
                        b.ins().brif(more, run, &[], exit, &[]);
                    }
                }
                b.switch_to_block(run);
                if let Some(iter) = spec.iter {
                    let p = address(b, iter, bases, counters);
                    b.ins().store(MemFlagsData::new().with_notrap(), i, p, 0);
                }
                counters.push(i);
                emit_steps(b, body, refs, bases, counters);
                counters.pop();
                let next = b.ins().iadd_imm_s(i, 1);
                b.ins().jump(header, &[BlockArg::Value(next)]);
                b.switch_to_block(exit);
            }
        }
    }
}
