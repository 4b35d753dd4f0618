//! Slices and ranges whose bounds move at run time by a known length: `x[i : i + k]` and
//! `Range(i, i + k, s)`, where `i` is known only at run time (typically a loop's iteration
//! number, or a counter the loop carries) but `k` is a constant.
//!
//! The importer tracks values that are a run-time *base* (a one-element int64 value) plus
//! constants, element by element ([`Affine`]): the base itself, `Add`/`Sub` with a constant,
//! views (Unsqueeze, Squeeze, Reshape, Identity, Flatten), `Concat` with constants or other
//! values of the same base, `Cast` to int64 or to a float type and back (Paddle exports count
//! in float: `Cast(Cast(i, float) + 1.0, int64)`; exact while the values stay below 2^24,
//! which the contract below implies), and `Min` with a constant (`min(i + 1, n)`, kept as a
//! capped element). A `Slice` whose starts and ends are not constants but, axis by axis,
//! either both constants or both the same base plus constants (an end capped at or past the
//! axis's length counts as uncapped: `Slice` clamps it there anyway), has a static shape: it
//! becomes a `Slice` over the constant axes, then per moving axis a `Gather` of the indices
//! `base + start + j * step` (`j < length`). An int64 `Range` whose start and limit are the
//! same base plus constants becomes `base + [start, start + step, ...]`; a capped limit is
//! assumed not to bind, which a one-element `Gather` checks at run time (the run faults,
//! naming `<node>/limit-check`, when it would).
//!
//! Contract: the slice must stay inside the tensor at run time (ONNX would then shorten it,
//! which a static shape cannot do); within it, negative starts count from the back as in
//! `Slice`.

use std::collections::HashMap;

use arenac_proto::NodeProto;
use arenac_proto::attribute_proto::AttributeType;

use super::Importer;
use crate::error::Result;
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;
use crate::ops::{Op, SliceAxis};

/// One element of a tracked value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Elem {
    /// A constant.
    Const(i64),
    /// The base plus a constant.
    Base(i64),
    /// `min(base + c, cap)`: the base plus a constant `c`, capped at a constant.
    Capped(i64, i64),
}

/// An int64 value whose elements are constants or one run-time base plus constants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Affine {
    /// A one-element int64 value known only at run time.
    base: ValueId,
    /// The elements, flattened.
    elems: Vec<Elem>,
}

/// The tracked form of `v`: recorded, a one-element non-constant int64 value (its own base),
/// or a constant (all `Const`, with no base: `None` base is returned as `v`'s own id).
fn form(
    g: &Graph,
    known: &HashMap<ValueId, Affine>,
    v: ValueId,
) -> Option<(Option<ValueId>, Vec<Elem>)> {
    if let Some(a) = known.get(&v) {
        return Some((Some(a.base), a.elems.clone()));
    }
    let val = g.value(v);
    match (&val.kind, val.ty.dtype) {
        (ValueKind::Constant(t), DType::I64) => {
            Some((None, t.to_i64_vec().into_iter().map(Elem::Const).collect()))
        }
        // Whole numbers in a float constant (`+ 1.0` on a counter kept in float).
        (ValueKind::Constant(t), DType::F32 | DType::F64) => Some((
            None,
            t.to_f64_vec()
                .into_iter()
                .map(|x| (x.fract() == 0.0 && x.abs() < 9.0e15).then_some(Elem::Const(x as i64)))
                .collect::<Option<Vec<Elem>>>()?,
        )),
        (ValueKind::Constant(_), _) => None,
        (_, DType::I64) if val.ty.numel() == Some(1) => Some((Some(v), vec![Elem::Base(0)])),
        _ => None,
    }
}

/// The tracked form of the output of `op` over `inputs`, when it has one (and depends on a
/// base: constants fold anyway).
pub(super) fn derive(
    g: &Graph,
    known: &HashMap<ValueId, Affine>,
    op: &Op,
    inputs: &[ValueId],
) -> Option<Affine> {
    use crate::ops::BinaryOp;
    let (base, elems) = match op {
        Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Identity => form(g, known, *inputs.first()?)?,
        Op::Cast {
            to: DType::I64 | DType::F32 | DType::F64,
            ..
        } => form(g, known, *inputs.first()?)?,
        Op::Variadic(crate::ops::VariadicOp::Min) if inputs.len() == 2 => {
            let (ba, ea) = form(g, known, inputs[0])?;
            let (bb, eb) = form(g, known, inputs[1])?;
            let n = ea.len().max(eb.len());
            let at = |e: &[Elem], i: usize| e.get(if e.len() == 1 { 0 } else { i }).copied();
            if !(ea.len() == n || ea.len() == 1) || !(eb.len() == n || eb.len() == 1) {
                return None;
            }
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push(match (at(&ea, i)?, at(&eb, i)?) {
                    (Elem::Const(x), Elem::Const(y)) => Elem::Const(x.min(y)),
                    (Elem::Base(c), Elem::Const(d)) | (Elem::Const(d), Elem::Base(c)) => {
                        Elem::Capped(c, d)
                    }
                    (Elem::Capped(c, d), Elem::Const(e)) | (Elem::Const(e), Elem::Capped(c, d)) => {
                        Elem::Capped(c, d.min(e))
                    }
                    _ => return None,
                });
            }
            (one_base(ba, bb)?, out)
        }
        Op::Binary(b @ (BinaryOp::Add | BinaryOp::Sub)) => {
            let (ba, ea) = form(g, known, *inputs.first()?)?;
            let (bb, eb) = form(g, known, *inputs.get(1)?)?;
            let n = ea.len().max(eb.len());
            let at = |e: &[Elem], i: usize| e.get(if e.len() == 1 { 0 } else { i }).copied();
            if !(ea.len() == n || ea.len() == 1) || !(eb.len() == n || eb.len() == 1) {
                return None;
            }
            let sub = matches!(b, BinaryOp::Sub);
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push(match (at(&ea, i)?, at(&eb, i)?) {
                    (Elem::Const(x), Elem::Const(y)) => Elem::Const(if sub {
                        x.checked_sub(y)?
                    } else {
                        x.checked_add(y)?
                    }),
                    (Elem::Base(x), Elem::Const(y)) => Elem::Base(if sub {
                        x.checked_sub(y)?
                    } else {
                        x.checked_add(y)?
                    }),
                    (Elem::Const(x), Elem::Base(y)) if !sub => Elem::Base(x.checked_add(y)?),
                    _ => return None,
                });
            }
            (one_base(ba, bb)?, out)
        }
        Op::Concat { axis: 0 } => {
            let mut base = None;
            let mut out = Vec::new();
            for &v in inputs {
                let (b, e) = form(g, known, v)?;
                base = one_base(base, b)?;
                out.extend(e);
            }
            (base, out)
        }
        _ => return None,
    };
    Some(Affine { base: base?, elems })
}

/// The common base of two forms (`None`: constants), or `None` when they differ.
fn one_base(a: Option<ValueId>, b: Option<ValueId>) -> Option<Option<ValueId>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => None,
        (x, y) => Some(x.or(y)),
    }
}

/// An int64 constant's elements as a list, or a tracked value's elements.
fn ints(imp: &Importer, name: &str) -> Option<(Option<ValueId>, Vec<Elem>)> {
    let id = *imp.by_name.get(name)?;
    form(&imp.graph, &imp.affine, id)
}

/// Imports `Slice` node `node` (opset 10 on) whose starts or ends are run-time values moving
/// together, as described in the module doc. Returns `Ok(false)` when the node is not such
/// a slice (the caller reports its ordinary error).
pub(super) fn import_moving_slice(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
) -> Result<bool> {
    let arg = |i: usize| node.input.get(i).filter(|s| !s.is_empty());
    let (Some(x), Some(s), Some(e)) = (arg(0), arg(1), arg(2)) else {
        return Ok(false);
    };
    let Some(&xid) = imp.by_name.get(x) else {
        return Ok(false);
    };
    let shape = imp.graph.value(xid).ty.shape.clone();
    let (Some((bs, starts)), Some((be, ends))) = (ints(imp, s), ints(imp, e)) else {
        return Ok(false);
    };
    let Some(Some(base)) = one_base(bs, be) else {
        return Ok(false);
    };
    let constant = |i: usize| -> Option<Option<Vec<i64>>> {
        match arg(i) {
            None => Some(None),
            Some(n) => match ints(imp, n)? {
                (None, v) => Some(Some(
                    v.into_iter()
                        .map(|x| match x {
                            Elem::Const(c) => Some(c),
                            Elem::Base(_) | Elem::Capped(..) => None,
                        })
                        .collect::<Option<Vec<i64>>>()?,
                )),
                _ => None,
            },
        }
    };
    let (Some(axes), Some(steps)) = (constant(3), constant(4)) else {
        return Ok(false);
    };
    let n = starts.len();
    let axes: Vec<i64> = axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps: Vec<i64> = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Ok(false);
    }
    // Split into constant axes (an ordinary Slice) and moving ones (a Gather each).
    let (mut cs, mut ce, mut ca, mut cst) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut moving: Vec<(usize, Vec<i64>)> = Vec::new();
    for k in 0..n {
        let rank = shape.len() as i64;
        let Some(axis) = Some(axes[k]).filter(|a| (-rank..rank).contains(a)) else {
            return Ok(false);
        };
        let axis = if axis < 0 { axis + rank } else { axis } as usize;
        // An end capped at or past the axis's length: Slice clamps it there anyway.
        let dim = shape.get(axis).map_or(i64::MAX, |&d| d as i64);
        let end = match ends[k] {
            Elem::Capped(b, cap) if steps[k] > 0 && cap >= dim => Elem::Base(b),
            e => e,
        };
        match (starts[k], end) {
            (Elem::Const(a), Elem::Const(b)) => {
                cs.push(a);
                ce.push(b);
                ca.push(axis as i64);
                cst.push(steps[k]);
            }
            (Elem::Base(a), Elem::Base(b)) if steps[k] != 0 => {
                let len = SliceAxis {
                    axis,
                    start: a,
                    end: b,
                    step: steps[k],
                }
                .len();
                let idx: Vec<i64> = (0..len as i64).map(|j| a + j * steps[k]).collect();
                moving.push((axis, idx));
            }
            _ => return Ok(false),
        }
    }
    let out = node.output.first().cloned().unwrap_or_default();
    let mut emit = Emit {
        imp,
        label: label.to_string(),
        k: 0,
    };
    let mut cur = x.clone();
    if !cs.is_empty() {
        let args = [
            emit.constant(Tensor::i64(vec![cs.len()], &cs))?,
            emit.constant(Tensor::i64(vec![ce.len()], &ce))?,
            emit.constant(Tensor::i64(vec![ca.len()], &ca))?,
            emit.constant(Tensor::i64(vec![cst.len()], &cst))?,
        ];
        let target = if moving.is_empty() {
            Some(out.clone())
        } else {
            None
        };
        cur = emit.node(
            "Slice",
            &[&cur, &args[0], &args[1], &args[2], &args[3]],
            vec![],
            target,
        )?;
    }
    let base_name = emit.imp.graph.value(base).name.clone();
    let base1 = {
        let shape1 = emit.constant(Tensor::i64(vec![1], &[1]))?;
        emit.node("Reshape", &[&base_name, &shape1], vec![], None)?
    };
    let last = moving.len();
    for (m, (axis, idx)) in moving.into_iter().enumerate() {
        let offsets = emit.constant(Tensor::i64(vec![idx.len()], &idx))?;
        let at = emit.node("Add", &[&base1, &offsets], vec![], None)?;
        let target = (m + 1 == last).then(|| out.clone());
        cur = emit.node("Gather", &[&cur, &at], vec![("axis", axis as i64)], target)?;
    }
    Ok(true)
}

/// Imports int64 `Range` node `node` whose start and limit are the same run-time base plus
/// constants (the limit perhaps capped), as described in the module doc. Returns `Ok(false)`
/// when the node is not such a range (the caller reports its ordinary error).
pub(super) fn import_moving_range(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
) -> Result<bool> {
    let arg = |i: usize| node.input.get(i).filter(|s| !s.is_empty());
    let (Some(s), Some(l), Some(d)) = (arg(0), arg(1), arg(2)) else {
        return Ok(false);
    };
    let i64_input = |n: &str| {
        imp.by_name
            .get(n)
            .is_some_and(|&v| imp.graph.value(v).ty.dtype == DType::I64)
    };
    if ![s, l, d].iter().all(|n| i64_input(n)) {
        return Ok(false);
    }
    let (Some((bs, start)), Some((bl, limit)), Some((None, delta))) =
        (ints(imp, s), ints(imp, l), ints(imp, d))
    else {
        return Ok(false);
    };
    let Some(Some(base)) = one_base(bs, bl) else {
        return Ok(false);
    };
    let (&[Elem::Base(a)], &[end], &[Elem::Const(step)]) =
        (start.as_slice(), limit.as_slice(), delta.as_slice())
    else {
        return Ok(false);
    };
    // The limit is `base + c`, or `min(base + c, cap)` assumed (and checked) not to bind.
    let (c, cap) = match end {
        Elem::Base(c) => (c, None),
        Elem::Capped(c, cap) => (c, Some(cap)),
        Elem::Const(_) => return Ok(false),
    };
    let len = SliceAxis {
        axis: 0,
        start: a,
        end: c,
        step,
    };
    // Short enough to list (and free of overflow: every element lies between a and c).
    let short = c.checked_sub(a).and_then(|x| x.checked_add(step)).is_some();
    if step == 0 || !short || len.is_empty() || len.len() > 1 << 24 {
        return Ok(false);
    }
    let offsets: Vec<i64> = (0..len.len() as i64).map(|j| a + j * step).collect();
    let out = node.output.first().cloned().unwrap_or_default();
    let mut emit = Emit {
        imp,
        label: label.to_string(),
        k: 0,
    };
    let base_name = emit.imp.graph.value(base).name.clone();
    let shape1 = emit.constant(Tensor::i64(vec![1], &[1]))?;
    let base1 = emit.node("Reshape", &[&base_name, &shape1], vec![], None)?;
    let offs = emit.constant(Tensor::i64(vec![offsets.len()], &offsets))?;
    let Some(cap) = cap else {
        emit.node("Add", &[&base1, &offs], vec![], Some(out))?;
        return Ok(true);
    };
    // The check: Gather from a one-element table at max(base + c - cap, -1), in range
    // (-1 or 0) exactly when base + c <= cap. Its zero is added to the result.
    let Some(shift) = c.checked_sub(cap) else {
        return Ok(false);
    };
    let shift = emit.constant(Tensor::i64(vec![1], &[shift]))?;
    let minus1 = emit.constant(Tensor::i64(vec![1], &[-1]))?;
    let zero = emit.constant(Tensor::i64(vec![1], &[0]))?;
    let over = emit.node("Add", &[&base1, &shift], vec![], None)?;
    let at = emit.node("Max", &[&over, &minus1], vec![], None)?;
    let check = format!("{label}/limit-check");
    let check = emit.node_named(&check, "Gather", &[&zero, &at], vec![("axis", 0)], None)?;
    let moved = emit.node("Add", &[&base1, &offs], vec![], None)?;
    emit.node("Add", &[&moved, &check], vec![], Some(out))?;
    Ok(true)
}

/// Emits the nodes of one rewritten slice through the importer's ordinary path.
struct Emit<'a> {
    imp: &'a mut Importer,
    label: String,
    k: usize,
}

impl Emit<'_> {
    fn fresh(&mut self, what: &str) -> String {
        loop {
            let name = format!("{}/{what}{}", self.label, self.k);
            self.k += 1;
            if !self.imp.by_name.contains_key(&name) && !self.imp.read_names.contains(&name) {
                return name;
            }
        }
    }

    fn constant(&mut self, t: Tensor) -> Result<String> {
        let name = self.fresh("c");
        let by = format!("the rewrite of node '{}'", self.label);
        self.imp.define(&name, by, t.ty(), ValueKind::Constant(t))?;
        Ok(name)
    }

    fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        ints: Vec<(&str, i64)>,
        out: Option<String>,
    ) -> Result<String> {
        let out = match out {
            Some(o) => o,
            None => self.fresh(&op.to_ascii_lowercase()),
        };
        let name = format!("{}/{op}{}", self.label, self.k);
        self.node_named(&name, op, inputs, ints, Some(out))
    }

    /// As [`Emit::node`], the node named `name` (run-time faults name it).
    fn node_named(
        &mut self,
        name: &str,
        op: &str,
        inputs: &[&str],
        ints: Vec<(&str, i64)>,
        out: Option<String>,
    ) -> Result<String> {
        let out = match out {
            Some(o) => o,
            None => self.fresh(&op.to_ascii_lowercase()),
        };
        let attribute = ints
            .into_iter()
            .map(|(k, v)| {
                let mut a = arenac_proto::AttributeProto {
                    name: Some(k.to_string()),
                    i: Some(v),
                    ..Default::default()
                };
                a.set_type(AttributeType::Int);
                a
            })
            .collect();
        let proto = NodeProto {
            name: Some(name.to_string()),
            op_type: Some(op.to_string()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            attribute,
            ..NodeProto::default()
        };
        self.k += 1;
        self.imp.import_node(&proto, 0, None)?;
        Ok(out)
    }
}
