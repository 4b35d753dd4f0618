//! Shared helpers: a seeded RNG, running an executable in an arena, the differential check.

pub(crate) use std::path::{Path, PathBuf};

pub(crate) use arenac_compiler::arena::{PlanOptions, plan_arena};
pub(crate) use arenac_compiler::codegen::weights::AlignedBytes;
pub(crate) use arenac_compiler::codegen::{Executable, compile};
pub(crate) use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
pub(crate) use arenac_compiler::import::{ImportOptions, import_file, import_model};
pub(crate) use arenac_compiler::ir::eval::eval_graph;
pub(crate) use arenac_compiler::ir::graph::Graph;
pub(crate) use arenac_compiler::ir::tensor::Tensor;
pub(crate) use arenac_compiler::ir::types::DType;
pub(crate) use arenac_proto::ModelProto;

/// Fixed-seed xorshift.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [lo, hi).
    pub(crate) fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    pub(crate) fn tensor(&mut self, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.f32(lo, hi)).collect();
        Tensor::f32(shape.to_vec(), &v)
    }
}

pub(crate) fn dims(s: &[usize]) -> Vec<Dim> {
    s.iter().map(|&d| Dim::N(d)).collect()
}

/// Runs `exe` on `inputs` in a fresh zeroed 64-aligned arena; returns the outputs (any dtype).
pub(crate) fn run(exe: &Executable, inputs: &[Tensor]) -> Vec<Tensor> {
    let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
    run_in(exe, &mut arena, inputs).unwrap_or_else(|f| panic!("the run reported: {f}"))
}

/// Runs `exe` on `inputs` in `arena` (64-aligned, `exe.arena_bytes()` long): the outputs, or
/// the fault the run reported, as text.
pub(crate) fn run_in(
    exe: &Executable,
    arena: &mut AlignedBytes,
    inputs: &[Tensor],
) -> Result<Vec<Tensor>, String> {
    assert!(arena.as_slice().len() >= exe.arena_bytes());
    for (slot, t) in exe.inputs().iter().zip(inputs) {
        let n = slot.stored_bytes().expect("static");
        assert!(slot.offset + n <= exe.arena_bytes());
        // Copied, or rounded to 16 bits for an input `--activations` stores narrowed.
        slot.store(
            t.bytes(),
            &mut arena.as_mut_slice()[slot.offset..slot.offset + n],
        );
    }
    // SAFETY: the arena is 64-aligned, `arena_bytes` long, ours alone, inputs written.
    let ran = unsafe { exe.run(arena.as_mut_ptr()) };
    ran.map_err(|f| f.to_string())?;
    Ok(exe
        .outputs()
        .iter()
        .map(|slot| {
            let n = slot.ty.bytes().expect("static");
            assert!(slot.offset + n <= exe.arena_bytes());
            let v = arena.as_slice()[slot.offset..slot.offset + n].to_vec();
            Tensor::from_bytes(slot.ty.dtype, slot.ty.shape.clone(), v.into())
                .expect("output bytes match the type")
        })
        .collect())
}

pub(crate) fn import(model: &ModelProto) -> Graph {
    import_model(model, None, &ImportOptions::default())
        .expect("imports")
        .graph
}

/// Compiles `g`, runs it on `inputs`, compares every output with the reference within
/// `atol + rtol * |ref|`. Returns the executable for further checks.
pub(crate) fn check_graph(g: &Graph, inputs: &[Tensor], rtol: f32, atol: f32) -> Executable {
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

pub(crate) fn check(model: ModelProto, inputs: &[Tensor], rtol: f32, atol: f32) -> Executable {
    check_graph(&import(&model), inputs, rtol, atol)
}

pub(crate) const RTOL: f32 = 1e-4;

pub(crate) const ATOL: f32 = 1e-5;

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

/// A minimal `.npy` reader for little-endian f32 arrays: shape and data.
pub(crate) fn read_npy_f32(path: &Path) -> (Vec<usize>, Vec<f32>) {
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

pub(crate) type Shapes3<'a> = (&'a [usize], &'a [usize], &'a [usize]);
