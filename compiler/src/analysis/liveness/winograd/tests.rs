//! Which Convs [`super::precomputed`] gives precomputed transformed weights.

use super::*;
use crate::import::builder::{Attr, Dim, ModelBuilder};
use crate::import::{ImportOptions, import_model};
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;

/// A 32 -> 32 Conv on 48 x 48 (`wa`: 64 tiles on a 3 x 3 grid's 16 x 16 windows) and a
/// 16 -> 16 Conv on 24 x 24 (`wb`: 36 tiles whole, 4 on a window), plus a Gemm of `fc`
/// floats of weights that sets the model's weights total.
fn model(fc: usize) -> Graph {
    let k = fc.div_ceil(32).max(1);
    let pads = || vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))];
    let m = ModelBuilder::new("pre", 13)
        .input(
            "x",
            DType::F32,
            &[Dim::N(1), Dim::N(32), Dim::N(48), Dim::N(48)],
        )
        .input(
            "u",
            DType::F32,
            &[Dim::N(1), Dim::N(16), Dim::N(24), Dim::N(24)],
        )
        .output("y", DType::F32, &[])
        .output("z", DType::F32, &[])
        .output("q", DType::F32, &[])
        .initializer(
            "wa",
            &Tensor::f32(vec![32, 32, 3, 3], &vec![0.01; 32 * 32 * 9]),
        )
        .initializer(
            "wb",
            &Tensor::f32(vec![16, 16, 3, 3], &vec![0.02; 16 * 16 * 9]),
        )
        .initializer("fc", &Tensor::f32(vec![32, k], &vec![0.03; 32 * k]))
        .node("a", "Conv", &["x", "wa"], &["y"], pads())
        .node("b", "Conv", &["u", "wb"], &["z"], pads())
        .node("gap", "GlobalAveragePool", &["y"], &["g"], vec![])
        .node("flat", "Flatten", &["g"], &["f"], vec![])
        .node("head", "Gemm", &["f", "fc"], &["q"], vec![])
        .build();
    import_model(&m, None, &ImportOptions::default())
        .expect("imports")
        .graph
}

/// The growth of the weights region when the Conv named `conv` reads precomputed matrices.
fn growth(g: &Graph, conv: &str, o: &LivenessOptions) -> (ValueId, usize) {
    let (id, node) = g.nodes().find(|(_, n)| n.name == conv).expect("the conv");
    let (mut p, constant) = geometry(g, id, o.threads).expect("a Winograd geometry");
    assert!(constant);
    winograd::mark(&mut p, true);
    let w = node.inputs[1];
    let own = g.value(w).ty.bytes().expect("static");
    (w, winograd::weights_floats(&p) * 4 - own)
}

fn total(g: &Graph, set: &BTreeSet<ValueId>, o: &LivenessOptions) -> usize {
    ["a", "b"]
        .iter()
        .map(|c| growth(g, c, o))
        .filter(|(w, _)| set.contains(w))
        .map(|(_, b)| b)
        .sum()
}

#[test]
fn precomputed_prefers_convs_that_keep_winograd_on_windows_within_the_share() {
    let o = LivenessOptions::full();
    let probe = model(32);
    let (ga, gb) = (growth(&probe, "a", &o).1, growth(&probe, "b", &o).1);
    assert!(gb < ga, "the old rule (smallest growth first) took b first");
    let own = 4 * (32 * 32 * 9 + 16 * 16 * 9);
    // fc floats for a share of `budget` bytes (a quarter of the weights).
    let fc_for = |budget: usize| (4 * budget).saturating_sub(own) / 4;
    for (budget, want_a, want_b) in [
        // Room for one: a (on windows) before b, b skipped.
        (ga + gb / 2, true, false),
        // Room for both.
        (ga + gb + 64 * 1024, true, true),
        // Not for a: it is skipped and b, which fits, taken.
        (gb + (ga - gb) / 2, false, true),
    ] {
        let g = model(fc_for(budget));
        let pre = precomputed(&g, &o);
        let (wa, wb) = (growth(&g, "a", &o).0, growth(&g, "b", &o).0);
        assert_eq!(pre.contains(&wa), want_a, "budget {budget}: {pre:?}");
        assert_eq!(pre.contains(&wb), want_b, "budget {budget}: {pre:?}");
        let share = crate::arena::weight_stats(&g).bytes / PRECOMPUTE_SHARE;
        assert!(total(&g, &pre, &o) <= share, "within the share");
        // Off with reduced weights or without Winograd.
        for off in [
            LivenessOptions {
                winograd_precompute: false,
                ..o
            },
            LivenessOptions {
                winograd: false,
                ..o
            },
        ] {
            assert!(precomputed(&g, &off).is_empty());
        }
    }
}

#[test]
fn patch_windows_and_the_per_conv_cap() {
    let o = LivenessOptions::full();
    let g = model(32);
    let id = |name: &str| {
        g.nodes()
            .find(|(_, n)| n.name == name)
            .map(|(id, _)| id)
            .expect("conv")
    };
    let (mut a, _) = geometry(&g, id("a"), o.threads).expect("a");
    let (mut b, _) = geometry(&g, id("b"), o.threads).expect("b");
    winograd::mark(&mut a, true);
    winograd::mark(&mut b, true);
    assert!(on_windows(&a), "48 / 3 = 16: 16 tiles a window");
    assert!(!on_windows(&b), "24 / 3 = 8: 4 tiles a window");
    assert!(winograd::applies(&b), "36 tiles whole");
    // mark_within: the chosen Convs are marked without a cap, others under PRECOMPUTE_MAX.
    let mut big = ConvParams {
        m: 256,
        c: 256,
        ..a
    };
    winograd::mark(&mut big, true);
    assert_eq!(big.packed_a, winograd::WINOGRAD_PACKED);
    winograd::mark_within(&mut big, true, usize::MAX);
    assert_eq!(big.packed_a, winograd::WINOGRAD_U_PACKED);
    winograd::mark_within(&mut big, false, usize::MAX);
    assert_eq!(big.packed_a, winograd::WINOGRAD_PACKED);
}
