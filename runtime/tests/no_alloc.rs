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
