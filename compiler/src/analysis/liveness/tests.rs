use super::decide::peak;
use super::*;
use crate::import::text::parse_model_text;
use crate::import::{ImportOptions, import_model};
use crate::plan::{ALIGN, lower_bound};

pub(crate) fn graph(src: &str) -> Graph {
    let m = parse_model_text(src).expect("parse");
    import_model(&m, None, &ImportOptions::default())
        .expect("import")
        .graph
}

fn id(g: &Graph, name: &str) -> ValueId {
    g.find_value(name).expect("value")
}

fn buf<'a>(l: &'a Liveness, g: &Graph, name: &str) -> &'a Buffer {
    &l.buffers[l.value_buffer[&id(g, name)]]
}

fn same_buffer(l: &Liveness, g: &Graph, a: &str, b: &str) -> bool {
    l.value_buffer[&id(g, a)] == l.value_buffer[&id(g, b)]
}

const VIEWS: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
views (float[2, 3, 4] X) => (float[2, 12] Y)
<int64[2] s = {2, 12}>
{
    A = Relu(X)
    R = Reshape(A, s)
    B = Sigmoid(R)
    F = Flatten(B)
    Y = Identity(F)
}
"#;

#[test]
fn layer_wise_is_one_buffer_per_value() {
    let g = graph(VIEWS);
    let l = liveness(&g, g.order(), LivenessOptions::layer_wise());
    assert_eq!(l.buffers.len(), 6);
    assert!(l.alias_of.is_empty());
    assert_eq!(buf(&l, &g, "X").interval, Interval::new(0, 1, 96));
    assert_eq!(buf(&l, &g, "A").interval, Interval::new(0, 2, 96));
    assert_eq!(buf(&l, &g, "Y").interval, Interval::new(4, 5, 96));
    assert_eq!(buf(&l, &g, "Y").kind, BufferKind::Output);
}

#[test]
fn views_alias_their_input() {
    let g = graph(VIEWS);
    let l = liveness(&g, g.order(), LivenessOptions::full());
    assert_eq!(l.alias_of[&id(&g, "R")], id(&g, "A"));
    assert!(same_buffer(&l, &g, "R", "A"));
    // B: Sigmoid of R, which dies there; A's buffer is not an input's, so B goes in place.
    assert!(same_buffer(&l, &g, "B", "A"));
    assert_eq!(l.alias_of[&id(&g, "F")], id(&g, "B"));
    assert_eq!(l.alias_of[&id(&g, "Y")], id(&g, "F"));
    let b = buf(&l, &g, "A");
    assert_eq!(b.values.len(), 5);
    assert_eq!(b.interval, Interval::new(0, 5, 96));
    assert_eq!(b.kind, BufferKind::Output);
    // The input is never written over: A = Relu(X) gets its own buffer.
    assert!(!same_buffer(&l, &g, "A", "X"));
    assert_eq!(buf(&l, &g, "X").kind, BufferKind::Input);
    assert_eq!(l.buffers.len(), 2);
    // Every non-constant value has a buffer.
    for v in g.value_ids() {
        if !is_constant(&g, v) {
            assert!(l.value_buffer.contains_key(&v), "{}", g.value(v).name);
        }
    }
}

#[test]
fn view_of_input_extends_input_buffer() {
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
vin (float[2, 3] X) => (float[6] Y, float[2, 3] Z)
<int64[1] s = {6}>
{
    Y = Reshape(X, s)
    Z = Relu(X)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    let b = buf(&l, &g, "Y");
    assert!(same_buffer(&l, &g, "X", "Y"));
    assert_eq!(b.kind, BufferKind::Input);
    assert_eq!(b.interval, Interval::new(0, 2, 24));
    assert!(!same_buffer(&l, &g, "X", "Z"));
}

const RESIDUAL: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
residual (float[1, 8] X) => (float[1, 8] Y)
{
    A = Relu(X)
    B = Sigmoid(A)
    C = Add(A, B)
    D = Tanh(C)
    E = Add(D, C)
    Y = Mul(E, A)
}
"#;

#[test]
fn residual_add_reuses_dead_operand_only() {
    let g = graph(RESIDUAL);
    let l = liveness(&g, g.order(), LivenessOptions::full());
    // B = Sigmoid(A): A is read later, so B gets a buffer of its own.
    assert!(!same_buffer(&l, &g, "B", "A"));
    // C = Add(A, B): A is still read by Y, so C goes into B's buffer (B dies here).
    assert!(!same_buffer(&l, &g, "C", "A"));
    assert!(same_buffer(&l, &g, "C", "B"));
    assert_eq!(l.alias_of[&id(&g, "C")], id(&g, "B"));
    // D = Tanh(C): C is read again by E, so D is new.
    assert!(!same_buffer(&l, &g, "D", "C"));
    // E = Add(D, C): both die; the first one (D) is chosen.
    assert!(same_buffer(&l, &g, "E", "D"));
    // Y = Mul(E, A): both die; Y lands in E's buffer, which becomes an output buffer.
    assert!(same_buffer(&l, &g, "Y", "E"));
    assert_eq!(buf(&l, &g, "Y").kind, BufferKind::Output);
    assert_eq!(buf(&l, &g, "Y").interval.end, g.node_count());
    // The graph input is never reused in place.
    assert!(!same_buffer(&l, &g, "A", "X"));
    // In-place off: every value its own buffer.
    let opts = LivenessOptions {
        in_place: false,
        ..LivenessOptions::full()
    };
    let l = liveness(&g, g.order(), opts);
    assert!(l.alias_of.is_empty());
    assert_eq!(l.buffers.len(), 7);
}

#[test]
fn in_place_needs_same_shape_and_size() {
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
bc (float[1, 8] X, float[4, 8] Z) => (float[4, 8] Y, bool[1, 8] Q)
{
    A = Relu(X)
    B = Add(A, Z)
    C = Relu(X)
    Q = Less(C, X)
    Y = Relu(B)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    // A (1x8) dies at B (4x8): a broadcast output cannot go over it.
    assert!(!same_buffer(&l, &g, "B", "A"));
    // Q is bool from float: sizes differ.
    assert!(!same_buffer(&l, &g, "Q", "C"));
    // Y = Relu(B) over the dead B.
    assert!(same_buffer(&l, &g, "Y", "B"));
}

#[test]
fn same_buffer_read_at_two_layouts_blocks_in_place() {
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
lay (float[4, 4] X) => (float[4, 4] Y)
<int64[2] s = {4, 4}>
{
    A = Relu(X)
    T = Transpose(A)
    R = Reshape(T, s)
    Y = Add(T, R)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    assert!(same_buffer(&l, &g, "R", "T"));
    assert!(!same_buffer(&l, &g, "Y", "T"));
}

#[test]
fn conventions_inputs_from_zero_outputs_to_end() {
    let g = graph(RESIDUAL);
    let n = g.node_count();
    for opts in [LivenessOptions::layer_wise(), LivenessOptions::full()] {
        let l = liveness(&g, g.order(), opts);
        assert_eq!(buf(&l, &g, "X").interval.start, 0);
        assert_eq!(buf(&l, &g, "X").interval.end, 1);
        assert_eq!(buf(&l, &g, "Y").interval.end, n);
        for b in &l.buffers {
            assert!(b.interval.start < b.interval.end && b.interval.end <= n);
        }
    }
}

const CONV: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
conv (float[1, 3, 8, 8] X, float[4, 3, 3, 3] W, float[4, 4, 1, 1] V) => (float[1, 4, 8, 8] Y)
{
    A = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (X, W)
    Y = Conv(A, V)
}
"#;

#[test]
fn scratch_for_3x3_conv() {
    let g = graph(CONV);
    let l = liveness(&g, g.order(), LivenessOptions::full());
    let s: Vec<&Buffer> = l
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Scratch)
        .collect();
    // Packed im2col panel: (3 channels * 9 taps) rows * 64 output pixels * 4 bytes, then
    // the GEMM core's A scratch (4 rows padded to 12, 27 columns: the weights are not
    // constant, so not packed at compile time; one slot of a_scratch_slot floats per
    // thread, one thread here); the 1x1 conv reads its input in place (64 pixels: no partial
    // 16-column panel to copy) and needs only its A scratch.
    assert_eq!(s.len(), 2);
    let a_block = crate::gemm::a_scratch_slot(4, 27) * 4;
    assert_eq!(s[0].interval, Interval::new(0, 1, 3 * 9 * 64 * 4 + a_block));
    assert_eq!(s[0].name, format!("{}:scratch", g.node(g.order()[0]).name));
    assert_eq!(s[0].node, Some(g.order()[0]));
    assert!(s[0].values.is_empty());
    let a_block = crate::gemm::a_scratch_slot(4, 4) * 4;
    assert_eq!(s[1].interval, Interval::new(1, 2, a_block));
    assert_eq!(s[1].node, Some(g.order()[1]));
    let opts = LivenessOptions {
        scratch: false,
        ..LivenessOptions::full()
    };
    let l = liveness(&g, g.order(), opts);
    assert!(l.buffers.iter().all(|b| b.kind != BufferKind::Scratch));
}

#[test]
fn scratch_has_one_slot_per_thread() {
    // The conv's panel and A scratch and the MatMul's A scratch are per thread; a run-time
    // B's packed copy is shared.
    let g = graph(CONV);
    let sizes = |threads: usize| -> Vec<usize> {
        liveness(&g, g.order(), LivenessOptions::full().with_threads(threads))
            .buffers
            .iter()
            .filter(|b| b.kind == BufferKind::Scratch)
            .map(|b| b.interval.size)
            .collect()
    };
    let (one, three) = (sizes(1), sizes(3));
    assert_eq!(three, one.iter().map(|s| 3 * s).collect::<Vec<_>>());
}

#[test]
fn matmul_scratch_packs_runtime_b_and_a() {
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
mm (float[2, 3] X, float[3, 5] B) => (float[2, 5] Y, float[2, 2] Z)
<float[3, 2] W = {1, 2, 3, 4, 5, 6}>
{
    Y = MatMul(X, B)
    Z = MatMul(X, W)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    let s: Vec<usize> = l
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Scratch)
        .map(|b| b.interval.size)
        .collect();
    // Y packs its runtime B (then, 64-aligned, the A block); Z's constant B was packed at
    // compile time, so it only needs the A block.
    let a_block = crate::gemm::a_scratch_slot(2, 3) * 4;
    let packed_b = (crate::gemm::packed_b_len(3, 5) * 4).next_multiple_of(64);
    assert_eq!(s, vec![packed_b + a_block, a_block]);
}

#[test]
fn batch_norm_goes_in_place_conv_does_not() {
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
bn (float[1, 2, 4, 4] X, float[2, 2, 1, 1] W) => (float[1, 2, 4, 4] Y)
<float[2] s = {1, 1}, float[2] b = {0, 0}, float[2] m = {0, 0}, float[2] v = {1, 1}>
{
    A = Conv(X, W)
    B = BatchNormalization(A, s, b, m, v)
    C = Conv(B, W)
    Y = Relu(C)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    assert!(same_buffer(&l, &g, "B", "A"));
    assert!(!same_buffer(&l, &g, "C", "B"));
    assert!(same_buffer(&l, &g, "Y", "C"));
    assert_eq!(buf(&l, &g, "Y").kind, BufferKind::Output);
}

const CONCATS: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
cat (float[1, 2, 4] X) => (float[1, 10, 4] Z)
{
    A = Relu(X)
    B = Sigmoid(X)
    Y = Concat <axis = 1> (A, B)
    C = Tanh(X)
    D = Neg(X)
    Y2 = Concat <axis = 1> (Y, C, D)
    Z = Concat <axis = 1> (Y2, X)
}
"#;

#[test]
fn concat_inputs_are_slices_of_its_output() {
    let g = graph(CONCATS);
    let l = liveness(&g, g.order(), LivenessOptions::full());
    // Nested: A, B are slices of Y; Y, C, D of Y2; Y2 of Z. One buffer holds all of them.
    for (v, of, offset) in [
        ("A", "Y", 0),
        ("B", "Y", 32),
        ("Y", "Y2", 0),
        ("C", "Y2", 64),
        ("D", "Y2", 96),
        ("Y2", "Z", 0),
    ] {
        assert_eq!(l.alias_of[&id(&g, v)], id(&g, of), "{v}");
        assert!(same_buffer(&l, &g, v, "Z"), "{v}");
        assert_eq!(l.offset_of(id(&g, v)), offset, "{v}");
    }
    // X is a graph input: copied into Z at [128, 160), not stored there.
    assert!(!same_buffer(&l, &g, "X", "Z"));
    let b = buf(&l, &g, "Z");
    assert_eq!(b.values[0], id(&g, "Z"));
    assert_eq!(b.interval, Interval::new(0, g.node_count(), 10 * 4 * 4));
    assert_eq!(b.kind, BufferKind::Output);
    assert_eq!(l.buffers.len(), 2);
    // The layer-wise baseline and the option off: every value in its own buffer.
    for opts in [
        LivenessOptions::layer_wise(),
        LivenessOptions {
            concat_in_place: false,
            ..LivenessOptions::full()
        },
    ] {
        let l = liveness(&g, g.order(), opts);
        assert!(l.value_offset.is_empty());
        assert!(!same_buffer(&l, &g, "A", "Y"));
    }
}

#[test]
fn concat_in_place_exclusions_fall_back() {
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
ex (float[1, 2, 4] X, float[2, 2, 4] W) => (float[1, 10, 4] Y, float[1, 2, 4] O, float[2, 4, 4] Q, float[1, 4, 4] P)
<int64[3] s = {1, 2, 4}, float[1, 2, 4] K = {1, 2, 3, 4, 5, 6, 7, 8}>
{
    A = Relu(X)
    R = Reshape(A, s)
    D = Sigmoid(X)
    O = Tanh(X)
    E = Neg(X)
    Y = Concat <axis = 1> (R, D, D, O, K)
    F = Relu(W)
    Q = Concat <axis = 1> (F, W)
    P = Concat <axis = 1> (E, E2)
    E2 = Abs(E)
    P2 = Concat <axis = 1> (E2, E)
    G = Add(P2, P2)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    // A view (R), a value read twice by the Concat (D), a graph output (O), a constant (K), a
    // slice that is not contiguous (F: outer dim 2), and a graph input (W) keep their own
    // buffers; E and E2 are slices of the first Concat that reads them (P) only.
    for v in ["D", "O", "F", "W"] {
        assert!(!l.alias_of.contains_key(&id(&g, v)), "{v}");
        assert!(!l.value_offset.contains_key(&id(&g, v)), "{v}");
    }
    assert_eq!(l.alias_of[&id(&g, "R")], id(&g, "A"));
    for v in ["R", "D", "O"] {
        assert!(!same_buffer(&l, &g, v, "Y"), "{v}");
    }
    assert!(!same_buffer(&l, &g, "F", "Q"));
    assert_eq!(l.alias_of[&id(&g, "E")], id(&g, "P"));
    assert_eq!(l.alias_of[&id(&g, "E2")], id(&g, "P"));
    assert_eq!(l.offset_of(id(&g, "E2")), 32);
    assert!(!same_buffer(&l, &g, "P2", "P"));
}

#[test]
fn lrn_and_max_pool_write_over_their_dead_input() {
    // E = Expand of a narrow input; the LRN writes over E (same size, always a gain), the
    // MaxPool over L (smaller output, kept because it lowers the peak: L + P at that step).
    let g = graph(
        r#"
<ir_version: 8, opset_import: ["" : 13]>
pools (float[1, 8, 16, 1] X) => (float[1, 8, 8, 8] Y)
<int64[4] s = {1, 8, 16, 16}>
{
    E = Expand(X, s)
    L = LRN<size = 1>(E)
    P = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(L)
    Y = Relu(P)
}
"#,
    );
    let l = liveness(&g, g.order(), LivenessOptions::full());
    assert_eq!(l.alias_of[&id(&g, "L")], id(&g, "E"));
    assert_eq!(l.alias_of[&id(&g, "P")], id(&g, "L"));
    assert!(same_buffer(&l, &g, "P", "E"));
    assert_eq!(buf(&l, &g, "E").interval.size, 8 * 16 * 16 * 4);
    // The LRN's ring: floor((size - 1) / 2) + 1 = 1 plane of 16x16 floats.
    let ring = l.buffers.iter().find(|b| b.kind == BufferKind::Scratch);
    assert_eq!(ring.map(|b| b.interval.size), Some(16 * 16 * 4));
    // Layer-wise: nothing shared.
    let base = liveness(&g, g.order(), LivenessOptions::layer_wise());
    assert!(!same_buffer(&base, &g, "L", "E") && !same_buffer(&base, &g, "P", "L"));
}

#[test]
fn pooling_rows_that_overwrite_needed_input_stay_apart() {
    // Stride 1, same size: with three rows of top pad (7x7), output row 0 covers input row 0,
    // which output row 3 still reads (more than the kernel's lag of two rows); with one row
    // (3x3) a lag of one row suffices; without pads each row ends before later windows.
    let src = |k: usize, pad: usize| {
        let out = 16 + 2 * pad - (k - 1);
        format!(
            r#"
<ir_version: 8, opset_import: ["" : 13]>
pools (float[1, 8, 16, 1] X) => (float[1, 8, {h}, {h}] Z)
<int64[4] s = {{1, 8, 16, 16}}>
{{
    Q = Expand(X, s)
    P = MaxPool<kernel_shape = [{k}, {k}], strides = [1, 1], pads = [{pad}, {pad}, {pad}, {pad}]>(Q)
    Z = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(P)
}}
"#,
            h = out / 2
        )
    };
    for (k, pad, in_place) in [(7, 3, false), (3, 1, true), (3, 0, true)] {
        let g = graph(&src(k, pad));
        let l = liveness(&g, g.order(), LivenessOptions::full());
        assert_eq!(
            same_buffer(&l, &g, "P", "Q"),
            in_place,
            "{k}x{k} pads {pad}"
        );
    }
}

/// A 1 -> 16 channel 3x3 conv, then a 16 -> 16 one over 576 pixels (weights are graph inputs:
/// not packed, so each scratch also holds the GEMM core's A block). The second conv's step is
/// the peak (its input, output and a 144-row im2col panel).
const TWO_CONVS: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
tiles (float[1, 1, 24, 24] X, float[16, 1, 3, 3] W0, float[16, 16, 3, 3] W1) => (float[1, 16, 24, 24] Y)
{
    A = Conv <pads = [1, 1, 1, 1]> (X, W0)
    Y = Conv <pads = [1, 1, 1, 1]> (A, W1)
}
"#;

#[test]
fn conv_tile_shrinks_only_at_the_peak() {
    use crate::gemm::conv::{CONV_MIN_TILE, conv2d_tile_for_scratch};
    let g = graph(TWO_CONVS);
    let l = liveness(&g, g.order(), LivenessOptions::full());
    let s: Vec<&Buffer> = l
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Scratch)
        .collect();
    assert_eq!(s.len(), 2);
    let a_block = |m, k| crate::gemm::a_scratch_slot(m, k) * 4;
    // Off the peak: the default 256-pixel tile (9 rows). At the peak: the smallest tile.
    let first = crate::gemm::packed_b_len(9, 256) * 4 + a_block(16, 9);
    let second = crate::gemm::packed_b_len(144, CONV_MIN_TILE) * 4 + a_block(16, 144);
    assert_eq!(s[0].interval, Interval::new(0, 1, first));
    assert_eq!(s[1].interval, Interval::new(1, 2, second));
    // The tile the code generator reads back from the planned bytes.
    let params = |i: usize| {
        let node = g.node(g.order()[i]);
        let Op::Conv(a) = &node.op else {
            panic!("a Conv")
        };
        let ty = |v: ValueId| g.value(v).ty.clone();
        crate::ops::conv::scratch_params(a, &ty(node.inputs[0]), &ty(node.outputs[0]), false, 1)
            .expect("2-d")
    };
    assert_eq!(conv2d_tile_for_scratch(&params(0), first), Some(256));
    assert_eq!(
        conv2d_tile_for_scratch(&params(1), second),
        Some(CONV_MIN_TILE)
    );
    // The peak is the second conv's step with that panel, below the default tile's.
    let (bound, at) = lower_bound(&l.intervals(), ALIGN);
    assert_eq!(at, 1);
    let live_at_1 = [("A", 36864), ("Y", 36864), ("W1", 9216)];
    let expected: usize = live_at_1.iter().map(|&(_, b)| b).sum::<usize>() + second;
    assert_eq!(bound, expected);
    for (v, bytes) in live_at_1 {
        assert_eq!(buf(&l, &g, v).interval.size, bytes, "{v}");
    }
}

/// A U-Net-like skip: the encoder feature `E` waits through a wide middle layer until the
/// Concat with the upsampled decoder feature `D`.
const SKIP: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
skip (float[1, 8, 16, 16] X, float[64, 8, 1, 1] W1, float[8, 64, 1, 1] W2, float[8, 8, 2, 2] WT) => (float[1, 16, 16, 16] Y)
{
    E = Relu(X)
    P = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (E)
    M = Conv (P, W1)
    N = Relu(M)
    Z = Conv (N, W2)
    D = ConvTranspose <kernel_shape = [2, 2], strides = [2, 2]> (Z, WT)
    Y = Concat <axis = 1> (D, E)
}
"#;

#[test]
fn concat_choice_is_never_above_its_alternatives() {
    for src in [CONCATS, SKIP] {
        let g = graph(src);
        let opts = LivenessOptions::full();
        let got = lower_bound(&liveness(&g, g.order(), opts).intervals(), ALIGN).0;
        // The alternatives measured with the same scratch and shrinking writes liveness used.
        let cx = decide::Decide {
            g: &g,
            order: g.order(),
            opts,
        };
        let mut d = decide::Decisions::default();
        tiles::smallest(&cx, &mut d);
        let (scratch, shrink) = (d.scratch, HashSet::new());
        let base = build(
            &g,
            g.order(),
            opts,
            &concat::ConcatSlots::default(),
            &shrink,
            &scratch,
            &HashMap::new(),
        );
        let all = concat::ConcatSlots::find(&g, g.order(), true);
        let greedy = all.choose(&g, &base);
        for slots in [&concat::ConcatSlots::default(), &all, &greedy] {
            let l = build(
                &g,
                g.order(),
                opts,
                slots,
                &shrink,
                &scratch,
                &HashMap::new(),
            );
            assert!(got <= peak(&l), "{got} > {}", peak(&l));
        }
    }
}
