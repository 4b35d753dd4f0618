//! Data movement on every element size, 2-byte data first (the f16/bf16 of
//! `--activations`): Transpose over every permutation, Slice/Concat/Split on every axis, the
//! index-table gathers (Pad, Expand, Tile) and runs of every length in bytes (the
//! contiguous-run copy's 64-byte loop, 16-byte vectors and 8/4/2/1-byte tails), each compared
//! bit for bit with the reference evaluation.

use crate::common::*;

/// Element types of 1, 2, 4 and 8 bytes (three of 2 bytes).
const TYPES: [DType; 6] = [
    DType::F16,
    DType::BF16,
    DType::I16,
    DType::U8,
    DType::F32,
    DType::I64,
];

/// A tensor of `dtype` with random bits; floats kept finite (the top exponent bit cleared),
/// so the reference's conversions keep every bit.
fn bits(rng: &mut Rng, dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let size = dtype.size();
    let mut v = Vec::with_capacity(n * size);
    for _ in 0..n {
        let r = rng.next().to_le_bytes();
        let mut e = r[..size].to_vec();
        match dtype {
            // f16: exponent bits 10..=14; bf16: 7..=14; f32: 23..=30. Bit 14 / 30 cleared.
            DType::F16 | DType::BF16 => e[1] &= 0xbf,
            DType::F32 => e[3] &= 0xbf,
            _ => {}
        }
        v.extend_from_slice(&e);
    }
    Tensor::from_bytes(dtype, shape.to_vec(), v.into()).expect("bytes match the type")
}

/// Compiles `model`, runs it on `inputs` and compares every output's bytes with the
/// reference's.
fn exact(model: ModelProto, inputs: &[Tensor], what: &str) {
    let g = import(&model);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).unwrap_or_else(|e| panic!("{what}: compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(&g, inputs).expect("reference");
    assert_eq!(got.len(), want.len(), "{what}");
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.dtype(), b.dtype(), "{what}: output {o} type");
        assert_eq!(a.shape(), b.shape(), "{what}: output {o} shape");
        if let Some(i) = (0..a.bytes().len()).find(|&i| a.bytes()[i] != b.bytes()[i]) {
            panic!("{what}: output {o} differs at byte {i}");
        }
    }
}

fn permutations(n: usize) -> Vec<Vec<i64>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, (n - 1) as i64);
            out.push(q);
        }
    }
    out
}

fn one(name: &str, dt: DType, s: &[usize], op: &str, attrs: Vec<(&str, Attr)>) -> ModelProto {
    ModelBuilder::new(name, 18)
        .input("x", dt, &dims(s))
        .output("y", dt, &[])
        .node(op, op, &["x"], &["y"], attrs)
        .build()
}

#[test]
fn transpose_every_permutation_every_size() {
    let mut rng = Rng(1601);
    for &dt in &TYPES {
        for s in [vec![3usize, 5, 7], vec![2, 3, 5, 9]] {
            for perm in permutations(s.len()) {
                let m = one(
                    "t",
                    dt,
                    &s,
                    "Transpose",
                    vec![("perm", Attr::Ints(perm.clone()))],
                );
                exact(
                    m,
                    &[bits(&mut rng, dt, &s)],
                    &format!("{dt:?} {s:?} {perm:?}"),
                );
            }
        }
        // ShuffleNet's channel shuffle: (N, 2, C/2, H, W) -> (N, C/2, 2, H, W).
        let s = [1usize, 2, 3, 7, 7];
        let perm = vec![0, 2, 1, 3, 4];
        let m = one("t", dt, &s, "Transpose", vec![("perm", Attr::Ints(perm))]);
        exact(m, &[bits(&mut rng, dt, &s)], &format!("{dt:?} shuffle"));
    }
}

#[test]
fn slice_concat_split_every_axis() {
    let mut rng = Rng(1602);
    let s = [4usize, 7, 9];
    for &dt in &TYPES {
        for axis in 0..3 {
            for (start, end, step) in [(1i64, -1i64, 1i64), (0, i64::MAX, 2), (-1, i64::MIN, -2)] {
                let m = ModelBuilder::new("s", 18)
                    .input("x", dt, &dims(&s))
                    .initializer("starts", &Tensor::i64(vec![1], &[start]))
                    .initializer("ends", &Tensor::i64(vec![1], &[end]))
                    .initializer("axes", &Tensor::i64(vec![1], &[axis]))
                    .initializer("steps", &Tensor::i64(vec![1], &[step]))
                    .output("y", dt, &[])
                    .node(
                        "s",
                        "Slice",
                        &["x", "starts", "ends", "axes", "steps"],
                        &["y"],
                        vec![],
                    )
                    .build();
                let what = format!("{dt:?} slice axis {axis} {start}:{end}:{step}");
                exact(m, &[bits(&mut rng, dt, &s)], &what);
            }
            let mut b = s.to_vec();
            b[axis as usize] = 3;
            let m = ModelBuilder::new("c", 18)
                .input("a", dt, &dims(&s))
                .input("b", dt, &dims(&b))
                .initializer(
                    "split",
                    &Tensor::i64(vec![3], &[2, 1, s[axis as usize] as i64]),
                )
                .output("p", dt, &[])
                .output("q", dt, &[])
                .output("r", dt, &[])
                .node(
                    "cat",
                    "Concat",
                    &["a", "b"],
                    &["c"],
                    vec![("axis", Attr::Int(axis))],
                )
                .node(
                    "sp",
                    "Split",
                    &["c", "split"],
                    &["p", "q", "r"],
                    vec![("axis", Attr::Int(axis))],
                )
                .build();
            let ins = [bits(&mut rng, dt, &s), bits(&mut rng, dt, &b)];
            exact(m, &ins, &format!("{dt:?} concat/split axis {axis}"));
        }
    }
}

/// Rows of every length from 1 to 70 elements (2 to 140 bytes on 2-byte data; up to 560 on
/// 8-byte), each a contiguous run between strided rows: every branch of the run copy.
#[test]
fn runs_of_every_length() {
    let mut rng = Rng(1603);
    for &dt in &[DType::F16, DType::U8, DType::F32, DType::I64] {
        for n in 1..=70usize {
            let s = [3usize, n + 2];
            let m = ModelBuilder::new("s", 18)
                .input("x", dt, &dims(&s))
                .initializer("starts", &Tensor::i64(vec![1], &[1]))
                .initializer("ends", &Tensor::i64(vec![1], &[n as i64 + 1]))
                .initializer("axes", &Tensor::i64(vec![1], &[1]))
                .output("y", dt, &[])
                .node(
                    "s",
                    "Slice",
                    &["x", "starts", "ends", "axes"],
                    &["y"],
                    vec![],
                )
                .build();
            exact(m, &[bits(&mut rng, dt, &s)], &format!("{dt:?} run of {n}"));
        }
    }
}

#[test]
fn gathers_pad_expand_tile() {
    let mut rng = Rng(1604);
    for &dt in &TYPES {
        let s = [2usize, 3, 5, 7];
        for mode in ["constant", "edge", "reflect"] {
            let m = ModelBuilder::new("p", 18)
                .input("x", dt, &dims(&s))
                .initializer("pads", &Tensor::i64(vec![8], &[0, 1, 2, 1, 0, 0, 1, 3]))
                .output("y", dt, &[])
                .node(
                    "p",
                    "Pad",
                    &["x", "pads"],
                    &["y"],
                    vec![("mode", Attr::Str(mode.into()))],
                )
                .build();
            exact(m, &[bits(&mut rng, dt, &s)], &format!("{dt:?} pad {mode}"));
        }
        let e = [3usize, 1, 33];
        let m = ModelBuilder::new("e", 18)
            .input("x", dt, &dims(&e))
            .initializer("shape", &Tensor::i64(vec![3], &[3, 5, 33]))
            .output("y", dt, &[])
            .node("e", "Expand", &["x", "shape"], &["y"], vec![])
            .build();
        exact(m, &[bits(&mut rng, dt, &e)], &format!("{dt:?} expand"));
        let m = ModelBuilder::new("t", 18)
            .input("x", dt, &dims(&e))
            .initializer("reps", &Tensor::i64(vec![3], &[2, 3, 2]))
            .output("y", dt, &[])
            .node("t", "Tile", &["x", "reps"], &["y"], vec![])
            .build();
        exact(m, &[bits(&mut rng, dt, &e)], &format!("{dt:?} tile"));
    }
}
