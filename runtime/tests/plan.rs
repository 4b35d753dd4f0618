//! `arenac plan` and the memory budget: the JSON schema, the SVG, limits and their errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use arenac::{CompileOptions, Error, Fit, MemoryLimit, MemoryLimitSpec, compile_file};
use arenac_compiler::import::builder::{Dim, ModelBuilder};
use arenac_compiler::ir::types::DType;
use prost::Message;
use serde_json::Value;

fn digits() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/digits/digits.onnx")
}

fn arenac(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_arenac"))
        .args(args)
        .output()
        .expect("run arenac");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn field(v: &Value, name: &str) -> u64 {
    v[name]
        .as_u64()
        .unwrap_or_else(|| panic!("field {name} missing or not an integer: {v}"))
}

#[test]
fn json_report_has_the_schema() {
    let path = digits();
    let (code, out, err) = arenac(&["plan", path.to_str().unwrap(), "--shape", "N=8", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    for f in [
        "arena_bytes",
        "lower_bound_bytes",
        "naive_bytes",
        "weights_bytes",
        "layer_wise_bound_bytes",
        "peak_step",
        "steps",
        "arena_buffers",
    ] {
        field(&v, f);
    }
    assert!(v["strategy"].is_string());
    assert!(v["efficiency"].is_f64());
    let arena = field(&v, "arena_bytes");
    assert!(arena >= field(&v, "lower_bound_bytes"));
    assert!(field(&v, "naive_bytes") >= field(&v, "layer_wise_bound_bytes"));
    // The digits MLP: 8x64 f32 pixels in, three Gemm layers, weights 26,280 bytes.
    assert_eq!(field(&v, "weights_bytes"), 26_280);
    let buffers = v["buffers"].as_array().expect("buffers array");
    assert!(!buffers.is_empty());
    let names: Vec<&str> = buffers
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pixels") && names.contains(&"probs"),
        "{names:?}"
    );
    let mut last_first = 0;
    for b in buffers {
        let (bytes, offset) = (field(b, "bytes"), field(b, "offset"));
        assert!(offset + bytes <= arena, "{b}");
        assert!(field(b, "first_step") <= field(b, "last_step"), "{b}");
        assert!(field(b, "first_step") >= last_first, "sorted by first step");
        last_first = field(b, "first_step");
        assert!(
            ["input", "output", "intermediate", "scratch"].contains(&b["kind"].as_str().unwrap()),
            "{b}"
        );
        match &b["alias_of"] {
            Value::Null => {}
            Value::String(root) => {
                let r = buffers
                    .iter()
                    .find(|x| x["name"] == root.as_str())
                    .expect("alias_of names an entry");
                assert_eq!(r["offset"], b["offset"], "an alias has its root's offset");
            }
            other => panic!("alias_of is {other}"),
        }
    }
}

#[test]
fn text_report_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("arena.svg");
    let path = digits();
    let (code, out, err) = arenac(&[
        "plan",
        path.to_str().unwrap(),
        "--shape",
        "N=4",
        "--keep-order",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "arena",
        "lower bound",
        "naive sum",
        "layer-wise bound",
        "efficiency",
        "weights",
        "peak",
        "strategy",
        "planning time",
        "alias of",
        "pixels",
        "file order kept",
    ] {
        assert!(out.contains(needle), "{needle} missing:\n{out}");
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..40.min(text.len())]);
    assert!(text.trim_end().ends_with("</svg>"));
    let model = compile_file(
        &path,
        &CompileOptions {
            keep_file_order: true,
            ..CompileOptions::default().without_codegen()
        }
        .with_shape("N", vec![4]),
    )
    .unwrap();
    assert_eq!(
        text.matches("<rect").count(),
        model.plan().liveness.buffers.len()
    );
    assert!(text.contains("<title>pixels"));
    assert!(text.contains("peak: step"));
}

#[test]
fn compile_prints_the_arena_line() {
    let path = digits();
    let (code, out, err) = arenac(&["compile", path.to_str().unwrap(), "--shape", "N=2"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("arena:") && l.contains("lower bound")),
        "{out}"
    );
}

#[test]
fn memory_limit_specs() {
    let p = |s: &str| s.parse::<MemoryLimitSpec>().map(|m| m.limit);
    assert_eq!(p("64MiB").unwrap(), MemoryLimit::Bytes(64 << 20));
    assert_eq!(p("1.5GiB").unwrap(), MemoryLimit::Bytes(1536 << 20));
    assert_eq!(p("500MB").unwrap(), MemoryLimit::Bytes(500_000_000));
    assert_eq!(p("123456").unwrap(), MemoryLimit::Bytes(123_456));
    assert_eq!(p("10%").unwrap(), MemoryLimit::PercentOfRam(10.0));
    for junk in ["lots", "12XB", "", "-1", "101%", "1.2.3GiB"] {
        assert!(
            matches!(p(junk), Err(Error::MemoryLimitSpec { .. })),
            "{junk:?}"
        );
    }
    let (code, _, err) = arenac(&["plan", "x.onnx", "--memory-limit", "lots"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error: --memory-limit lots"), "{err}");
}

#[test]
fn over_the_limit_names_the_peak_and_the_largest_batch() {
    let path = digits();
    let opts = |n: usize, limit: &str| {
        CompileOptions::default()
            .without_codegen()
            .with_shape("N", vec![n])
            .with_memory_limit(limit)
            .unwrap()
    };
    let err = compile_file(&path, &opts(1000, "100KiB")).unwrap_err();
    let msg = err.to_string();
    let Error::MemoryBudget(b) = &err else {
        panic!("{msg}")
    };
    assert!(
        msg.contains(&format!("peak at step {}", b.peak_step)),
        "{msg}"
    );
    assert!(msg.contains("'pixels'") || msg.contains("'fc1'"), "{msg}");
    let Fit::LargestBatch {
        symbol, largest, ..
    } = &b.fit
    else {
        panic!("{msg}")
    };
    assert_eq!(symbol, "N");
    assert!(
        msg.contains(&format!("largest N that fits: {largest}")),
        "{msg}"
    );
    // The answer is exact: k fits, k + 1 does not.
    compile_file(&path, &opts(*largest, "100KiB")).expect("the largest N fits");
    assert!(compile_file(&path, &opts(largest + 1, "100KiB")).is_err());

    // A generous limit passes; a percentage of RAM too (where /proc/meminfo exists).
    compile_file(&path, &opts(1000, "1GiB")).expect("fits in 1 GiB");
    if Path::new("/proc/meminfo").exists() {
        compile_file(&path, &opts(8, "10%")).expect("fits in 10% of RAM");
    }

    // The CLI prints it on one line.
    let (code, _, err) = arenac(&[
        "plan",
        path.to_str().unwrap(),
        "--shape",
        "N=1000",
        "--memory-limit",
        "100KiB",
    ]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("largest N that fits"), "{err}");
}

#[test]
fn over_the_limit_without_a_batch_dim_says_by_how_much() {
    let m = ModelBuilder::new("fixed", 13)
        .input("x", DType::F32, &[Dim::N(64), Dim::N(64)])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .node("s", "Sigmoid", &["y"], &["z"], vec![])
        .output("z", DType::F32, &[])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    let opts = CompileOptions::default()
        .without_codegen()
        .with_memory_limit("4KiB")
        .unwrap();
    let err = compile_file(&path, &opts).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, Error::MemoryBudget(b) if matches!(b.fit, Fit::Over { .. })),
        "{msg}"
    );
    assert!(
        msg.contains("over the limit") && msg.contains("peak at step"),
        "{msg}"
    );
    let ok = CompileOptions::default()
        .without_codegen()
        .with_memory_limit("1MiB")
        .unwrap();
    let model = compile_file(&path, &ok).unwrap();
    assert!(model.summary().arena_bytes >= model.summary().arena_lower_bound_bytes);
}

/// Winograd's transformed weights precomputed into the weights region count in the weights
/// and the budget; under a `--memory-limit` that only the plan without them meets, the
/// compile drops them (the Conv transforms per run instead) rather than refusing.
#[test]
fn precomputed_winograd_weights_count_and_go_under_a_limit() {
    use arenac_compiler::ir::tensor::Tensor;
    let vals = |n: usize, k: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * k) % 97) as f32 / 97.0 - 0.5).collect()
    };
    // A 3 x 3 Conv of 32 -> 32 channels on 32 x 32 (its 36 transformed matrices ~150 KB
    // against 37 KB of weights) beside a 32 x 8192 Gemm (1 MB), so the growth is within
    // a quarter of the model's weights.
    let m = ModelBuilder::new("wino", 13)
        .input(
            "x",
            DType::F32,
            &[Dim::N(1), Dim::N(32), Dim::N(32), Dim::N(32)],
        )
        .input(
            "b",
            DType::F32,
            &[Dim::N(1), Dim::N(4), Dim::N(256), Dim::N(256)],
        )
        .output("y", DType::F32, &[])
        .output("z", DType::F32, &[])
        .initializer("w", &Tensor::f32(vec![32, 32, 3, 3], &vals(32 * 32 * 9, 7)))
        // The peak, beside the Conv: Winograd's scratch does not raise it.
        .node(
            "cat",
            "Concat",
            &["b", "b"],
            &["bb"],
            vec![("axis", arenac_compiler::import::builder::Attr::Int(1))],
        )
        .node("gz", "GlobalAveragePool", &["bb"], &["z"], vec![])
        .initializer("fc", &Tensor::f32(vec![32, 8192], &vals(32 * 8192, 11)))
        .node(
            "c",
            "Conv",
            &["x", "w"],
            &["c"],
            vec![(
                "pads",
                arenac_compiler::import::builder::Attr::Ints(vec![1, 1, 1, 1]),
            )],
        )
        .node("gap", "GlobalAveragePool", &["c"], &["g"], vec![])
        .node("flat", "Flatten", &["g"], &["f"], vec![])
        .node("head", "Gemm", &["f", "fc"], &["y"], vec![])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    let own = 4 * (32 * 32 * 9 + 32 * 8192);
    let free = compile_file(&path, &CompileOptions::default().with_threads(1)).unwrap();
    let s = free.summary();
    assert!(
        s.weights_bytes > own + 100_000,
        "grown: {} vs {own}",
        s.weights_bytes
    );
    assert_eq!(free.plan_report().weights_bytes, s.weights_bytes);
    let exe = free.executable().unwrap();
    assert!(
        exe.weights_bytes() >= s.weights_bytes,
        "{}",
        exe.weights_bytes()
    );
    // A limit between the two totals: compiled without the growth (patching off, so only
    // dropping the precomputed weights can meet it).
    let limit = s.arena_bytes + (own + s.weights_bytes) / 2;
    for patches in ["off", "over-limit"] {
        let mut o = CompileOptions::default()
            .with_threads(1)
            .with_memory_limit(&limit.to_string())
            .unwrap();
        if patches == "off" {
            o.patches = arenac::Patches::Never;
        }
        let capped = compile_file(&path, &o)
            .unwrap_or_else(|e| panic!("{patches}: fits without the growth: {e}"));
        let c = capped.summary();
        assert!(c.arena_bytes + c.weights_bytes <= limit, "{patches}");
        assert!(
            c.weights_bytes < own + 4096,
            "{patches}: {}",
            c.weights_bytes
        );
    }
}
