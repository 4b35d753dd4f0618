//! The `jit_diff` fuzz target's body: random small f32 graphs compiled by `codegen::compile`
//! and run in a fresh arena, against the reference evaluation `ir::eval::eval_graph`. A typed
//! error from `compile` (an op without a kernel) is fine; a panic, a crash or a mismatch beyond
//! `1e-4 * max(1, max |reference|) + 1e-3 * |reference|` is a finding.

use arenac_compiler::arena::{PlanOptions, plan_arena};
use arenac_compiler::codegen::weights::AlignedBytes;
use arenac_compiler::codegen::{Executable, compile};
use arenac_compiler::import::{ImportOptions, decode_model, import_model};
use arenac_compiler::ir::eval::eval_graph;
use arenac_compiler::ir::graph::Graph;
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;

use super::graph_gen::{random_inputs, random_model};
use super::plan_check::{check_plan, plan_options};
use super::source::{Rng, Source};

/// Relative tolerance.
pub const RTOL: f32 = 1e-3;
/// Absolute tolerance, scaled by the output's largest reference magnitude (at least 1).
pub const ATOL: f32 = 1e-4;

/// Runs `exe` on `inputs` in a fresh zeroed 64-aligned arena; returns the outputs.
pub fn run_in_arena(exe: &Executable, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    assert_eq!(exe.inputs().len(), inputs.len(), "input count");
    for (slot, t) in exe.inputs().iter().zip(inputs) {
        let b = t.bytes();
        assert_eq!(Some(b.len()), slot.ty.bytes(), "input {} bytes", slot.name);
        let n = slot.stored_bytes().expect("static input size");
        let end = slot.offset.checked_add(n).expect("slot end");
        assert!(
            end <= exe.arena_bytes(),
            "input {} past the arena",
            slot.name
        );
        // Copied, or rounded to 16 bits for an input `--activations` stores narrowed.
        slot.store(b, &mut arena.as_mut_slice()[slot.offset..end]);
    }
    // A plan for several threads runs on a pool of that size (per-thread scratch slots).
    let pool = (exe.threads() > 1)
        .then(|| arenac_compiler::par::Pool::new(exe.threads()).expect("threads"));
    // SAFETY: the arena is 64-aligned, `arena_bytes` long, owned here alone, and every input
    // is written at its slot.
    let ran = unsafe { exe.run_with(arena.as_mut_ptr(), pool.as_ref()) };
    if let Err(f) = ran {
        panic!("the run reported a fault: {f}");
    }
    exe.outputs()
        .iter()
        .map(|slot| {
            let n = slot.ty.bytes().expect("static output size");
            let v = arena.as_slice()[slot.offset..slot.offset + n].to_vec();
            Tensor::from_bytes(slot.ty.dtype, slot.ty.shape.clone(), v.into())
                .expect("output bytes match the type")
        })
        .collect()
}

/// Compiles `g` with `opts` and compares a run on `inputs` with the reference. `Ok(false)`
/// when `compile` refused the graph with a typed error.
pub fn diff_graph(g: &Graph, opts: &PlanOptions, inputs: &[Tensor]) -> bool {
    let plan = plan_arena(g, opts).unwrap_or_else(|e| panic!("planning failed: {e}"));
    check_plan(g, &plan);
    let exe = match compile(g, &plan) {
        Ok(exe) => exe,
        Err(_) => return false,
    };
    let Ok(want) = eval_graph(g, inputs) else {
        return false;
    };
    let got = run_in_arena(&exe, inputs);
    assert_eq!(got.len(), want.len());
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.shape(), b.shape(), "output {o} shape");
        assert_eq!(a.dtype(), b.dtype(), "output {o} dtype");
        let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
        let scale = b
            .iter()
            .filter(|y| y.is_finite())
            .fold(1.0f32, |m, y| m.max(y.abs()));
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let ok = (x - y).abs() <= ATOL * scale + RTOL * y.abs()
                || (x.is_nan() && y.is_nan())
                || (x == y)
                || (y.abs() > 1e30 && x.abs() > 1e30 && x.signum() == y.signum());
            assert!(ok, "output {o} element {i}: got {x}, want {y}");
        }
    }
    true
}

/// Random inputs of any dtype for a model from a file (floats in [-1, 1), integers in
/// [-3, 3], booleans).
fn inputs_for(g: &Graph, seed: u64) -> Option<Vec<Tensor>> {
    let mut rng = Rng(seed | 1);
    g.inputs
        .iter()
        .map(|&v| {
            let ty = &g.value(v).ty;
            let n = ty.numel().filter(|&n| n <= 1 << 20)?;
            let shape = ty.shape.to_vec();
            Some(match ty.dtype {
                DType::F32 => Tensor::f32(shape, &rng.f32s(n, -1.0, 1.0)),
                DType::I64 => {
                    let v: Vec<i64> = (0..n).map(|_| (rng.next_u64() % 7) as i64 - 3).collect();
                    Tensor::i64(shape, &v)
                }
                _ => return None,
            })
        })
        .collect()
}

/// The fuzz target: the first byte `% 4 == 3` reads the rest as an encoded `ModelProto` (how
/// fixtures seed the corpus); otherwise a random graph of at most 12 nodes is decoded. True
/// when a program ran and matched (false: the input was refused with a typed error).
pub fn fuzz_jit_diff(data: &[u8]) -> bool {
    let mut src = Source::new(data);
    let mode = src.byte();
    let mut opts = plan_options(src.byte());
    opts.align = 64;
    opts.liveness.scratch = true;
    if mode % 4 == 3 {
        let Ok(model) = decode_model(data.get(2..).unwrap_or_default().to_vec().into()) else {
            return false;
        };
        let iopts = ImportOptions {
            max_fold_bytes: 16 << 20,
            ..ImportOptions::default()
        };
        let Ok(imported) = import_model(&model, None, &iopts) else {
            return false;
        };
        let g = imported.graph;
        if g.node_count() > 64 {
            return false;
        }
        let Some(inputs) = inputs_for(&g, data.len() as u64) else {
            return false;
        };
        return diff_graph(&g, &opts, &inputs);
    }
    let m = random_model(&mut src, 12);
    let g = import_model(&m.model, None, &ImportOptions::default())
        .unwrap_or_else(|e| panic!("a generated graph does not import: {e}"))
        .graph;
    diff_graph(&g, &opts, &random_inputs(&m))
}
