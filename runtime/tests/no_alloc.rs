//! `Session::run` makes zero heap allocations: a counting global allocator watches the runs
//! after a warm-up.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arenac::TensorRef;

mod common;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::SeqCst) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: as for `alloc`; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts the allocations `f` makes (this test file has a single test, so no other thread
/// allocates meanwhile).
fn count<R>(f: impl FnOnce() -> R) -> (usize, R) {
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let r = f();
    COUNTING.store(false, Ordering::SeqCst);
    (ALLOCS.load(Ordering::SeqCst), r)
}

#[test]
fn run_allocates_nothing() {
    // The counter itself works.
    let (n, v) = count(|| vec![1u8; 100]);
    assert_eq!((n, v.len()), (1, 100));

    let model = common::digits(8);
    let mut session = model.session().unwrap();
    let px: Vec<f32> = (0..8 * 64).map(|i| (i % 17) as f32 / 16.0).collect();
    let input = TensorRef::from_slice(&[8, 64], &px).unwrap();
    let named = [("pixels", input)];
    let positional = [input];
    // Warm-up.
    session.run(&named).unwrap();

    let (n, sum) = count(|| {
        let mut sum = 0.0f32;
        for _ in 0..10 {
            let out = session.run(&named).unwrap();
            let probs = out.get(0).unwrap();
            sum += probs.as_f32().unwrap().iter().sum::<f32>();
            let out = session.run_positional(&positional).unwrap();
            sum += out.by_name("probs").unwrap().get_f32(0).unwrap();
        }
        sum
    });
    assert_eq!(n, 0, "Session::run allocated {n} times in 20 runs");
    assert!(sum.is_finite());

    // With a thread pool: 1, 2 and 4 threads, a model whose kernels go parallel.
    let file = common::parallel_model();
    let x: Vec<f32> = (0..16 * 32 * 32)
        .map(|i| (i % 29) as f32 / 29.0 - 0.5)
        .collect();
    let input = TensorRef::from_slice(&[1, 16, 32, 32], &x).unwrap();
    let mut first: Option<Vec<u8>> = None;
    for threads in [1, 2, 4] {
        let opts = arenac::CompileOptions::default().with_threads(threads);
        let model = arenac::compile_file(file.path(), &opts).unwrap();
        let mut session = model.session().unwrap();
        assert_eq!(session.threads(), threads);
        assert_eq!(session.arena_bytes(), model.summary().arena_bytes);
        session.run(&[("x", input)]).unwrap();
        let (n, bytes) = count(|| {
            let mut last = 0;
            for _ in 0..10 {
                let out = session.run(&[("x", input)]).unwrap();
                last = out.get(0).unwrap().bytes().len();
            }
            last
        });
        assert_eq!(
            n, 0,
            "Session::run on {threads} threads allocated {n} times"
        );
        let out = session
            .run(&[("x", input)])
            .unwrap()
            .get(0)
            .unwrap()
            .bytes()
            .to_vec();
        assert_eq!(out.len(), bytes);
        match &first {
            None => first = Some(out),
            Some(one) => assert!(one == &out, "{threads} threads differ from one"),
        }
    }

    // A model whose kernel checks run-time indices (the fault record in the arena): still
    // nothing allocated per run, after a run that reported a bad index too.
    let model = common::lookup_model();
    let mut session = model.session().unwrap();
    let table: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let table = TensorRef::from_slice(&[6, 2], &table).unwrap();
    let good = [0i64, -1, 3];
    let bad = [0i64, 6, 3];
    let good = [
        ("table", table),
        ("ids", TensorRef::from_slice(&[3], &good).unwrap()),
    ];
    let bad = [
        ("table", table),
        ("ids", TensorRef::from_slice(&[3], &bad).unwrap()),
    ];
    assert!(session.run(&bad).is_err());
    session.run(&good).unwrap();
    let (n, sum) = count(|| {
        let mut sum = 0.0f32;
        for _ in 0..10 {
            let out = session.run(&good).unwrap();
            sum += out.get(0).unwrap().get_f32(2).unwrap();
        }
        sum
    });
    assert_eq!(
        n, 0,
        "Session::run with index checks allocated {n} times in 10 runs"
    );
    assert_eq!(sum, 100.0);

    // Profiled runs write into the profile's preallocated stamps: no allocation either, also
    // once the profile is full (the later runs are dropped).
    let opts = arenac::CompileOptions {
        profile: true,
        ..arenac::CompileOptions::default()
    }
    .with_shape("N", vec![8]);
    let model = arenac::compile_file(&common::repo("models/digits/digits.onnx"), &opts).unwrap();
    let mut session = model.session().unwrap();
    let mut profile = arenac::Profile::for_model(&model, 5).unwrap();
    session.run(&named).unwrap();
    let (n, sum) = count(|| {
        let mut sum = 0.0f32;
        for _ in 0..10 {
            let out = session.run_profiled(&named, &mut profile).unwrap();
            sum += out.get(0).unwrap().get_f32(0).unwrap();
        }
        sum
    });
    assert_eq!(n, 0, "Session::run_profiled allocated {n} times in 10 runs");
    assert_eq!((profile.runs(), profile.dropped_runs()), (5, 5));
    assert!(sum.is_finite());

    // Control flow: a run-time If choosing a branch and an LSTM (a loop in the generated code).
    let src = r#"<ir_version: 8, opset_import: ["" : 14]>
        g (bool c, float[6, 1, 4] x) => (float[1, 1, 3] h)
        <int64[3] ws = {1, 12, 4}, int64[3] rs = {1, 12, 3}>
        {
            W = ConstantOfShape <value = float[1] {0.1}> (ws)
            R = ConstantOfShape <value = float[1] {0.2}> (rs)
            y = If(c) <then_branch = t () => (float[6, 1, 4] a) { a = Relu(x) },
                       else_branch = e () => (float[6, 1, 4] b) { b = Neg(x) }>
            s, h = LSTM(y, W, R) <hidden_size = 3>
        }"#;
    let proto = arenac_compiler::import::text::parse_model_text(src).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("control.onnx");
    std::fs::write(&path, prost::Message::encode_to_vec(&proto)).unwrap();
    let model = arenac::compile_file(&path, &arenac::CompileOptions::default()).unwrap();
    let mut session = model.session().unwrap();
    let xs: Vec<f32> = (0..24).map(|i| (i % 5) as f32 / 4.0 - 0.5).collect();
    let x = TensorRef::from_slice(&[6, 1, 4], &xs).unwrap();
    let flags = [true, false];
    let conds: Vec<TensorRef<'_>> = flags
        .iter()
        .map(|b| TensorRef::from_slice(&[], std::slice::from_ref(b)).unwrap())
        .collect();
    session.run(&[("c", conds[0]), ("x", x)]).unwrap();
    let (n, sums) = count(|| {
        let mut sums = [0.0f32; 2];
        for _ in 0..10 {
            for (k, &c) in conds.iter().enumerate() {
                let out = session.run(&[("c", c), ("x", x)]).unwrap();
                sums[k] += out.get(0).unwrap().get_f32(0).unwrap();
            }
        }
        sums
    });
    assert_eq!(
        n, 0,
        "Session::run of If and LSTM allocated {n} times in 20 runs"
    );
    assert_ne!(sums[0], sums[1], "both branches taken");

    // Casts from and to the storage types (the Rust helper called from the JIT).
    let model = storage_model();
    let mut session = model.session().unwrap();
    let xs: Vec<f32> = (0..64).map(|i| i as f32 * 7.5 - 200.0).collect();
    let named = [("x", TensorRef::from_slice(&[64], &xs).unwrap())];
    session.run(&named).unwrap();
    let (n, sum) = count(|| {
        let mut sum = 0.0f32;
        for _ in 0..10 {
            let out = session.run(&named).unwrap();
            sum += out.get(0).unwrap().get_f32(3).unwrap();
        }
        sum
    });
    assert_eq!(
        n, 0,
        "Session::run of storage casts allocated {n} times in 10 runs"
    );
    assert!(sum.is_finite());

    // `--activations f16`: the input stored narrowed, rounded on copy-in, from an unaligned
    // slice too (through a stack buffer).
    let opts = arenac::CompileOptions {
        activations: arenac::ActType::F16,
        ..arenac::CompileOptions::default()
    }
    .with_shape("N", vec![8]);
    let model = arenac::compile_file(&common::repo("models/digits/digits.onnx"), &opts).unwrap();
    let mut session = model.session().unwrap();
    assert_eq!(session.inputs()[0].stored, arenac::DType::F16);
    let bytes: Vec<u8> = std::iter::once(0u8)
        .chain(px.iter().flat_map(|v| v.to_ne_bytes()))
        .collect();
    let unaligned = TensorRef::from_bytes(arenac::DType::F32, &[8, 64], &bytes[1..]).unwrap();
    let named = [("pixels", TensorRef::from_slice(&[8, 64], &px).unwrap())];
    session.run(&named).unwrap();
    let (n, sum) = count(|| {
        let mut sum = 0.0f32;
        for _ in 0..10 {
            let out = session.run(&named).unwrap();
            sum += out.get(0).unwrap().get_f32(0).unwrap();
            let out = session.run(&[("pixels", unaligned)]).unwrap();
            sum += out.get(0).unwrap().get_f32(0).unwrap();
        }
        sum
    });
    assert_eq!(
        n, 0,
        "Session::run of a narrowed input allocated {n} times in 20 runs"
    );
    assert!(sum.is_finite());
}

/// `x: f32[64]` → float8 E5M2 → f32, and → int4 → f32, summed.
fn storage_model() -> arenac::Model {
    use arenac::DType;
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;
    let to = |d: DType| vec![("to", Attr::Int(i64::from(d.to_onnx())))];
    let m = ModelBuilder::new("storage", 24)
        .input("x", DType::F32, &[Dim::N(64)])
        .node("a", "Cast", &["x"], &["a"], to(DType::F8E5M2))
        .node("b", "Cast", &["a"], &["b"], to(DType::F32))
        .node("c", "Cast", &["x"], &["c"], to(DType::I4))
        .node("d", "Cast", &["c"], &["d"], to(DType::F32))
        .node("s", "Add", &["b", "d"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("storage.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    arenac::compile_file(&path, &arenac::CompileOptions::default()).unwrap()
}
