//! Differential tests of the generated code against the reference evaluation
//! (`ir::eval::eval_graph`): tiny models built with `ModelBuilder`, imported, planned,
//! compiled and run inside an aligned arena; plus the demo model against onnxruntime.

use std::path::{Path, PathBuf};

use arenac_compiler::arena::{PlanOptions, plan_arena};
use arenac_compiler::codegen::weights::AlignedBytes;
use arenac_compiler::codegen::{Executable, compile};
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use arenac_compiler::import::{ImportOptions, import_file, import_model};
use arenac_compiler::ir::eval::eval_graph;
use arenac_compiler::ir::graph::Graph;
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;
use arenac_proto::ModelProto;

/// Fixed-seed xorshift.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [lo, hi).
    fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    fn tensor(&mut self, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.f32(lo, hi)).collect();
        Tensor::f32(shape.to_vec(), &v)
    }
}

fn dims(s: &[usize]) -> Vec<Dim> {
    s.iter().map(|&d| Dim::N(d)).collect()
}

/// Runs `exe` on `inputs` in a fresh zeroed 64-aligned arena; returns the outputs.
fn run(exe: &Executable, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    for (slot, t) in exe.inputs().iter().zip(inputs) {
        let b = t.bytes();
        assert!(slot.offset + b.len() <= exe.arena_bytes());
        // SAFETY: the slot lies inside the arena (checked above); no overlap with `b`.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), arena.as_mut_ptr().add(slot.offset), b.len())
        };
    }
    // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, inputs written.
    unsafe { exe.run(arena.as_mut_ptr()) };
    exe.outputs()
        .iter()
        .map(|slot| {
            let n = slot.ty.numel().expect("static");
            let mut v = vec![0.0f32; n];
            assert!(slot.offset + 4 * n <= exe.arena_bytes());
            // SAFETY: the slot lies inside the arena (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    arena.as_ptr().add(slot.offset),
                    v.as_mut_ptr() as *mut u8,
                    4 * n,
                )
            };
            Tensor::f32(slot.ty.shape.clone(), &v)
        })
        .collect()
}

fn import(model: &ModelProto) -> Graph {
    import_model(model, None, &ImportOptions::default())
        .expect("imports")
        .graph
}

/// Compiles `g`, runs it on `inputs`, compares every output with the reference within
/// `atol + rtol * |ref|`. Returns the executable for further checks.
fn check_graph(g: &Graph, inputs: &[Tensor], rtol: f32, atol: f32) -> Executable {
    let plan = plan_arena(g, &PlanOptions::default()).expect("plans");
    let exe = compile(g, &plan).unwrap_or_else(|e| panic!("compiles: {e}"));
    let got = run(&exe, inputs);
    let want = eval_graph(g, inputs).expect("reference");
    assert_eq!(got.len(), want.len());
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.shape(), b.shape(), "output {o} shape");
        let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let ok = (x - y).abs() <= atol + rtol * y.abs() || (x.is_nan() && y.is_nan());
            assert!(ok, "output {o} element {i}: got {x}, want {y}");
        }
    }
    exe
}

fn check(model: ModelProto, inputs: &[Tensor], rtol: f32, atol: f32) -> Executable {
    check_graph(&import(&model), inputs, rtol, atol)
}

const RTOL: f32 = 1e-4;
const ATOL: f32 = 1e-5;

fn unary_model(op: &str, shape: &[usize], attrs: Vec<(&str, Attr)>, opset: i64) -> ModelProto {
    ModelBuilder::new("unary", opset)
        .input("x", DType::F32, &dims(shape))
        .output("y", DType::F32, &dims(shape))
        .node("n", op, &["x"], &["y"], attrs)
        .build()
}

type UnaryCase<'a> = (&'a str, Vec<(&'a str, Attr)>, f32, f32, f32, f32);

#[test]
fn unary_ops() {
    let mut rng = Rng(0x1234_5678);
    let shapes: [&[usize]; 4] = [&[3, 7, 5], &[1], &[4], &[2, 33]];
    let cases: Vec<UnaryCase<'_>> = vec![
        ("Relu", vec![], -5.0, 5.0, RTOL, ATOL),
        (
            "LeakyRelu",
            vec![("alpha", Attr::Float(0.1))],
            -5.0,
            5.0,
            RTOL,
            ATOL,
        ),
        ("Neg", vec![], -5.0, 5.0, RTOL, ATOL),
        ("Abs", vec![], -5.0, 5.0, RTOL, ATOL),
        ("Sqrt", vec![], 0.0, 100.0, RTOL, ATOL),
        ("Reciprocal", vec![], 0.5, 10.0, RTOL, ATOL),
        ("Exp", vec![], -80.0, 80.0, 2e-6, 1e-30),
        ("Exp", vec![], -3.0, 3.0, 2e-6, 0.0),
        ("Sigmoid", vec![], -20.0, 20.0, 2e-6, 1e-9),
        ("Tanh", vec![], -10.0, 10.0, 2e-6, 1e-9),
        ("Tanh", vec![], -0.7, 0.7, 2e-6, 1e-9),
        ("Erf", vec![], -4.0, 4.0, RTOL, 1e-6),
        (
            "HardSigmoid",
            vec![("alpha", Attr::Float(0.3))],
            -5.0,
            5.0,
            RTOL,
            ATOL,
        ),
        ("HardSwish", vec![], -5.0, 5.0, RTOL, ATOL),
    ];
    for (op, attrs, lo, hi, rtol, atol) in cases {
        for s in shapes {
            let x = rng.tensor(s, lo, hi);
            check(unary_model(op, s, attrs.clone(), 14), &[x], rtol, atol);
        }
    }
    for approx in ["none", "tanh"] {
        let s = [3, 11];
        let attrs = vec![("approximate", Attr::Str(approx.into()))];
        let x = rng.tensor(&s, -5.0, 5.0);
        check(unary_model("Gelu", &s, attrs, 20), &[x], RTOL, ATOL);
    }
}

#[test]
fn where_with_broadcasting() {
    let mut rng = Rng(66);
    let m = ModelBuilder::new("w", 13)
        .input("c", DType::Bool, &dims(&[2, 1, 4]))
        .input("x", DType::F32, &dims(&[3, 4]))
        .initializer("y", &Tensor::f32(vec![], &[-7.5]))
        .output("out", DType::F32, &dims(&[2, 3, 4]))
        .node("w", "Where", &["c", "x", "y"], &["out"], vec![])
        .build();
    let bits: Vec<u8> = (0..8)
        .map(|i| u8::from(rng.next().is_multiple_of(3) || i == 1))
        .collect();
    let c = Tensor::from_bytes(DType::Bool, vec![2, 1, 4], bits.into()).expect("bool tensor");
    check(m, &[c, rng.tensor(&[3, 4], -1.0, 1.0)], 0.0, 0.0);
}

#[test]
fn clip_with_bounds() {
    let mut rng = Rng(7);
    for (min, max) in [
        (Some(-1.0f32), Some(2.0f32)),
        (Some(0.0), None),
        (None, Some(0.5)),
    ] {
        let mut b = ModelBuilder::new("clip", 13).input("x", DType::F32, &dims(&[5, 6]));
        let mut ins = vec!["x"];
        match min {
            Some(v) => {
                b = b.initializer("lo", &Tensor::f32(vec![], &[v]));
                ins.push("lo");
            }
            None => ins.push(""),
        }
        if let Some(v) = max {
            b = b.initializer("hi", &Tensor::f32(vec![], &[v]));
            ins.push("hi");
        }
        let m = b
            .output("y", DType::F32, &dims(&[5, 6]))
            .node("clip", "Clip", &ins, &["y"], vec![])
            .build();
        check(m, &[rng.tensor(&[5, 6], -3.0, 3.0)], RTOL, ATOL);
    }
}

fn binary_model(op: &str, a: &[usize], b: &[usize], out: &[usize]) -> ModelProto {
    ModelBuilder::new("binary", 13)
        .input("a", DType::F32, &dims(a))
        .input("b", DType::F32, &dims(b))
        .output("y", DType::F32, &dims(out))
        .node("n", op, &["a", "b"], &["y"], vec![])
        .build()
}

type Shapes3<'a> = (&'a [usize], &'a [usize], &'a [usize]);

#[test]
fn binary_broadcasting() {
    let mut rng = Rng(99);
    let cases: [Shapes3<'_>; 8] = [
        (&[2, 1, 3], &[4, 1], &[2, 4, 3]),
        (&[3, 5], &[], &[3, 5]),
        (&[], &[3, 5], &[3, 5]),
        (&[2, 3, 4, 5], &[3, 1, 5], &[2, 3, 4, 5]),
        (&[17], &[17], &[17]),
        (&[1, 9], &[7, 1], &[7, 9]),
        (&[2, 3, 8], &[2, 3, 8], &[2, 3, 8]),
        (&[4, 1, 6], &[1, 5, 1], &[4, 5, 6]),
    ];
    for op in ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"] {
        for (a, b, out) in cases {
            if op == "PRelu" && out != a {
                continue;
            }
            let x = rng.tensor(a, -4.0, 4.0);
            let y = rng.tensor(b, 0.5, 4.0);
            check(binary_model(op, a, b, out), &[x, y], RTOL, ATOL);
        }
    }
}

#[test]
fn binary_with_constant_operand() {
    let mut rng = Rng(5);
    let c = rng.tensor(&[6], -1.0, 1.0);
    let m = ModelBuilder::new("bias", 13)
        .input("x", DType::F32, &dims(&[3, 6]))
        .initializer("c", &c)
        .output("y", DType::F32, &dims(&[3, 6]))
        .node("add", "Add", &["x", "c"], &["y"], vec![])
        .build();
    check(m, &[rng.tensor(&[3, 6], -1.0, 1.0)], RTOL, ATOL);
}

#[test]
fn in_place_chain() {
    // Relu and the second Add write into their dead operands' buffers.
    let mut rng = Rng(11);
    let s = [4, 10];
    let m = ModelBuilder::new("inplace", 13)
        .input("x", DType::F32, &dims(&s))
        .input("y", DType::F32, &dims(&s))
        .input("z", DType::F32, &dims(&s))
        .output("out", DType::F32, &dims(&s))
        .node("add1", "Add", &["x", "y"], &["t"], vec![])
        .node("relu", "Relu", &["t"], &["r"], vec![])
        .node("add2", "Add", &["r", "z"], &["u"], vec![])
        .node("relu2", "Relu", &["u"], &["out"], vec![])
        .build();
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    assert!(
        !plan.liveness.alias_of.is_empty(),
        "the plan writes something in place"
    );
    let ins: Vec<Tensor> = (0..3).map(|_| rng.tensor(&s, -2.0, 2.0)).collect();
    let exe = check_graph(&g, &ins, RTOL, ATOL);
    // Relu and Add kernels are shared between the two layers.
    assert_eq!(exe.kernel_count(), 2);
}

struct GemmCase {
    a: Vec<usize>,
    b: Vec<usize>,
    c: Option<Vec<usize>>,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
    b_const: bool,
    c_const: bool,
}

fn gemm_case(rng: &mut Rng, c: &GemmCase) {
    let (m, n) = (
        if c.trans_a { c.a[1] } else { c.a[0] },
        if c.trans_b { c.b[0] } else { c.b[1] },
    );
    let mut mb = ModelBuilder::new("gemm", 13).input("a", DType::F32, &dims(&c.a));
    let mut inputs = vec![rng.tensor(&c.a, -1.0, 1.0)];
    let bt = rng.tensor(&c.b, -1.0, 1.0);
    if c.b_const {
        mb = mb.initializer("b", &bt);
    } else {
        mb = mb.input("b", DType::F32, &dims(&c.b));
        inputs.push(bt);
    }
    let mut names = vec!["a", "b"];
    if let Some(cs) = &c.c {
        let ct = rng.tensor(cs, -1.0, 1.0);
        if c.c_const {
            mb = mb.initializer("c", &ct);
        } else {
            mb = mb.input("c", DType::F32, &dims(cs));
            inputs.push(ct);
        }
        names.push("c");
    }
    let model = mb
        .output("y", DType::F32, &dims(&[m, n]))
        .node(
            "gemm",
            "Gemm",
            &names,
            &["y"],
            vec![
                ("transA", Attr::Int(c.trans_a.into())),
                ("transB", Attr::Int(c.trans_b.into())),
                ("alpha", Attr::Float(c.alpha)),
                ("beta", Attr::Float(c.beta)),
            ],
        )
        .build();
    check(model, &inputs, RTOL, ATOL);
}

#[test]
fn gemm_variants() {
    let mut rng = Rng(2024);
    let (m, k, n) = (5, 7, 9);
    let biases: [Option<Vec<usize>>; 6] = [
        None,
        Some(vec![n]),
        Some(vec![1, n]),
        Some(vec![m, 1]),
        Some(vec![m, n]),
        Some(vec![]),
    ];
    for trans_a in [false, true] {
        for trans_b in [false, true] {
            for (i, c) in biases.iter().enumerate() {
                for b_const in [true, false] {
                    let alpha = if b_const { 0.5 + i as f32 * 0.25 } else { 1.0 };
                    gemm_case(
                        &mut rng,
                        &GemmCase {
                            a: if trans_a { vec![k, m] } else { vec![m, k] },
                            b: if trans_b { vec![n, k] } else { vec![k, n] },
                            c: c.clone(),
                            trans_a,
                            trans_b,
                            alpha,
                            beta: if i % 2 == 0 { 1.0 } else { -0.75 },
                            b_const,
                            c_const: i % 3 != 1,
                        },
                    );
                }
            }
        }
    }
}

#[test]
fn gemm_alpha_with_runtime_b_is_an_error() {
    let m = ModelBuilder::new("gemm", 13)
        .input("a", DType::F32, &dims(&[2, 3]))
        .input("b", DType::F32, &dims(&[3, 4]))
        .output("y", DType::F32, &dims(&[2, 4]))
        .node(
            "g",
            "Gemm",
            &["a", "b"],
            &["y"],
            vec![("alpha", Attr::Float(2.0))],
        )
        .build();
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let err = compile(&g, &plan).expect_err("unsupported");
    assert!(err.to_string().contains("node 'g'"), "{err}");
}

fn matmul_case(rng: &mut Rng, a: &[usize], b: &[usize], out: &[usize], b_const: bool) {
    let bt = rng.tensor(b, -1.0, 1.0);
    let mut mb = ModelBuilder::new("mm", 13).input("a", DType::F32, &dims(a));
    let mut inputs = vec![rng.tensor(a, -1.0, 1.0)];
    if b_const {
        mb = mb.initializer("b", &bt);
    } else {
        mb = mb.input("b", DType::F32, &dims(b));
        inputs.push(bt);
    }
    let model = mb
        .output("y", DType::F32, &dims(out))
        .node("mm", "MatMul", &["a", "b"], &["y"], vec![])
        .build();
    check(model, &inputs, RTOL, ATOL);
}

#[test]
fn matmul_batched_and_broadcast() {
    let mut rng = Rng(77);
    let cases: [Shapes3<'_>; 8] = [
        (&[2, 3, 4, 5], &[3, 5, 6], &[2, 3, 4, 6]),
        (&[4, 5], &[2, 5, 3], &[2, 4, 3]),
        (&[2, 3, 4], &[4, 6], &[2, 3, 6]),
        (&[5], &[5, 3], &[3]),
        (&[2, 4, 5], &[5], &[2, 4]),
        (&[3, 1, 4, 5], &[2, 5, 7], &[3, 2, 4, 7]),
        (&[1, 4, 5], &[3, 5, 2], &[3, 4, 2]),
        (&[6, 8], &[8, 10], &[6, 10]),
    ];
    for (a, b, out) in cases {
        for b_const in [false, true] {
            matmul_case(&mut rng, a, b, out, b_const);
        }
    }
}

fn softmax_model(op: &str, shape: &[usize], axis: i64, opset: i64) -> ModelProto {
    ModelBuilder::new("softmax", opset)
        .input("x", DType::F32, &dims(shape))
        .output("y", DType::F32, &dims(shape))
        .node("sm", op, &["x"], &["y"], vec![("axis", Attr::Int(axis))])
        .build()
}

#[test]
fn softmax_axes() {
    let mut rng = Rng(31337);
    let cases: [(&[usize], i64); 7] = [
        (&[3, 10], -1),
        (&[2, 3, 4], 1),
        (&[2, 6, 5], 1),
        (&[2, 3, 9], 2),
        (&[4, 3], 0),
        (&[2, 2, 3, 4], 1),
        (&[7], 0),
    ];
    for op in ["Softmax", "LogSoftmax"] {
        for opset in [11, 13] {
            for (s, axis) in cases {
                let x = rng.tensor(s, -8.0, 8.0);
                check(softmax_model(op, s, axis, opset), &[x], 1e-5, 1e-6);
            }
        }
    }
}

#[test]
fn batch_normalization() {
    let mut rng = Rng(4242);
    let s = [2, 3, 4, 5];
    let m = ModelBuilder::new("bn", 15)
        .input("x", DType::F32, &dims(&s))
        .initializer("scale", &rng.tensor(&[3], 0.5, 2.0))
        .initializer("bias", &rng.tensor(&[3], -1.0, 1.0))
        .initializer("mean", &rng.tensor(&[3], -1.0, 1.0))
        .initializer("var", &rng.tensor(&[3], 0.5, 2.0))
        .output("y", DType::F32, &dims(&s))
        .node(
            "bn",
            "BatchNormalization",
            &["x", "scale", "bias", "mean", "var"],
            &["y"],
            vec![("epsilon", Attr::Float(1e-5))],
        )
        .build();
    check(m, &[rng.tensor(&s, -3.0, 3.0)], RTOL, ATOL);
}

#[test]
fn views_of_inputs() {
    let mut rng = Rng(8);
    let m = ModelBuilder::new("views", 13)
        .input("x", DType::F32, &dims(&[3, 4]))
        .initializer("shape", &Tensor::i64(vec![2], &[4, 3]))
        .output("y", DType::F32, &dims(&[12]))
        .node("r", "Reshape", &["x", "shape"], &["xr"], vec![])
        .node("relu", "Relu", &["xr"], &["yr"], vec![])
        .node(
            "f",
            "Flatten",
            &["yr"],
            &["yf"],
            vec![("axis", Attr::Int(0))],
        )
        .node("s", "Squeeze", &["yf"], &["y"], vec![])
        .build();
    check(m, &[rng.tensor(&[3, 4], -1.0, 1.0)], RTOL, ATOL);
}

#[test]
fn pow_with_constant_exponents() {
    let mut rng = Rng(9090);
    for e in [2.0f32, 0.5, 1.0, -1.0] {
        let m = ModelBuilder::new("pow", 13)
            .input("x", DType::F32, &dims(&[3, 7]))
            .initializer("e", &Tensor::f32(vec![], &[e]))
            .output("y", DType::F32, &dims(&[3, 7]))
            .node("p", "Pow", &["x", "e"], &["y"], vec![])
            .build();
        check(m, &[rng.tensor(&[3, 7], 0.5, 3.0)], RTOL, ATOL);
    }
}

#[test]
fn unsupported_op_is_an_error() {
    let m = ModelBuilder::new("pow", 13)
        .input("a", DType::F32, &dims(&[2, 3]))
        .input("b", DType::F32, &dims(&[2, 3]))
        .output("y", DType::F32, &dims(&[2, 3]))
        .node("p", "Pow", &["a", "b"], &["y"], vec![])
        .build();
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let err = compile(&g, &plan).expect_err("no Pow kernel");
    let text = err.to_string();
    assert!(
        text.contains("node 'p' (Pow)") && text.contains("no kernel"),
        "{text}"
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// A minimal `.npy` reader for little-endian f32 arrays: shape and data.
fn read_npy_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).expect("reads .npy");
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (hlen, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + hlen]).expect("utf8 header");
    assert!(header.contains("'<f4'"), "f32 only: {header}");
    assert!(header.contains("'fortran_order': False"));
    let s = &header[header.find("'shape': (").expect("shape") + 10..];
    let shape: Vec<usize> = s[..s.find(')').expect("shape end")]
        .split(',')
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim().parse().expect("dim"))
        .collect();
    let data = bytes[start + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (shape, data)
}

#[test]
fn digits_matches_reference_and_onnxruntime() {
    let dir = repo_root().join("models").join("digits");
    let opts = ImportOptions {
        shapes: vec![("N".into(), vec![100])],
        ..ImportOptions::default()
    };
    let g = import_file(&dir.join("digits.onnx"), &opts)
        .expect("imports")
        .graph;
    let (shape, samples) = read_npy_f32(&dir.join("samples.npy"));
    assert_eq!(shape, vec![100, 64]);
    let x = Tensor::f32(shape, &samples);
    let exe = check_graph(&g, std::slice::from_ref(&x), RTOL, ATOL);
    println!(
        "digits: compiled in {:?} ({} kernels, {} B weights, {} B arena)",
        exe.compile_time(),
        exe.kernel_count(),
        exe.weights_bytes(),
        exe.arena_bytes()
    );
    let got = run(&exe, &[x]);
    let (eshape, expected) = read_npy_f32(&dir.join("expected_probs.npy"));
    assert_eq!(got[0].shape(), &eshape[..]);
    let max = got[0]
        .to_f32_vec()
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("digits: max |jit - onnxruntime| = {max:.2e}");
    assert!(max <= 1e-5, "max difference {max}");
}

struct ConvCase {
    x: Vec<usize>,
    w: Vec<usize>,
    y: Vec<usize>,
    attrs: Vec<(&'static str, Attr)>,
    bias: bool,
}

#[test]
fn conv_variants() {
    let mut rng = Rng(1999);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let cases = vec![
        ConvCase {
            x: vec![1, 3, 7, 7],
            w: vec![8, 3, 3, 3],
            y: vec![1, 8, 7, 7],
            attrs: vec![("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        ConvCase {
            x: vec![2, 4, 9, 8],
            w: vec![6, 4, 3, 2],
            y: vec![2, 6, 4, 4],
            attrs: vec![("strides", ints(&[2, 2])), ("pads", ints(&[1, 0, 0, 1]))],
            bias: false,
        },
        ConvCase {
            x: vec![1, 6, 8, 8],
            w: vec![6, 1, 3, 3],
            y: vec![1, 6, 8, 8],
            attrs: vec![("group", Attr::Int(6)), ("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        ConvCase {
            x: vec![1, 4, 10, 10],
            w: vec![10, 2, 3, 3],
            y: vec![1, 10, 6, 6],
            attrs: vec![("group", Attr::Int(2)), ("dilations", ints(&[2, 2]))],
            bias: true,
        },
        ConvCase {
            x: vec![1, 5, 6, 6],
            w: vec![7, 5, 1, 1],
            y: vec![1, 7, 6, 6],
            attrs: vec![],
            bias: true,
        },
        // Depthwise, stride 2, padding, 20 x 20 = 400 output pixels per image (two tiles).
        ConvCase {
            x: vec![2, 8, 39, 39],
            w: vec![8, 1, 3, 3],
            y: vec![2, 8, 20, 20],
            attrs: vec![
                ("group", Attr::Int(8)),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
            bias: false,
        },
        // Depthwise at stride 1 over 17 x 19 = 323 pixels: two tiles, a partial last panel.
        ConvCase {
            x: vec![1, 4, 17, 19],
            w: vec![4, 1, 3, 3],
            y: vec![1, 4, 17, 19],
            attrs: vec![("group", Attr::Int(4)), ("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        // K = 48 * 9 = 432 > KC, M = 100 > MC, 324 output pixels (two tiles).
        ConvCase {
            x: vec![1, 48, 18, 18],
            w: vec![100, 48, 3, 3],
            y: vec![1, 100, 18, 18],
            attrs: vec![("pads", ints(&[1, 1, 1, 1]))],
            bias: true,
        },
        // Groups, stride 2, dilation 2, asymmetric kernel and pads, no bias, 3 tiles.
        ConvCase {
            x: vec![2, 6, 50, 47],
            w: vec![9, 2, 3, 2],
            y: vec![2, 9, 25, 24],
            attrs: vec![
                ("group", Attr::Int(3)),
                ("strides", ints(&[2, 2])),
                ("dilations", ints(&[2, 2])),
                ("pads", ints(&[2, 1, 1, 1])),
            ],
            bias: false,
        },
        // 1x1 stride 2 (no padding), 33 x 33 = 1089 pixels: five tiles.
        ConvCase {
            x: vec![1, 5, 65, 65],
            w: vec![7, 5, 1, 1],
            y: vec![1, 7, 33, 33],
            attrs: vec![("strides", ints(&[2, 2]))],
            bias: true,
        },
        ConvCase {
            x: vec![2, 3, 12],
            w: vec![5, 3, 3],
            y: vec![2, 5, 6],
            attrs: vec![("strides", ints(&[2])), ("pads", ints(&[1, 1]))],
            bias: true,
        },
    ];
    for c in cases {
        let mut mb = ModelBuilder::new("conv", 13)
            .input("x", DType::F32, &dims(&c.x))
            .initializer("w", &rng.tensor(&c.w, -1.0, 1.0));
        let mut ins = vec!["x", "w"];
        if c.bias {
            mb = mb.initializer("b", &rng.tensor(&[c.w[0]], -1.0, 1.0));
            ins.push("b");
        }
        let model = mb
            .output("y", DType::F32, &dims(&c.y))
            .node("conv", "Conv", &ins, &["y"], c.attrs)
            .build();
        check(model, &[rng.tensor(&c.x, -1.0, 1.0)], RTOL, ATOL);
    }
}

#[test]
fn pooling() {
    let mut rng = Rng(606);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    type PoolCase = (Vec<usize>, Vec<usize>, Vec<(&'static str, Attr)>);
    let cases: Vec<PoolCase> = vec![
        (
            vec![1, 3, 8, 8],
            vec![1, 3, 4, 4],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        ),
        (
            vec![2, 4, 9, 9],
            vec![2, 4, 5, 5],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&[1, 1, 1, 1])),
            ],
        ),
        (
            vec![1, 2, 7, 7],
            vec![1, 2, 3, 3],
            vec![
                ("kernel_shape", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("ceil_mode", Attr::Int(0)),
            ],
        ),
    ];
    for (x, y, attrs) in cases {
        let model = ModelBuilder::new("pool", 13)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node("p", "MaxPool", &["x"], &["y"], attrs)
            .build();
        check(model, &[rng.tensor(&x, -5.0, 5.0)], RTOL, ATOL);
    }
    for (include, ceil) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let (x, y) = (
            vec![1, 3, 9, 8],
            vec![1, 3, 4 + ceil as usize, 4 + ceil as usize],
        );
        let model = ModelBuilder::new("avg", 13)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node(
                "p",
                "AveragePool",
                &["x"],
                &["y"],
                vec![
                    ("kernel_shape", ints(&[3, 2])),
                    ("strides", ints(&[2, 2])),
                    ("pads", ints(&[1, 1, 0, 0])),
                    ("count_include_pad", Attr::Int(include)),
                    ("ceil_mode", Attr::Int(ceil)),
                ],
            )
            .build();
        check(model, &[rng.tensor(&x, -5.0, 5.0)], RTOL, ATOL);
    }
    for x in [vec![2, 3, 5, 7], vec![1, 4, 2, 2], vec![1, 2, 9]] {
        let mut y = x.clone();
        y[2..].iter_mut().for_each(|d| *d = 1);
        let model = ModelBuilder::new("gap", 13)
            .input("x", DType::F32, &dims(&x))
            .output("y", DType::F32, &dims(&y))
            .node("p", "GlobalAveragePool", &["x"], &["y"], vec![])
            .build();
        check(model, &[rng.tensor(&x, -5.0, 5.0)], RTOL, ATOL);
    }
}

#[test]
fn movement_ops() {
    let mut rng = Rng(123);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    // Transpose.
    for (s, perm, out) in [
        (vec![2, 3, 4], vec![2, 0, 1], vec![4, 2, 3]),
        (vec![5, 8], vec![1, 0], vec![8, 5]),
        (vec![2, 3, 4, 5], vec![0, 2, 1, 3], vec![2, 4, 3, 5]),
    ] {
        let m = ModelBuilder::new("t", 13)
            .input("x", DType::F32, &dims(&s))
            .output("y", DType::F32, &dims(&out))
            .node(
                "t",
                "Transpose",
                &["x"],
                &["y"],
                vec![("perm", ints(&perm))],
            )
            .build();
        check(m, &[rng.tensor(&s, -1.0, 1.0)], 0.0, 0.0);
    }
    // Slice with a negative step.
    let m = ModelBuilder::new("s", 13)
        .input("x", DType::F32, &dims(&[6, 10]))
        .initializer("starts", &Tensor::i64(vec![2], &[1, 9]))
        .initializer("ends", &Tensor::i64(vec![2], &[5, 0]))
        .initializer("axes", &Tensor::i64(vec![2], &[0, 1]))
        .initializer("steps", &Tensor::i64(vec![2], &[2, -2]))
        .output("y", DType::F32, &dims(&[2, 5]))
        .node(
            "s",
            "Slice",
            &["x", "starts", "ends", "axes", "steps"],
            &["y"],
            vec![],
        )
        .build();
    check(m, &[rng.tensor(&[6, 10], -1.0, 1.0)], 0.0, 0.0);
    // Concat with a constant operand, then Split.
    let c = rng.tensor(&[2, 1, 5], -1.0, 1.0);
    let m = ModelBuilder::new("c", 13)
        .input("a", DType::F32, &dims(&[2, 3, 5]))
        .input("b", DType::F32, &dims(&[2, 2, 5]))
        .initializer("c", &c)
        .initializer("split", &Tensor::i64(vec![2], &[4, 2]))
        .output("p", DType::F32, &dims(&[2, 4, 5]))
        .output("q", DType::F32, &dims(&[2, 2, 5]))
        .node(
            "cat",
            "Concat",
            &["a", "b", "c"],
            &["y"],
            vec![("axis", Attr::Int(1))],
        )
        .node(
            "sp",
            "Split",
            &["y", "split"],
            &["p", "q"],
            vec![("axis", Attr::Int(1))],
        )
        .build();
    let ins = [
        rng.tensor(&[2, 3, 5], -1.0, 1.0),
        rng.tensor(&[2, 2, 5], -1.0, 1.0),
    ];
    check(m, &ins, 0.0, 0.0);
}

#[test]
fn reductions_and_layer_norm() {
    let mut rng = Rng(321);
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    for op in ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"] {
        for (s, axes, keep, out) in [
            (vec![2, 3, 4, 5], vec![2, 3], 1, vec![2, 3, 1, 1]),
            (vec![2, 3, 4], vec![1], 0, vec![2, 4]),
            (vec![3, 7], vec![0, 1], 0, vec![]),
        ] {
            let m = ModelBuilder::new("r", 13)
                .input("x", DType::F32, &dims(&s))
                .output("y", DType::F32, &dims(&out))
                .node(
                    "r",
                    op,
                    &["x"],
                    &["y"],
                    vec![("axes", ints(&axes)), ("keepdims", Attr::Int(keep))],
                )
                .build();
            check(m, &[rng.tensor(&s, -2.0, 2.0)], RTOL, ATOL);
        }
    }
    for (s, axis, bias) in [
        (vec![4, 10], -1, true),
        (vec![2, 3, 7], 1, false),
        (vec![2, 3], -1, true),
    ] {
        let ax = if axis < 0 { s.len() - 1 } else { axis as usize };
        let ps: Vec<usize> = s[ax..].to_vec();
        let mut mb = ModelBuilder::new("ln", 17)
            .input("x", DType::F32, &dims(&s))
            .initializer("g", &rng.tensor(&ps, 0.5, 1.5));
        let mut ins = vec!["x", "g"];
        if bias {
            mb = mb.initializer("b", &rng.tensor(&ps, -1.0, 1.0));
            ins.push("b");
        }
        let m = mb
            .output("y", DType::F32, &dims(&s))
            .node(
                "ln",
                "LayerNormalization",
                &ins,
                &["y"],
                vec![("axis", Attr::Int(axis)), ("epsilon", Attr::Float(1e-5))],
            )
            .build();
        check(m, &[rng.tensor(&s, -2.0, 2.0)], RTOL, ATOL);
    }
}

#[test]
fn gather_embeddings_and_axis() {
    let mut rng = Rng(55);
    // Embedding lookup: constant table, runtime i64 indices (one negative).
    let table = rng.tensor(&[10, 6], -1.0, 1.0);
    let m = ModelBuilder::new("g", 13)
        .input("ids", DType::I64, &dims(&[2, 3]))
        .initializer("table", &table)
        .output("y", DType::F32, &dims(&[2, 3, 6]))
        .node("g", "Gather", &["table", "ids"], &["y"], vec![])
        .build();
    let ids = Tensor::i64(vec![2, 3], &[0, 9, -1, 4, 4, 2]);
    let g = import(&m);
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    let exe = compile(&g, &plan).expect("compiles");
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    let slot = &exe.inputs()[0];
    // SAFETY: the slot lies inside the arena (planned for this input's 48 bytes).
    unsafe {
        std::ptr::copy_nonoverlapping(
            ids.bytes().as_ptr(),
            arena.as_mut_ptr().add(slot.offset),
            48,
        )
    };
    // SAFETY: aligned, sized arena with the input written.
    unsafe { exe.run(arena.as_mut_ptr()) };
    let out = &exe.outputs()[0];
    // SAFETY: the output slot holds 36 floats inside the arena.
    let got: &[f32] =
        unsafe { std::slice::from_raw_parts(arena.as_ptr().add(out.offset) as *const f32, 36) };
    let want = eval_graph(&g, &[ids]).expect("reference")[0].to_f32_vec();
    assert_eq!(got, &want[..]);
    // Runtime data, constant indices, inner axis.
    let m = ModelBuilder::new("g2", 13)
        .input("x", DType::F32, &dims(&[3, 5, 4]))
        .initializer("i", &Tensor::i64(vec![2], &[4, 0]))
        .output("y", DType::F32, &dims(&[3, 2, 4]))
        .node(
            "g",
            "Gather",
            &["x", "i"],
            &["y"],
            vec![("axis", Attr::Int(1))],
        )
        .build();
    check(m, &[rng.tensor(&[3, 5, 4], -1.0, 1.0)], 0.0, 0.0);
}

/// Every `.onnx` in `$ARENAC_CODEGEN_MODELS` (when set): compile, run on deterministic inputs,
/// compare with the reference (within 1e-4 relative to the output's largest magnitude).
/// Prints compile and run times.
#[test]
fn models_from_env_dir() {
    let Some(dir) = std::env::var_os("ARENAC_CODEGEN_MODELS") else {
        println!("ARENAC_CODEGEN_MODELS not set: skipped");
        return;
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reads the models folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    paths.sort();
    for path in paths {
        let g = import_file(&path, &ImportOptions::default())
            .expect("imports")
            .graph;
        let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
        let exe = match compile(&g, &plan) {
            Ok(e) => e,
            Err(e) => {
                println!("{}: {e}", path.display());
                continue;
            }
        };
        let inputs: Vec<Tensor> = g
            .inputs
            .iter()
            .map(|&v| {
                let ty = &g.value(v).ty;
                let n = ty.numel().expect("static");
                if ty.dtype == DType::I64 {
                    let ids: Vec<i64> = (0..n as i64).map(|i| i % 7).collect();
                    Tensor::i64(ty.shape.clone(), &ids)
                } else {
                    let v: Vec<f32> = (0..n)
                        .map(|i| (i * 7919 % 1000) as f32 / 500.0 - 1.0)
                        .collect();
                    Tensor::f32(ty.shape.clone(), &v)
                }
            })
            .collect();
        let started = std::time::Instant::now();
        let got = run(&exe, &inputs);
        let run_time = started.elapsed();
        let want = eval_graph(&g, &inputs).expect("reference");
        for (a, b) in got.iter().zip(&want) {
            let (a, b) = (a.to_f32_vec(), b.to_f32_vec());
            let scale = b.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
            let diff = a
                .iter()
                .zip(&b)
                .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
            println!(
                "{}: compile {:?} ({} kernels), run {run_time:?}, max diff {diff:.2e} (max |ref| {scale:.3})",
                path.display(),
                exe.compile_time(),
                exe.kernel_count()
            );
            assert!(diff <= 1e-4 * scale, "{}: max diff {diff}", path.display());
        }
    }
}

#[test]
fn variadic_many_inputs() {
    let mut rng = Rng(747);
    for op in ["Sum", "Mean", "Max", "Min"] {
        let m = ModelBuilder::new("v", 13)
            .input("a", DType::F32, &dims(&[2, 3, 4]))
            .input("b", DType::F32, &dims(&[3, 1]))
            .input("c", DType::F32, &dims(&[4]))
            .input("d", DType::F32, &dims(&[2, 3, 4]))
            .output("y", DType::F32, &dims(&[2, 3, 4]))
            .node("neg", "Neg", &["d"], &["nd"], vec![])
            .node("v", op, &["b", "nd", "c", "a"], &["y"], vec![])
            .build();
        let ins = [
            rng.tensor(&[2, 3, 4], -1.0, 1.0),
            rng.tensor(&[3, 1], -1.0, 1.0),
            rng.tensor(&[4], -1.0, 1.0),
            rng.tensor(&[2, 3, 4], -1.0, 1.0),
        ];
        check(m, &ins, RTOL, ATOL);
    }
}
