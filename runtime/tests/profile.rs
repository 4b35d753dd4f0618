//! Per-node profiles (`CompileOptions::profile`, `Session::run_profiled`, `arenac run
//! --profile`): the Chrome trace of a conv model, a MobileNet-style (depthwise) block and a
//! transformer-style block is valid JSON in ONNX Runtime's layout with the expected events; the
//! node times add up to the run; a program compiled without profiling has no hook call; and
//! the errors of misuse.

mod common;

use std::path::{Path, PathBuf};

use arenac::{CompileOptions, Model, Profile, RunError, TensorRef, compile_file};
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;
use prost::Message;
use serde_json::Value;

/// Seeded values in [-0.5, 0.5).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

fn weight(shape: &[usize], seed: u64) -> Tensor {
    Tensor::f32(shape.to_vec(), &values(shape.iter().product(), seed))
}

fn dims(s: &[usize]) -> Vec<Dim> {
    s.iter().map(|&d| Dim::N(d)).collect()
}

fn ints(v: &[i64]) -> Attr {
    Attr::Ints(v.to_vec())
}

/// Writes `m` into `dir` and compiles it (profiling on unless `profile` is false).
fn compile(dir: &Path, name: &str, m: ModelBuilder, profile: bool) -> Model {
    let path: PathBuf = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, m.build().encode_to_vec()).unwrap();
    let opts = CompileOptions {
        profile,
        ..CompileOptions::default()
    };
    compile_file(&path, &opts).unwrap_or_else(|e| panic!("{name} compiles: {e}"))
}

/// Conv+Relu, MaxPool, Conv+Relu (im2col), 1x1 Conv, GlobalAveragePool, Flatten, Gemm.
fn conv_model() -> ModelBuilder {
    ModelBuilder::new("convnet", 17)
        .input("x", DType::F32, &dims(&[1, 8, 48, 48]))
        .output("y", DType::F32, &dims(&[1, 10]))
        .initializer("w1", &weight(&[16, 8, 3, 3], 1))
        .initializer("b1", &weight(&[16], 2))
        .initializer("w2", &weight(&[32, 16, 3, 3], 3))
        .initializer("w3", &weight(&[32, 32, 1, 1], 4))
        .initializer("wf", &weight(&[10, 32], 5))
        .initializer("bf", &weight(&[10], 6))
        .node(
            "conv1",
            "Conv",
            &["x", "w1", "b1"],
            &["c1"],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        )
        .node("relu1", "Relu", &["c1"], &["r1"], vec![])
        .node(
            "pool",
            "MaxPool",
            &["r1"],
            &["p"],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))],
        )
        .node(
            "conv2",
            "Conv",
            &["p", "w2"],
            &["c2"],
            vec![("pads", ints(&[1, 1, 1, 1]))],
        )
        .node("relu2", "Relu", &["c2"], &["r2"], vec![])
        .node("conv3", "Conv", &["r2", "w3"], &["c3"], vec![])
        .node("gap", "GlobalAveragePool", &["c3"], &["g"], vec![])
        .node("flat", "Flatten", &["g"], &["f"], vec![])
        .node(
            "fc",
            "Gemm",
            &["f", "wf", "bf"],
            &["y"],
            vec![("transB", Attr::Int(1))],
        )
}

/// An inverted residual block: 1x1 expand + Clip(0, 6), 3x3 depthwise + Clip, 1x1 project,
/// residual Add.
fn mobilenet_block() -> ModelBuilder {
    let clip = |m: ModelBuilder, name: &str, x: &str, y: &str| {
        m.node(name, "Clip", &[x, "zero", "six"], &[y], vec![])
    };
    let m = ModelBuilder::new("mbblock", 17)
        .input("x", DType::F32, &dims(&[1, 16, 28, 28]))
        .output("y", DType::F32, &dims(&[1, 16, 28, 28]))
        .initializer("zero", &Tensor::f32(vec![], &[0.0]))
        .initializer("six", &Tensor::f32(vec![], &[6.0]))
        .initializer("we", &weight(&[64, 16, 1, 1], 11))
        .initializer("wd", &weight(&[64, 1, 3, 3], 12))
        .initializer("wp", &weight(&[16, 64, 1, 1], 13))
        .node("expand", "Conv", &["x", "we"], &["e"], vec![]);
    let m = clip(m, "expand_relu6", "e", "er");
    let m = m.node(
        "dw",
        "Conv",
        &["er", "wd"],
        &["d"],
        vec![("group", Attr::Int(64)), ("pads", ints(&[1, 1, 1, 1]))],
    );
    let m = clip(m, "dw_relu6", "d", "dr");
    m.node("project", "Conv", &["dr", "wp"], &["p"], vec![])
        .node("residual", "Add", &["p", "x"], &["y"], vec![])
}

/// A pre-LN attention block with a SiLU MLP: LayerNormalization, Q/K/V MatMuls, scores,
/// Softmax, context, residual Add, MLP (MatMul, x * Sigmoid(x) fused, MatMul), residual Add.
fn transformer_block() -> ModelBuilder {
    let (t, d) = (32usize, 64usize);
    ModelBuilder::new("attn", 17)
        .input("x", DType::F32, &dims(&[t, d]))
        .output("y", DType::F32, &dims(&[t, d]))
        .initializer("gamma", &Tensor::f32(vec![d], &vec![1.0; d]))
        .initializer("beta", &Tensor::f32(vec![d], &vec![0.0; d]))
        .initializer("wq", &weight(&[d, d], 21))
        .initializer("wk", &weight(&[d, d], 22))
        .initializer("wv", &weight(&[d, d], 23))
        .initializer("w1", &weight(&[d, 4 * d], 24))
        .initializer("w2", &weight(&[4 * d, d], 25))
        .initializer("scale", &Tensor::f32(vec![], &[0.125]))
        .node(
            "ln",
            "LayerNormalization",
            &["x", "gamma", "beta"],
            &["h"],
            vec![("axis", Attr::Int(-1))],
        )
        .node("q", "MatMul", &["h", "wq"], &["q"], vec![])
        .node("k", "MatMul", &["h", "wk"], &["k"], vec![])
        .node("v", "MatMul", &["h", "wv"], &["v"], vec![])
        .node(
            "kt",
            "Transpose",
            &["k"],
            &["kt"],
            vec![("perm", ints(&[1, 0]))],
        )
        .node("scores", "MatMul", &["q", "kt"], &["s"], vec![])
        .node("scaled", "Mul", &["s", "scale"], &["ss"], vec![])
        .node(
            "softmax",
            "Softmax",
            &["ss"],
            &["a"],
            vec![("axis", Attr::Int(-1))],
        )
        .node("context", "MatMul", &["a", "v"], &["c"], vec![])
        .node("res1", "Add", &["c", "x"], &["r"], vec![])
        .node("up", "MatMul", &["r", "w1"], &["u"], vec![])
        .node("gate", "Sigmoid", &["u"], &["g"], vec![])
        .node("silu", "Mul", &["u", "g"], &["z"], vec![])
        .node("down", "MatMul", &["z", "w2"], &["o"], vec![])
        .node("res2", "Add", &["o", "r"], &["y"], vec![])
}

/// Runs `model` `runs` times profiled on seeded inputs; returns the profile.
fn profile_runs(model: &Model, runs: usize) -> Profile {
    let mut session = model.session().unwrap();
    let slot = session.inputs()[0].clone();
    let data = values(slot.ty.numel().unwrap(), 7);
    let input = TensorRef::from_slice(&slot.ty.shape, &data).unwrap();
    let mut profile = Profile::for_model(model, runs).unwrap();
    for _ in 0..runs {
        session
            .run_profiled(&[(slot.name.as_str(), input)], &mut profile)
            .unwrap();
    }
    // The profiled program computes what the plain one does.
    let plain = session.run(&[(slot.name.as_str(), input)]).unwrap();
    assert!(
        plain
            .get(0)
            .unwrap()
            .to_f32_vec()
            .iter()
            .all(|v| v.is_finite())
    );
    profile
}

/// Parses the trace and checks what every trace must hold; returns the events.
fn check_trace(p: &Profile) -> Vec<Value> {
    let text = p.to_trace_json();
    let v: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    let events = v.as_array().expect("a top-level array").clone();
    assert_eq!(text.lines().count(), events.len() + 2, "one event per line");
    let mut last_ts = 0;
    for e in &events {
        assert!(e["cat"].is_string(), "every event has a cat: {e}");
        let ts = e["ts"].as_u64().expect("integer ts");
        assert!(ts >= last_ts, "sorted by ts: {e}");
        last_ts = ts;
        if e["ph"] == "X" {
            assert!(e["dur"].is_u64(), "integer dur: {e}");
        }
    }
    let init: Vec<&Value> = events
        .iter()
        .filter(|e| e["name"] == "session_initialization")
        .collect();
    assert_eq!(init.len(), 1);
    assert_eq!(init[0]["cat"], "Session");
    let runs: Vec<&Value> = events.iter().filter(|e| e["name"] == "model_run").collect();
    assert_eq!(runs.len(), p.runs());
    let nodes: Vec<&Value> = events.iter().filter(|e| e["cat"] == "Node").collect();
    let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(nodes.len(), p.nodes().len() * p.runs());
    assert_eq!(counters.len(), nodes.len());
    let arena = p.executable().arena_bytes() as u64;
    for c in &counters {
        let live = c["args"]["tensors"].as_u64().unwrap() + c["args"]["scratch"].as_u64().unwrap();
        assert!(
            live > 0 && live <= arena,
            "live {live} of a {arena}-byte arena"
        );
    }
    for n in &nodes {
        let a = &n["args"];
        assert!(n["name"].as_str().unwrap().ends_with("_kernel_time"));
        assert_eq!(n["ph"], "X");
        assert_eq!(a["provider"], "CPUExecutionProvider");
        assert!(a["op_name"].is_string() && a["kernel"].is_string());
        for key in [
            "node_index",
            "activation_size",
            "parameter_size",
            "output_size",
        ] {
            assert!(
                a[key].as_str().unwrap().parse::<u64>().is_ok(),
                "{key}: {a}"
            );
        }
        let out = a["output_type_shape"].as_array().unwrap();
        assert!(!out.is_empty() && out[0]["float"].is_array(), "{a}");
        assert!(a["flops"].is_u64() && a["bytes"].as_u64().unwrap() > 0 && a["dur_ns"].is_u64());
    }
    // Per run: the node events' µs durations add up to the span of the run's nodes exactly
    // (boundaries rounded, not durations), and their nanoseconds to nearly the whole run.
    for (r, run) in runs.iter().enumerate() {
        let of_run: Vec<&&Value> = nodes.iter().filter(|n| n["args"]["run"] == r).collect();
        let sum_us: u64 = of_run.iter().map(|n| n["dur"].as_u64().unwrap()).sum();
        let first = of_run[0]["ts"].as_u64().unwrap();
        let last = of_run[of_run.len() - 1];
        let end = last["ts"].as_u64().unwrap() + last["dur"].as_u64().unwrap();
        assert_eq!(sum_us, end - first);
        let sum_ns: u64 = of_run
            .iter()
            .map(|n| n["args"]["dur_ns"].as_u64().unwrap())
            .sum();
        let run_ns = run["args"]["dur_ns"].as_u64().unwrap();
        // Outside the nodes: checking and copying the inputs, reading the clock.
        let outside = run_ns.saturating_sub(sum_ns);
        assert!(
            sum_ns <= run_ns && outside <= (run_ns / 5).max(50_000),
            "run {r}: nodes {sum_ns} ns of {run_ns} ns"
        );
    }
    events
}

fn node_event<'a>(events: &'a [Value], name: &str) -> &'a Value {
    let want = format!("{name}_kernel_time");
    events
        .iter()
        .find(|e| e["name"] == want.as_str())
        .unwrap_or_else(|| panic!("no event {want}"))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[test]
fn conv_model_trace() {
    let dir = tempfile::tempdir().unwrap();
    let model = compile(dir.path(), "conv", conv_model(), true);
    let p = profile_runs(&model, 3);
    let events = check_trace(&p);
    let c1 = &node_event(&events, "conv1")["args"];
    assert_eq!(c1["op_name"], "Conv");
    assert_eq!(strings(&c1["computes"]), ["Conv", "Relu"]);
    // The direct path runs where the AVX-512 GEMM kernel is selected, im2col elsewhere.
    let avx512 = arenac_compiler::gemm::kernel_name().starts_with("avx512");
    let path = if avx512 { "direct" } else { "im2col" };
    assert_eq!(c1["kernel"], format!("conv 3x3/s1 {path}").as_str());
    // 2 * output elements * C_in * 3 * 3, plus one per element for the Relu.
    let out = 16 * 48 * 48;
    assert_eq!(
        c1["flops"].as_u64().unwrap(),
        (2 * out * 8 * 9 + out) as u64
    );
    assert_eq!(
        c1["input_type_shape"][1]["float"],
        serde_json::json!([16, 8, 3, 3])
    );
    assert_eq!(
        c1["output_type_shape"][0]["float"],
        serde_json::json!([1, 16, 48, 48])
    );
    assert_eq!(c1["parameter_size"], ((16 * 8 * 9 + 16) * 4).to_string());
    // The Relus run in the convs' epilogues and the Flatten is a view: no events of their own.
    for gone in ["relu1", "relu2", "flat"] {
        let want = format!("{gone}_kernel_time");
        assert!(!events.iter().any(|e| e["name"] == want.as_str()), "{gone}");
    }
    assert_eq!(
        node_event(&events, "conv3")["args"]["kernel"],
        "conv 1x1/s1 pointwise"
    );
    assert_eq!(node_event(&events, "fc")["args"]["kernel"], "gemv");
    let s = p.summary();
    assert_eq!(s.runs, 3);
    assert_eq!(
        s.by_op.iter().map(|r| r.calls).sum::<usize>(),
        p.nodes().len()
    );
    let share: f64 = s.by_op.iter().map(|r| r.share).sum();
    assert!((share - 1.0).abs() < 1e-9, "{share}");
    let conv = s.by_op.iter().find(|r| r.key == "Conv").unwrap();
    assert_eq!(conv.calls, 3);
    assert!(conv.gflops() > 0.0);
    let text = s.to_text();
    assert!(
        text.contains("op type") && text.contains(&format!("conv 3x3/s1 {path}")),
        "{text}"
    );
}

#[test]
fn mobilenet_block_trace() {
    let dir = tempfile::tempdir().unwrap();
    let model = compile(dir.path(), "mb", mobilenet_block(), true);
    let p = profile_runs(&model, 2);
    let events = check_trace(&p);
    let dw = &node_event(&events, "dw")["args"];
    assert_eq!(dw["kernel"], "conv 3x3/s1 depthwise");
    assert_eq!(strings(&dw["computes"]), ["Conv", "Clip"]);
    assert_eq!(
        dw["flops"].as_u64().unwrap(),
        (2 * 64 * 28 * 28 * 9 + 64 * 28 * 28) as u64
    );
    assert_eq!(
        node_event(&events, "expand")["args"]["kernel"],
        "conv 1x1/s1 pointwise"
    );
    assert_eq!(node_event(&events, "residual")["args"]["op_name"], "Add");
}

#[test]
fn transformer_block_trace() {
    let dir = tempfile::tempdir().unwrap();
    let model = compile(dir.path(), "attn", transformer_block(), true);
    let p = profile_runs(&model, 2);
    let events = check_trace(&p);
    let fused: Vec<&Value> = events
        .iter()
        .filter(|e| e["cat"] == "Node" && e["args"]["op_name"] == "FusedElementwise")
        .collect();
    assert!(
        fused
            .iter()
            .any(|e| strings(&e["args"]["computes"]) == ["Sigmoid", "Mul"]),
        "the SiLU is one fused node: {fused:?}"
    );
    let up = &node_event(&events, "up")["args"];
    assert_eq!(up["kernel"], "matmul (constant B)");
    assert_eq!(up["flops"].as_u64().unwrap(), 2 * 32 * 256 * 64);
    assert_eq!(node_event(&events, "scores")["args"]["kernel"], "matmul");
    assert_eq!(node_event(&events, "softmax")["args"]["op_name"], "Softmax");
    assert_eq!(
        node_event(&events, "ln")["args"]["op_name"],
        "LayerNormalization"
    );
}

#[test]
fn unprofiled_program_has_no_hook_calls() {
    let dir = tempfile::tempdir().unwrap();
    for (name, m) in [
        ("conv", conv_model()),
        ("mb", mobilenet_block()),
        ("attn", transformer_block()),
    ] {
        let plain = compile(dir.path(), name, m.clone(), false);
        let profiled = compile(dir.path(), name, m, true);
        let (pe, qe) = (plain.executable().unwrap(), profiled.executable().unwrap());
        assert!(pe.profile().is_none());
        let nodes = qe.profile().unwrap().nodes.len();
        assert_eq!(pe.entry_calls().hook, 0, "{name}");
        assert_eq!(qe.entry_calls().hook, nodes + 1, "{name}");
        // The kernel calls are the same; profiling adds only the hooks.
        assert_eq!(
            qe.entry_calls().all,
            pe.entry_calls().all + nodes + 1,
            "{name}"
        );
        assert!(pe.entry_calls().all >= nodes, "{name}");
    }
}

#[test]
fn misuse_is_an_error_and_a_full_profile_drops_runs() {
    let plain = common::digits(1);
    assert_eq!(
        Profile::for_model(&plain, 4).unwrap_err(),
        RunError::NotProfiled
    );
    let opts = CompileOptions {
        profile: true,
        ..CompileOptions::default()
    }
    .with_shape("N", vec![1]);
    let path = common::repo("models/digits/digits.onnx");
    let (a, b) = (
        compile_file(&path, &opts).unwrap(),
        compile_file(&path, &opts).unwrap(),
    );
    let px = vec![0.5f32; 64];
    let input = [("pixels", TensorRef::from_slice(&[1, 64], &px).unwrap())];
    let mut session = a.session().unwrap();
    let mut other = Profile::for_model(&b, 1).unwrap();
    let err = session.run_profiled(&input, &mut other).unwrap_err();
    assert_eq!(err, RunError::ProfileMismatch);
    assert_eq!(other.runs(), 0);

    let mut p = Profile::for_model(&a, 2).unwrap();
    let bad = [("nope", TensorRef::from_slice(&[1, 64], &px).unwrap())];
    assert!(session.run_profiled(&bad, &mut p).is_err());
    assert_eq!(
        (p.runs(), p.dropped_runs()),
        (0, 0),
        "a refused run records nothing"
    );
    // One plain run first: the first run after compiling faults back the code pages the
    // compile gave back (`CompileOptions::release_memory`; about 80 µs outside the nodes on a
    // fresh CI machine), which is not what the bound on time outside the nodes is about.
    session.run(&input).unwrap();
    let mut probs = Vec::new();
    for _ in 0..3 {
        let out = session.run_profiled(&input, &mut p).unwrap();
        probs.push(out.get(0).unwrap().to_f32_vec());
    }
    assert_eq!((p.runs(), p.dropped_runs()), (2, 1));
    assert_eq!(probs[0], probs[2], "a dropped run still runs");
    assert_eq!(p.capacity(), 2);
    check_trace(&p);
    p.clear();
    assert_eq!(p.runs(), 0);
}

#[test]
fn cli_profile_writes_a_trace_onnx_runtimes_reader_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("digits.json");
    let model = common::repo("models/digits/digits.onnx");
    let (code, out, err) = common::arenac(&[
        "run",
        model.to_str().unwrap(),
        "--repeat",
        "3",
        "--profile",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("op type") && out.contains("Gemm"), "{out}");
    assert!(out.contains("wrote profile of 3 run(s)"), "{out}");
    let events: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let runs = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "model_run")
        .count();
    assert_eq!(runs, 3);

    // ONNX Runtime's own profile reader groups the node events by operator.
    let Some(py) = std::env::var_os("ARENAC_PYTHON") else {
        println!("ARENAC_PYTHON is unset: skipping onnxruntime's profile reader");
        return;
    };
    let script = "import argparse, sys\n\
        from onnxruntime.transformers.profile_result_processor import process_results\n\
        a = argparse.Namespace(threshold=0.0, kernel_time_only=False)\n\
        print('\\n'.join(process_results(sys.argv[1], a)))\n";
    let r = std::process::Command::new(py)
        .args(["-c", script, file.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let grouped = text.split("Grouped by operator").nth(1).unwrap_or_default();
    assert!(grouped.contains("Gemm"), "{text}");
    assert!(text.contains("CPU"), "{text}");
}

#[test]
fn cli_profile_unwritable_file_is_one_line() {
    let model = common::repo("models/digits/digits.onnx");
    let (code, _, err) = common::arenac(&[
        "run",
        model.to_str().unwrap(),
        "--shape",
        "N=1",
        "--profile",
        "/nonexistent/dir/p.json",
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: --profile: cannot write /nonexistent/dir/p.json"),
        "{err}"
    );
}
