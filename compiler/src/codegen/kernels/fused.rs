//! The kernel of a fused element-wise node: one loop nest over the output (the [`EwDesc`]
//! loops: f32x4 lanes with a scalar tail, broadcast inputs splatted), whose body runs the
//! whole step program on values in registers; only the inputs are loaded and only the last
//! step is stored.

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

use super::Math;
use super::elementwise::{Ew, EwDesc};

/// An operand of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FArg {
    /// The kernel's input at this position.
    In(usize),
    /// An earlier step's result.
    Step(usize),
    /// A constant.
    K(f32),
}

/// One fused kernel: the steps (each an [`Ew`] over its operands; the last is the output)
/// and the loop nest over the output with each input's strides.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedDesc {
    /// The steps in order.
    pub steps: Vec<(Ew, Vec<FArg>)>,
    /// The loops (its `op` is unused).
    pub loops: EwDesc,
}

impl FusedDesc {
    /// Builds the descriptor for inputs of `in_shapes` broadcast to `out`. Fails (naming the
    /// step) when a step has the wrong number of operands or reads an input or step that does
    /// not exist before it, or when there are no steps.
    pub fn new(
        steps: Vec<(Ew, Vec<FArg>)>,
        in_shapes: &[&[usize]],
        out: &[usize],
    ) -> Result<FusedDesc, String> {
        if steps.is_empty() {
            return Err("a fused program without steps".into());
        }
        for (k, (e, args)) in steps.iter().enumerate() {
            if args.len() != e.arity() {
                return Err(format!(
                    "fused step {k} ({e:?}) has {} operands, not {}",
                    args.len(),
                    e.arity()
                ));
            }
            for a in args {
                let ok = match *a {
                    FArg::In(i) => i < in_shapes.len(),
                    FArg::Step(j) => j < k,
                    FArg::K(_) => true,
                };
                if !ok {
                    return Err(format!("fused step {k} reads {a:?}, which does not exist"));
                }
            }
        }
        Ok(FusedDesc {
            steps,
            loops: EwDesc::new(Ew::Copy, in_shapes, out),
        })
    }

    /// Emits the body: `ptrs` are the inputs then the output.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, ptrs: &[Value]) {
        self.loops.emit_with(b, ptrs, &|m, b, x| self.body(m, b, x));
    }

    /// The program on one lane group; `new` checked every index, so the lookups hit.
    fn body(&self, m: Math, b: &mut FunctionBuilder<'_>, x: &[Value]) -> Value {
        let mut t: Vec<Value> = Vec::with_capacity(self.steps.len());
        for (e, args) in &self.steps {
            let vals: Vec<Value> = args
                .iter()
                .map(|a| match *a {
                    FArg::In(i) => x[i],
                    FArg::Step(j) => t[j],
                    FArg::K(k) => m.c(b, k),
                })
                .collect();
            let y = e.apply(m, b, &vals);
            t.push(y);
        }
        t[t.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_programs() {
        let s: &[usize] = &[4];
        assert!(FusedDesc::new(vec![], &[s], s).is_err());
        assert!(FusedDesc::new(vec![(Ew::Add, vec![FArg::In(0)])], &[s], s).is_err());
        assert!(FusedDesc::new(vec![(Ew::Neg, vec![FArg::In(1)])], &[s], s).is_err());
        assert!(FusedDesc::new(vec![(Ew::Neg, vec![FArg::Step(0)])], &[s], s).is_err());
        let ok = vec![
            (Ew::Sigmoid, vec![FArg::In(0)]),
            (Ew::Mul, vec![FArg::In(0), FArg::Step(0)]),
        ];
        assert!(FusedDesc::new(ok, &[s], s).is_ok());
    }
}
