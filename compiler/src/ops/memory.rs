//! What a node needs of the arena besides its inputs and outputs: its scratch
//! ([`Op::scratch_bytes`], the layout of a MatMul's [`Op::matmul_scratch_layout`]) and
//! whether its output may be planned over an input ([`Op::may_write_over_input`]).

use super::{Op, control, conv, sample, spectral, stage16};
use crate::gemm::IM2COL_TILE;
use crate::ir::types::{DType, TensorType};

impl Op {
    /// Kernel workspace in bytes that a node running this op needs for one step (planned in
    /// the arena as a scratch buffer living only for that step). `inputs` and `outputs` are
    /// the node's data input and output types; `constant[i]` tells whether input `i` is a
    /// compile-time constant (a weight; missing entries count as not constant); `threads` is
    /// the thread count the kernels run on: the parallel kernels (Conv, Gemm, MatMul) get
    /// one slot of their per-thread part per thread (noted below). Choices:
    /// - Conv (f32, 1-d or 2-d): exactly what `crate::gemm::conv::arenac_conv2d` uses on the
    ///   path it will take, by the same function the code generator uses
    ///   (`crate::gemm::conv::conv2d_scratch_bytes`): none for depthwise; for a pointwise
    ///   `1 x 1` kernel, one copied partial 16-column panel (`C/group * 16` floats) when the
    ///   pixel count is not a multiple of 16; otherwise an im2col panel for one image, one
    ///   group and one tile of at most [`IM2COL_TILE`] output pixels (liveness may plan a
    ///   smaller tile at a memory peak: `crate::gemm::conv::conv2d_tiles`), packed for the
    ///   GEMM core (`packed_b_len(C/group * prod(kernel), min(prod(out spatial), IM2COL_TILE))` floats,
    ///   rounded up to 64 bytes); plus the GEMM core's A scratch
    ///   (`a_scratch_floats(M/group, C/group * prod(kernel))` floats, rounded up to 64
    ///   bytes) only when the weights are not constant (constant ones are packed at compile
    ///   time); all of it once per thread. A whole-image im2col
    ///   would make scratch the peak of most CNNs (115 MB for VGG-19's first layers);
    /// - Conv (f32, 3-d): per thread, one packed im2col panel of a tile of output pixels of
    ///   one depth slice (about 1 MiB) and, for run-time weights only, one A-packing slot
    ///   ([`crate::gemm::conv3d::Conv3d::scratch_bytes`], the kernel's own layout);
    /// - ConvTranspose: for one image, one group and one tile of T input pixels (whole rows of
    ///   the last spatial dim, `max(1, IM2COL_TILE / row)` rows, at most all of them): the
    ///   packed tile (`packed_b_len(C/group, T) * elem`), the col panel that col2im scatters
    ///   from (`M/group * prod(kernel) * T * elem`), each rounded up to 64 bytes, then the GEMM
    ///   core's A scratch (`a_scratch_floats(M/group * prod(kernel), C/group) * elem`); with
    ///   run-time weights, all that rounded up to 64 bytes, then room for the weights
    ///   rearranged into the GEMM's A blocks (the weights' bytes);
    /// - Gemm and MatMul: a constant B (a weight) is packed at compile time, so 0; a runtime
    ///   B gets a packed copy of one `K x N` matrix (one batch slice at a time), `K*N*elem`;
    ///   plus a runtime transposed A's copy and the GEMM core's A scratch, once per thread
    ///   ([`Op::matmul_scratch_layout`]);
    /// - Softmax, LayerNormalization, Reduce: 0 (single pass, partial results in registers);
    /// - DFT, STFT: the frame buffer and the FFT plan's own scratch
    ///   ([`spectral::scratch_bytes`], the layout of `crate::fft::DftKernel`);
    /// - LRN (f32): the ring of its in-place kernel, `floor((size-1)/2) + 1` channel planes
    ///   ([`crate::codegen::kernels::lrn::lrn_scratch_bytes`]), planned whether or not the
    ///   output is planned over the input;
    /// - If, Loop: the arena its subgraphs were planned in ([`control::IfAttrs::arena_bytes`],
    ///   [`control::LoopAttrs::arena_bytes`]);
    /// - a node staged on 16-bit data (`--activations f16|bf16`): its staging blocks in f32
    ///   plus the f32 kernel's scratch for one block ([`stage16::scratch_bytes`]);
    /// - everything else: 0.
    ///
    /// Saturates instead of overflowing; types `infer` rejected give 0.
    pub fn scratch_bytes(
        &self,
        inputs: &[TensorType],
        outputs: &[TensorType],
        constant: &[bool],
        threads: usize,
    ) -> usize {
        fn prod(dims: &[usize]) -> usize {
            dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
        }
        if matches!(self, Op::If(_) | Op::Loop(_)) {
            return control::recorded_arena(self);
        }
        let (Some(x), Some(y)) = (inputs.first(), outputs.first()) else {
            return 0;
        };
        let elem = y.dtype.size();
        if let Some(b) = stage16::scratch_bytes(self, inputs, y, constant, threads) {
            return b;
        }
        match self {
            Op::Conv(a) if x.shape.len() == 5 => {
                let w = inputs.get(1).map_or(&[][..], |t| &t.shape[..]);
                crate::gemm::conv3d::Conv3d::from_shapes(
                    &x.shape,
                    &y.shape,
                    w,
                    &a.kernel,
                    &a.strides,
                    &a.dilations,
                    &a.pads,
                    a.group,
                )
                .map_or(0, |p| {
                    let packed_a = constant.get(1).copied().unwrap_or(false);
                    crate::gemm::conv3d::Conv3d {
                        threads,
                        packed_a,
                        ..p
                    }
                    .scratch_bytes()
                })
            }
            Op::Conv(a) => {
                conv::scratch_params(a, x, y, constant.get(1).copied().unwrap_or(false), threads)
                    .map_or(0, |p| crate::gemm::conv::conv2d_scratch_bytes(&p))
            }
            // Run-time weights: the kernel rearranges them after the rest of its scratch.
            Op::ConvTranspose(a) if !constant.get(1).copied().unwrap_or(false) => {
                let rest =
                    Op::ConvTranspose(a.clone()).scratch_bytes(inputs, outputs, &[true; 2], 1);
                let w = inputs.get(1).and_then(|t| t.bytes()).unwrap_or(0);
                (rest.saturating_add(63) & !63).saturating_add(w)
            }
            Op::ConvTranspose(a) => {
                // Tiles of whole input rows (last spatial dim), at least one row.
                let g = a.group.max(1);
                let cg = x.shape.get(1).copied().unwrap_or(0) / g;
                let mk = prod(&[y.shape.get(1).copied().unwrap_or(0) / g, prod(&a.kernel)]);
                let sp = x.shape.get(2..).unwrap_or_default();
                let (row, rows) = match sp.split_last() {
                    Some((&w, rest)) => (w, prod(rest)),
                    None => (1, 1),
                };
                let tile = (IM2COL_TILE / row.max(1))
                    .clamp(1, rows.max(1))
                    .saturating_mul(row);
                let up = |b: usize| b.saturating_add(63) & !63;
                up(crate::gemm::packed_b_len(cg, tile).saturating_mul(elem))
                    .saturating_add(up(prod(&[mk, tile, elem])))
                    .saturating_add(crate::gemm::a_scratch_floats(mk, cg).saturating_mul(elem))
            }
            Op::Gemm(_) | Op::MatMul => self.matmul_scratch_layout(inputs, constant, threads).1,
            Op::Dft(_) | Op::Stft(_) => spectral::scratch_bytes(self, inputs),
            Op::Sample(s) => sample::scratch_bytes(s, x),
            // The ring of the in-place kernel, always planned (whether or not the liveness
            // puts the output over the input): one rule for the planner and the lowering.
            Op::Lrn(a) if x.dtype == DType::F32 && x.shape.len() >= 3 => {
                crate::codegen::kernels::lrn::lrn_scratch_bytes(&x.shape, a.size)
            }
            _ => 0,
        }
    }

    /// Whether this op's kernel may write its output (type `output`) over its data input (type
    /// `input`) when that input dies at this step, the output taking the first bytes of the
    /// input's buffer (the static half of the in-place rule beyond elementwise ops; liveness
    /// decides whether the input is dead):
    /// - LRN (f32, rank >= 3, same type): the kernel keeps a ring of the input planes later
    ///   channels still read in its scratch;
    /// - MaxPool, AveragePool (f32, 1-d or 2-d): when [`crate::gemm::pool::in_place_ok`] holds
    ///   for the geometry (each output row is written after it is computed, over input rows
    ///   no later row reads).
    pub fn may_write_over_input(&self, input: &TensorType, output: &TensorType) -> bool {
        let f32s = input.dtype == DType::F32 && output.dtype == DType::F32;
        match self {
            Op::Lrn(_) => f32s && input == output && input.shape.len() >= 3,
            // 16-bit staged pooling (`--activations`): by blocks of whole planes.
            Op::MaxPool(a) | Op::AveragePool(a)
                if matches!(input.dtype, DType::F16 | DType::BF16)
                    && output.dtype == input.dtype =>
            {
                crate::gemm::pool::pool_params(
                    &input.shape,
                    &output.shape,
                    &a.kernel,
                    &a.strides,
                    &a.dilations,
                    &a.pads,
                )
                .is_some_and(|p| crate::gemm::stage16::pool::in_place_ok(&p))
            }
            Op::MaxPool(a) | Op::AveragePool(a) => {
                f32s && crate::gemm::pool::pool_params(
                    &input.shape,
                    &output.shape,
                    &a.kernel,
                    &a.strides,
                    &a.dilations,
                    &a.pads,
                )
                .is_some_and(|p| crate::gemm::pool::in_place_ok(&p))
            }
            _ => false,
        }
    }

    /// Gemm/MatMul scratch: byte offsets of its parts — a runtime B's packed copy (one `K x N`
    /// slice), a runtime transposed A's row-major copy (Gemm `transA`), `threads` slots of
    /// [`crate::gemm::a_scratch_slot`] floats (one per thread) for the A scratch of
    /// [`crate::gemm::arenac_sgemm`] ([`crate::gemm::A_SCRATCH_FLOATS`] floats) — and the
    /// total bytes. Parts followed by another are rounded up to 64 bytes.
    pub fn matmul_scratch_layout(
        &self,
        inputs: &[TensorType],
        constant: &[bool],
        threads: usize,
    ) -> ([usize; 3], usize) {
        fn up(x: usize) -> usize {
            x.saturating_add(63) & !63
        }
        let is_const = |i: usize| constant.get(i).copied().unwrap_or(false);
        let elem = inputs.first().map_or(4, |t| t.dtype.size());
        let packed_b = match inputs.get(1) {
            Some(b) if !is_const(1) => {
                let s = &b.shape;
                let (k, n) = match (self, s.len()) {
                    (Op::Gemm(g), 2) if g.trans_b => (s[1], s[0]),
                    (_, 1) => (s[0], 1),
                    (_, r) if r >= 2 => (s[r - 2], s[r - 1]),
                    _ => (0, 0),
                };
                crate::gemm::packed_b_len(k, n).saturating_mul(elem)
            }
            _ => 0,
        };
        let a_t = match (self, inputs.first()) {
            (Op::Gemm(g), Some(a)) if g.trans_a && !is_const(0) => {
                a.shape.iter().fold(elem, |acc, &d| acc.saturating_mul(d))
            }
            _ => 0,
        };
        // Rows and depth of A as the kernels call the GEMM (all rows of all batch slices at
        // most), so the A packing scratch is sized for the real product, not the largest one.
        let a_scratch = match inputs.first() {
            Some(a) => {
                let numel = a.shape.iter().fold(1usize, |acc, &d| acc.saturating_mul(d));
                let k = match (self, a.shape.as_slice()) {
                    (Op::Gemm(g), [k, _]) if g.trans_a => *k,
                    (_, [.., k]) => *k,
                    _ => 1,
                };
                crate::gemm::a_scratch_slot(numel / k.max(1), k)
                    .saturating_mul(elem)
                    .saturating_mul(threads.max(1))
            }
            None => 0,
        };
        let o1 = if a_t.saturating_add(a_scratch) > 0 {
            up(packed_b)
        } else {
            packed_b
        };
        let o2 = if a_scratch > 0 {
            up(o1.saturating_add(a_t))
        } else {
            o1.saturating_add(a_t)
        };
        ([0, o1, o2], o2.saturating_add(a_scratch))
    }
}
