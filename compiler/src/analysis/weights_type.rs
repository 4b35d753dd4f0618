//! Which weights `--weights f16|bf16|int8` stores in the reduced type, and what it saves: the
//! prediction the summary and `arenac plan` show before any code is generated. The lowering
//! (`codegen::lower::dense`, `codegen::lower::conv3d`) makes the same decisions: Conv (not
//! depthwise, 1-d/2-d; and 3-d) with constant weights, Gemm with a constant B, MatMul with a constant B. Every other float
//! constant of some size stays f32 and is listed with its node.

use std::collections::HashSet;

use crate::arena::ArenaPlan;
use crate::gemm::conv::ConvParams;
use crate::gemm::lowp::{WeightType, conv_lowp_bytes, lowp_b_bytes};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::DType;
use crate::ops::Op;

/// Float constants of at least this many elements that stay f32 are listed.
const LIST_FROM: usize = 1024;

/// A node whose float constants stay f32 under a reduced weights type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptF32 {
    /// Node name.
    pub node: String,
    /// ONNX op type.
    pub op: String,
    /// Why its weights stay f32.
    pub reason: &'static str,
    /// Bytes of its float constants (each buffer counted once across the list).
    pub bytes: usize,
}

/// What a weights type does to a planned graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightsReport {
    /// The type asked for.
    pub storage: WeightType,
    /// Bytes of the constants stored in `storage` as they are given (f32).
    pub reduced_source_bytes: usize,
    /// The bytes they take in `storage` (packing padding and int8 scales included).
    pub reduced_bytes: usize,
    /// Nodes whose float constants stay f32 (largest first).
    pub kept: Vec<KeptF32>,
    /// A note when the type changes nothing (no such weights, or already stored so).
    pub note: Option<String>,
}

impl WeightsReport {
    /// Bytes saved against f32 (0 for f32).
    pub fn saving(&self) -> usize {
        self.reduced_source_bytes.saturating_sub(self.reduced_bytes)
    }
}

/// The node's constant stored in the reduced type by the lowering, with its bytes there, if
/// any (`storage` reduced).
pub fn reduced_weight(g: &Graph, id: NodeId, storage: WeightType) -> Option<(usize, usize)> {
    if !storage.is_reduced() {
        return None;
    }
    let n = g.node(id);
    let constant = |i: usize| {
        n.inputs.get(i).and_then(|&v| match &g.value(v).kind {
            ValueKind::Constant(t) => Some(t),
            _ => None,
        })
    };
    let shape = |i: usize| n.inputs.get(i).map(|&v| g.value(v).ty.shape.clone());
    // f32 nodes, and the 16-bit staged ones of `--activations f16|bf16` (16-bit data, f32
    // constants: `codegen::lower::act16` stores their weights reduced alike).
    let typed = |v: ValueId, constant: bool| match g.value(v).ty.dtype {
        DType::F32 => true,
        DType::F16 | DType::BF16 => !constant,
        _ => false,
    };
    let is_const = |v: ValueId| matches!(g.value(v).kind, ValueKind::Constant(_));
    let ok = n.inputs.iter().all(|&v| typed(v, is_const(v)))
        && n.outputs.iter().all(|&v| typed(v, false));
    if !ok {
        return None;
    }
    match &n.op {
        Op::Gemm(a) => {
            let t = constant(1)?;
            let sb = shape(1)?;
            let [r, c] = sb[..] else { return None };
            let (k, nn) = if a.trans_b { (c, r) } else { (r, c) };
            Some((t.numel() * 4, lowp_b_bytes(storage, k, nn)))
        }
        Op::MatMul => {
            let t = constant(1)?;
            let sb = shape(1)?;
            let (k, nn) = match sb[..] {
                [k] => (k, 1),
                [.., k, nn] => (k, nn),
                [] => return None,
            };
            let slices = t.numel() / (k * nn).max(1);
            let piece = lowp_b_bytes(storage, k, nn).next_multiple_of(64);
            Some((t.numel() * 4, piece * slices))
        }
        Op::Conv(a) if shape(0)?.len() == 5 => {
            let t = constant(1)?;
            let y = g.value(*n.outputs.first()?).ty.shape.clone();
            let p = crate::gemm::conv3d::Conv3d::from_shapes(
                &shape(0)?,
                &y,
                &shape(1)?,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
                a.group,
            )?;
            let p = crate::gemm::conv3d::Conv3d {
                packed_a: true,
                wtype: storage,
                ..p
            };
            Some((t.numel() * 4, p.weights_bytes()))
        }
        Op::Conv(a) => {
            let t = constant(1)?;
            let (x, y) = (shape(0)?, g.value(*n.outputs.first()?).ty.shape.clone());
            let p = ConvParams::from_shapes(
                &x,
                &y,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
                a.group.max(1),
            )?;
            p.packs_a()
                .then(|| (t.numel() * 4, conv_lowp_bytes(&p, storage)))
        }
        _ => None,
    }
}

/// Whether every element of `t` (f32) is exactly representable in `storage` (f16/bf16).
fn exact_in(t: &crate::ir::tensor::Tensor, storage: WeightType) -> bool {
    let Some(v) = t.f32_slice() else {
        return t.dtype() == DType::F16 && storage == WeightType::F16
            || t.dtype() == DType::BF16 && storage == WeightType::Bf16;
    };
    match storage {
        WeightType::F16 => v
            .iter()
            .all(|&x| x.is_nan() || half::f16::from_f32(x).to_f32() == x),
        WeightType::Bf16 => v
            .iter()
            .all(|&x| x.is_nan() || half::bf16::from_f32(x).to_f32() == x),
        _ => false,
    }
}

/// The report for `storage` over the planned graph's scheduled nodes.
pub fn weights_report(g: &Graph, plan: &ArenaPlan, storage: WeightType) -> WeightsReport {
    let mut r = WeightsReport {
        storage,
        ..Default::default()
    };
    if !storage.is_reduced() {
        return r;
    }
    let mut seen = HashSet::new();
    let mut already = false;
    let mut lossless = true;
    for &id in &plan.schedule {
        let n = g.node(id);
        if let Some((src, bytes)) = reduced_weight(g, id, storage) {
            let w = n.inputs.get(1).map(|&v| g.value(v));
            if let Some(ValueKind::Constant(t)) = w.map(|v| &v.kind)
                && seen.insert((t.bytes().as_ptr() as usize, t.bytes().len()))
            {
                r.reduced_source_bytes += src;
                r.reduced_bytes += bytes;
                lossless = lossless && exact_in(t, storage);
            }
            continue;
        }
        let mut bytes = 0;
        for &v in &n.inputs {
            if let ValueKind::Constant(t) = &g.value(v).kind
                && t.dtype().is_float()
                && t.numel() >= LIST_FROM
                && seen.insert((t.bytes().as_ptr() as usize, t.bytes().len()))
            {
                bytes += t.bytes().len();
                already |= match storage {
                    WeightType::F16 => t.dtype() == DType::F16,
                    WeightType::Bf16 => t.dtype() == DType::BF16,
                    _ => false,
                };
            }
        }
        if bytes > 0 {
            let reason = match &n.op {
                Op::Conv(_) => {
                    "a depthwise Conv, or weights not constant f32: read as f32 (no reduced kernel)"
                }
                Op::ConvTranspose(_) => "ConvTranspose has no reduced-type kernel",
                Op::Gemm(_) | Op::MatMul => "a constant A operand, or not f32",
                _ => "this op reads its constants as f32",
            };
            r.kept.push(KeptF32 {
                node: n.name.clone(),
                op: n.op.name().to_string(),
                reason,
                bytes,
            });
        }
    }
    r.kept
        .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.node.cmp(&b.node)));
    if r.reduced_source_bytes > 0 && lossless {
        r.note = Some(format!(
            "the weights hold only {0} values (e.g. an {0} model's, widened at import): \
             stored in {0} exactly, the outputs do not change",
            storage.name()
        ));
    }
    if r.reduced_source_bytes == 0 {
        r.note = Some(if already {
            format!(
                "the model's weights are already {}: --weights {} changes nothing",
                storage.name(),
                storage.name()
            )
        } else {
            format!(
                "the model has no Conv/Gemm/MatMul weights: --weights {} changes nothing",
                storage.name()
            )
        });
    }
    r
}

/// The weights part of the plan report (JSON field `weights_storage`; see
/// docs/PLAN-REPORT.md): present when a reduced type was asked for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WeightsStorage {
    /// `f16`, `bf16` or `int8`.
    pub storage: String,
    /// Bytes of all the weights as stored (the f32 ones plus the reduced ones).
    pub stored_bytes: usize,
    /// Bytes of the weights stored in `storage`, as given (f32).
    pub reduced_source_bytes: usize,
    /// The bytes they take in `storage`.
    pub reduced_bytes: usize,
    /// `reduced_source_bytes - reduced_bytes`.
    pub saving_bytes: usize,
    /// Bytes of the constants kept in f32 (including small ones not listed).
    pub f32_bytes: usize,
    /// Nodes whose weights stay f32, largest first.
    pub kept_f32: Vec<KeptF32Entry>,
    /// Why the type changes nothing, when it does not.
    pub note: Option<String>,
}

/// One node of [`WeightsStorage::kept_f32`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptF32Entry {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op: String,
    /// Bytes of its float constants.
    pub bytes: usize,
    /// Why they stay f32.
    pub reason: String,
}

impl WeightsReport {
    /// The report's serializable form, given every constant's bytes as the graph holds them
    /// (`weights_bytes`, the plan's figure); `None` for f32.
    pub fn storage_entry(&self, weights_bytes: usize) -> Option<WeightsStorage> {
        if !self.storage.is_reduced() {
            return None;
        }
        Some(WeightsStorage {
            storage: self.storage.name().into(),
            stored_bytes: weights_bytes
                .saturating_sub(self.reduced_source_bytes)
                .saturating_add(self.reduced_bytes),
            reduced_source_bytes: self.reduced_source_bytes,
            reduced_bytes: self.reduced_bytes,
            saving_bytes: self.saving(),
            f32_bytes: weights_bytes.saturating_sub(self.reduced_source_bytes),
            kept_f32: self
                .kept
                .iter()
                .map(|k| KeptF32Entry {
                    node: k.node.clone(),
                    op: k.op.clone(),
                    bytes: k.bytes,
                    reason: k.reason.into(),
                })
                .collect(),
            note: self.note.clone(),
        })
    }
}

impl WeightsStorage {
    /// Text lines for the plan report and the summary: the bytes by type, the saving, the
    /// nodes kept in f32 (the first `list` of them) and the note.
    pub fn to_text(&self, list: usize) -> String {
        use std::fmt::Write as _;
        let h = crate::arena::human_bytes;
        let mut out = String::new();
        let pct = if self.reduced_source_bytes + self.f32_bytes == 0 {
            0.0
        } else {
            100.0 * self.saving_bytes as f64 / (self.reduced_source_bytes + self.f32_bytes) as f64
        };
        let _ = writeln!(
            out,
            "weights stored: {} = {} as {} (from {} f32) + {} f32; saving {} ({pct:.1}% of f32)",
            h(self.stored_bytes),
            h(self.reduced_bytes),
            self.storage,
            h(self.reduced_source_bytes),
            h(self.f32_bytes),
            h(self.saving_bytes),
        );
        if !self.kept_f32.is_empty() {
            let _ = writeln!(
                out,
                "kept in f32: {} node{} with weights of 1024+ elements",
                self.kept_f32.len(),
                if self.kept_f32.len() == 1 { "" } else { "s" }
            );
            for k in self.kept_f32.iter().take(list) {
                let _ = writeln!(
                    out,
                    "  {} ({}): {} — {}",
                    k.node,
                    k.op,
                    h(k.bytes),
                    k.reason
                );
            }
            if self.kept_f32.len() > list {
                let _ = writeln!(out, "  ... {} more", self.kept_f32.len() - list);
            }
        }
        if let Some(n) = &self.note {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}
