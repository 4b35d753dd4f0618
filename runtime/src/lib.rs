//! arenac: an ONNX graph compiler for CPUs whose heart is static memory planning.
//!
//! This crate is the library face and the `arenac` CLI. It compiles a model into a typed,
//! statically shaped, constant-folded graph, plans its one fixed arena (checked against a
//! memory limit at compile time) and JIT-compiles it ([`compile_file`] → [`Model`]); a
//! [`Session`] owns one arena, allocated once, and runs the model in it without any heap
//! allocation ([`Session::run`] → [`Outputs`], views of the results).
//!
//! ```
//! use arenac::{CompileOptions, Session, TensorRef, compile_file};
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).unwrap();
//!
//! // Bind the batch dim N to 1 and compile (import, fold, plan the arena, generate code).
//! let opts = CompileOptions::default().with_shape("N", vec![1]);
//! let model = compile_file("models/digits/digits.onnx".as_ref(), &opts)?;
//! let mut session = Session::new(&model)?;
//!
//! // One 8x8 image, 64 floats in [0, 1]: the first of the shipped samples.
//! let samples = arenac::io::npy::read_npy("models/digits/samples.npy".as_ref())?;
//! let pixels = &samples.view().to_f32_vec()[..64];
//!
//! let outputs = session.run(&[("pixels", TensorRef::from_slice(&[1, 64], pixels)?)])?;
//! let probs = outputs.by_name("probs").expect("the model's output").to_f32_vec();
//! assert_eq!(probs.len(), 10);
//! let digit = (0..10).max_by(|&a, &b| probs[a].total_cmp(&probs[b])).unwrap();
//! println!("predicted digit: {digit} (p = {:.3})", probs[digit]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod conformance;
pub mod io;
pub mod memtrace;
pub mod profile;
pub mod release;
pub mod session;
pub mod stream;

pub use profile::{Profile, ProfileSummary};
pub use session::{Element, Outputs, RunError, Session, TensorRef};

use arenac_compiler::arena::budget::{default_budget, enforce};
use arenac_compiler::arena::report::build_report;
use arenac_compiler::arena::svg::render_svg;
use arenac_compiler::arena::{PlanOptions, plan_graph, weight_stats};
use arenac_compiler::import::tensor_proto::map_file_shared;
use arenac_compiler::import::{ImportOptions, decode_model, import_model};
use arenac_compiler::ir::graph::{Graph, ValueKind};

pub use arenac_compiler::Error;
pub use arenac_compiler::analysis::act_type::{ActType, ActivationsStorage};
use arenac_compiler::analysis::weights_type::weights_report;
pub use arenac_compiler::analysis::weights_type::{WeightsReport, WeightsStorage};
pub use arenac_compiler::arena::ArenaPlan;
pub use arenac_compiler::arena::budget::MemoryLimit;
pub use arenac_compiler::arena::report::{BufferEntry, PlanReport};
pub use arenac_compiler::codegen::{ARENA_ALIGN, Executable, IoSlot};
pub use arenac_compiler::error::budget::{BudgetExceeded, Fit};
pub use arenac_compiler::gemm::lowp::WeightType;
pub use arenac_compiler::import::FrozenInput;
pub use arenac_compiler::import::inputs::parse_shape_spec;
pub use arenac_compiler::ir::print::print_graph;
pub use arenac_compiler::ir::tensor::Tensor;
pub use arenac_compiler::ir::types::{DType, TensorType};

/// Options for [`compile_file`].
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Shapes to bind: `(graph input or symbolic dim name, dims)`.
    pub shapes: Vec<(String, Vec<usize>)>,
    /// Cap on arena + weights, enforced at compile time; `None` means the machine's physical
    /// RAM (nothing is enforced where it cannot be read).
    pub memory_limit: Option<MemoryLimitSpec>,
    /// Run nodes in the file's order instead of the memory-aware schedule.
    pub keep_file_order: bool,
    /// Fuse chains of element-wise nodes into one kernel each (default `true`): fewer
    /// intermediates in the arena and fewer passes over memory. Off, every node keeps its own
    /// kernel and output buffer (the unfused figures).
    pub fuse: bool,
    /// Generate code (default `true`): needed for a [`Session`]. Off, compiling stops after
    /// planning, so models whose ops have no kernel yet can still be inspected and planned
    /// (`arenac compile` and `arenac plan` turn it off).
    pub codegen: bool,
    /// Values of graph inputs known when compiling ([`CompileOptions::with_value`]). Their
    /// shapes bind the inputs' shapes. An input whose value decides a shape (a Reshape target,
    /// Slice bounds, Expand/Tile sizes, Pad amounts, Resize scales, TopK's k, Squeeze axes...)
    /// is *frozen*: compiled in as a constant and listed by [`Model::frozen`] with the node
    /// that needed it. A frozen input is no longer an input of the compiled model: a
    /// [`Session`] neither needs nor accepts it (giving it is [`RunError::UnknownInput`]), so
    /// the model computes with the value given here, and only that value. Every other given
    /// input stays an input: operands that decide no shape (Clip's bounds, Pad's fill value,
    /// Trilu's k...) are read at run time and never freeze. Without a value, a shape-deciding
    /// input is an [`Error::Node`] whose source is `NotConstant`, naming the node, op and input.
    pub values: HashMap<String, Tensor>,
    /// Per-node profiling (default `false`): the generated program calls a timer hook between
    /// nodes, so [`Session::run_profiled`] can record each node's time into a [`Profile`].
    /// Off, the program has no such call.
    pub profile: bool,
    /// Threads a run uses (intra-op parallelism; default: the CPUs this process may run on,
    /// [`default_threads`]). The plan gives every parallel kernel one slot of per-thread
    /// scratch per thread, so the arena is exact for this count; a [`Session`] runs on this
    /// many threads (its pool is made once, when the session is created).
    pub threads: usize,
    /// The type the weights of Conv, Gemm and MatMul (constant B) are stored in (default f32):
    /// f16/bf16/int8 halve or quarter them, widened to f32 inside the GEMM kernels (int8:
    /// symmetric per output channel, f32 scales). Other constants stay f32; the summary and
    /// the plan report list them ([`Model::weights_report`]).
    pub weights: WeightType,
    /// The type intermediates are stored in (default f32): f16/bf16 halve the arena, each
    /// node computing in f32 and rounding once on store; graph inputs and outputs keep their
    /// types (an f32 input read only by 16-bit nodes is stored in 16 bits, rounded by
    /// [`Session::run`] as it is copied in: [`IoSlot::stored`]). Nodes without a 16-bit
    /// kernel stay f32 (between Casts) and are listed
    /// ([`Summary::activations_storage`]).
    pub activations: ActType,
    /// Give memory back once the program is generated (default `true`): free heap memory,
    /// the model file's pages, and the resident pages of arenac's own code and read-only data
    /// (mostly the importer, planner and code generator, which a run does not execute), so
    /// the process runs with its weights, its arena and little else resident
    /// ([`release::after_compile`]). Turn it off in a process whose other code should keep
    /// its pages resident (the dropped pages come back from the page cache on use).
    pub release_memory: bool,
    /// Winograd F(4x4, 3x3) for 3 x 3 stride-1 Convs (default `true`): about 2.3x fewer
    /// multiplies where the plane has enough 4 x 4 tiles, chosen per Conv by the planner only
    /// where its scratch (the per-run transformed weights and a tile block per thread) does
    /// not raise the arena's peak; the weights are stored as given. Its outputs differ from
    /// the direct convolution's by a few ulps of the sum of the terms' magnitudes. Off
    /// (`--no-winograd`), every Conv runs the direct or im2col kernels.
    pub winograd: bool,
    /// When to run the leading stage of a CNN patch by patch (spatial tiles, their halos
    /// recomputed): by default only when the plan does not fit an explicit memory limit
    /// otherwise. The plan report shows the stage, the grid and the arena without patches.
    pub patches: Patches,
    /// The FLOPs patching may recompute, in percent of the model's (`--patch-flops`, default
    /// 10): the halos, and the passes of a stage holding global pools (EfficientNet's
    /// squeeze-and-excitation). Under an explicit memory limit that does not fit otherwise,
    /// 25% and 50% are tried after it before refusing.
    pub patch_flops: u32,
}

/// When the planner runs a CNN's leading stage patch by patch
/// ([`arenac_compiler::analysis::patches`]): the patched plan is kept only when its arena is
/// smaller; the halos (and a stage's passes over global pools) recompute up to
/// [`CompileOptions::patch_flops`] of the model's FLOPs (10% by default), which costs latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Patches {
    /// Never (`--no-patches`).
    Never,
    /// When the unpatched plan does not fit an explicit `--memory-limit` (the default).
    #[default]
    OverLimit,
    /// Whenever it plans a smaller arena (`--patches`).
    Always,
}

/// The default thread count: the CPUs this process may run on
/// (`std::thread::available_parallelism`, which honours CPU affinity and cgroup quotas).
pub fn default_threads() -> usize {
    arenac_compiler::par::default_threads()
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            shapes: Vec::new(),
            memory_limit: None,
            keep_file_order: false,
            fuse: true,
            codegen: true,
            values: HashMap::new(),
            threads: default_threads(),
            profile: false,
            weights: WeightType::F32,
            activations: ActType::F32,
            release_memory: true,
            winograd: true,
            patches: Patches::OverLimit,
            patch_flops: arenac_compiler::analysis::patches::DEFAULT_PATCH_FLOPS,
        }
    }
}

/// A memory limit and the text it was parsed from (for messages).
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryLimitSpec {
    /// The parsed limit.
    pub limit: MemoryLimit,
    /// As the user wrote it, e.g. `64MiB` or `10%`.
    pub text: String,
}

impl std::str::FromStr for MemoryLimitSpec {
    type Err = Error;

    /// Parses `64MiB`, `1.5GiB`, `500MB`, `123456` or `10%` (see [`MemoryLimit`]).
    fn from_str(s: &str) -> Result<MemoryLimitSpec, Error> {
        Ok(MemoryLimitSpec {
            limit: s.parse()?,
            text: s.trim().to_string(),
        })
    }
}

impl CompileOptions {
    /// Adds a shape binding (an input's full shape, or one symbolic dim as `[n]`).
    pub fn with_shape(mut self, name: impl Into<String>, dims: Vec<usize>) -> Self {
        self.shapes.push((name.into(), dims));
        self
    }

    /// Sets the memory limit from its text (`64MiB`, `10%`...).
    pub fn with_memory_limit(mut self, spec: &str) -> Result<Self, Error> {
        self.memory_limit = Some(spec.parse()?);
        Ok(self)
    }

    /// Gives the value of graph input `name` (see [`CompileOptions::values`]); the bytes are
    /// copied.
    pub fn with_value(mut self, name: impl Into<String>, value: TensorRef<'_>) -> Self {
        let t = Tensor::from_bytes(
            value.dtype(),
            value.shape().to_vec(),
            prost::bytes::Bytes::copy_from_slice(value.bytes()),
        );
        // A TensorRef always holds exactly its shape's bytes, so this cannot fail.
        if let Ok(t) = t {
            self.values.insert(name.into(), t);
        }
        self
    }

    /// Sets the thread count (see [`CompileOptions::threads`]; 0 counts as 1).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Turns code generation off (see [`CompileOptions::codegen`]).
    pub fn without_codegen(mut self) -> Self {
        self.codegen = false;
        self
    }

    /// The planner's options.
    pub fn plan_options(&self) -> PlanOptions {
        let d = PlanOptions::default();
        PlanOptions {
            keep_file_order: self.keep_file_order,
            fuse_elementwise: self.fuse,
            liveness: arenac_compiler::analysis::liveness::LivenessOptions {
                winograd: self.winograd,
                winograd_precompute: !self.weights.is_reduced(),
                ..d.liveness.with_threads(self.threads)
            },
            activations: self.activations,
            patches: self.patches == Patches::Always,
            patch_flops: self.patch_flops,
            ..d
        }
    }
}

/// A compiled model: the typed graph, its arena plan, the generated program (unless
/// [`CompileOptions::codegen`] was off) and what the compiler had to say about it.
#[derive(Debug)]
pub struct Model {
    graph: Graph,
    plan: ArenaPlan,
    executable: Option<Arc<Executable>>,
    warnings: Vec<String>,
    frozen: Vec<FrozenInput>,
    /// When [`compile_file`] started and how long it took.
    timing: (Instant, Duration),
    /// Where that time went.
    timings: CompileTimings,
    /// The weights' storage type ([`CompileOptions::weights`]).
    weights: WeightType,
    /// With f16/bf16 activations: the arena of the same model planned with f32 ones.
    arena_f32_bytes: Option<usize>,
}

/// Where [`compile_file`]'s time went (wall clock, each phase once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompileTimings {
    /// Mapping and decoding the file, importing: shapes, folding constants.
    pub import: Duration,
    /// Fusion, scheduling, liveness, placement and the memory budget check.
    pub plan: Duration,
    /// Code generation: lowering, the weights region and Cranelift (zero without codegen).
    pub codegen: Duration,
    /// The part of `codegen` spent in Cranelift ([`Executable::jit_time`]).
    pub jit: Duration,
}

/// Sizes of a compiled model.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Nodes left after folding and element-wise fusion.
    pub nodes: usize,
    /// Values in the graph (inputs, constants, computed).
    pub values: usize,
    /// Constant tensors the nodes read (weights, folded constants).
    pub weight_tensors: usize,
    /// Their total bytes, each distinct buffer counted once (folded views share bytes).
    pub weights_bytes: usize,
    /// Sum of the bytes of every computed value of the compiled (fused) graph: the memory a
    /// runtime that never frees or reuses would need for it.
    pub naive_intermediate_bytes: usize,
    /// Bytes of the planned arena (inputs, outputs, intermediates and scratch).
    pub arena_bytes: usize,
    /// The lower bound of the plan's schedule: most bytes live at one step.
    pub arena_lower_bound_bytes: usize,
    /// With a reduced weights type: the bytes by type, the saving, the nodes kept in f32.
    pub weights_storage: Option<WeightsStorage>,
    /// With f16/bf16 activations: the arena against f32's, the nodes kept in f32.
    pub activations_storage: Option<ActivationsStorage>,
    /// The leading stage run patch by patch ([`CompileOptions::patches`], or tried because
    /// the plan did not fit the memory limit), when the planner kept it.
    pub patches: Option<arenac_compiler::analysis::patches::PatchInfo>,
}

impl Model {
    /// The typed graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Warnings raised while compiling (e.g. symbolic dims defaulted to 1).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Graph inputs frozen into constants because their values decide shapes (see
    /// [`CompileOptions::values`]), with their types and why ([`FrozenInput::reason`]: which
    /// node needed which operand). These are not inputs of a [`Session`]: the compiled program
    /// is specific to the values given and wrong for any other.
    pub fn frozen(&self) -> &[FrozenInput] {
        &self.frozen
    }

    /// The deterministic text form of the graph.
    pub fn print_ir(&self) -> String {
        print_graph(&self.graph)
    }

    /// The generated program, shared by the sessions created from this model (`None` when
    /// compiled with [`CompileOptions::codegen`] off).
    pub fn executable(&self) -> Option<&Arc<Executable>> {
        self.executable.as_ref()
    }

    /// When [`compile_file`] started, and how long it took (import, planning, code generation).
    pub fn compile_timing(&self) -> (Instant, Duration) {
        self.timing
    }

    /// How [`Model::compile_timing`]'s time divides between the phases.
    pub fn compile_timings(&self) -> CompileTimings {
        self.timings
    }

    /// Creates a [`Session`] (one arena, allocated now) to run this model.
    pub fn session(&self) -> Result<Session, RunError> {
        Session::new(self)
    }

    /// The verified arena plan.
    pub fn plan(&self) -> &ArenaPlan {
        &self.plan
    }

    /// The plan report (text with [`PlanReport::to_text`], JSON with [`PlanReport::to_json`]).
    pub fn plan_report(&self) -> PlanReport {
        // The plan's weights include Winograd's precomputed transformed weights.
        let mut r = build_report(&self.graph, &self.plan);
        r.weights_storage = self.weights_report().storage_entry(r.weights_bytes);
        r.activations_storage = self.activations_storage();
        r
    }

    /// What `--activations` ([`CompileOptions::activations`]) did: the arena against the f32
    /// plan of the same model, the nodes kept in f32; `None` for f32 activations.
    pub fn activations_storage(&self) -> Option<ActivationsStorage> {
        ActivationsStorage::new(
            &self.plan.activations,
            self.plan.arena_bytes,
            self.arena_f32_bytes.unwrap_or(self.plan.arena_bytes),
        )
    }

    /// What the weights type ([`CompileOptions::weights`]) stores reduced, what it saves and
    /// which nodes keep f32 weights (predicted from the plan, as the code generator decides).
    pub fn weights_report(&self) -> WeightsReport {
        weights_report(&self.graph, &self.plan, self.weights)
    }

    /// The arena as an SVG picture.
    pub fn plan_svg(&self) -> String {
        render_svg(&self.graph, &self.plan)
    }

    /// Node, value and byte counts.
    pub fn summary(&self) -> Summary {
        let g = &self.graph;
        let mut weights = weight_stats(g);
        // Winograd's transformed weights precomputed into the weights region.
        weights.bytes = self.plan.weights.bytes;
        let naive_intermediate_bytes = g
            .values()
            .iter()
            .filter(|v| matches!(v.kind, ValueKind::Computed(_)))
            .map(|v| v.ty.bytes().unwrap_or(0))
            .sum();
        Summary {
            nodes: g.node_count(),
            values: g.values().len(),
            weight_tensors: weights.tensors,
            weights_bytes: weights.bytes,
            naive_intermediate_bytes,
            arena_bytes: self.plan.arena_bytes,
            arena_lower_bound_bytes: self.plan.lower_bound_bytes,
            weights_storage: self.weights_report().storage_entry(weights.bytes),
            activations_storage: self.activations_storage(),
            patches: self.plan.patches.clone(),
        }
    }
}

/// A model file at least this large (16 MiB) has its pages, the freed heap and arenac's
/// own code pages released before code generation as well as after it.
const RELEASE_EARLY_BYTES: usize = 16 << 20;

/// Loads an `.onnx` file (external data relative to its folder), binds shapes, infers every
/// value's type, folds constants, fuses element-wise chains (unless [`CompileOptions::fuse`]
/// is off) and plans the arena. Fails with [`Error::MemoryBudget`] when
/// arena + weights exceed the memory limit (by default the machine's physical RAM). Then,
/// unless [`CompileOptions::codegen`] is off, generates the program; an op without a kernel
/// fails with [`Error::Node`] naming the node and op.
pub fn compile_file(path: &Path, opts: &CompileOptions) -> Result<Model, Error> {
    let started = Instant::now();
    let budget = match &opts.memory_limit {
        Some(spec) => Some(spec.limit.resolve(&spec.text)?),
        None => default_budget(),
    };
    memtrace::mark("start");
    let (bytes, source) = map_file_shared(path)?;
    let proto = decode_model(bytes)?;
    memtrace::mark("decoded");
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let import_opts = ImportOptions {
        shapes: opts.shapes.clone(),
        values: opts.values.clone(),
        ..Default::default()
    };
    let mut imported = import_model(&proto, Some(dir), &import_opts)?;
    let imported_at = Instant::now();
    memtrace::mark("imported");
    if cfg!(debug_assertions)
        && let Err(e) = arenac_compiler::ir::verify::verify(&imported.graph)
    {
        return Err(Error::InvalidModel(format!(
            "IR verifier (an arenac bug): {e}"
        )));
    }
    let plan_opts = opts.plan_options();
    // The f32 arena of the same graph, for the saving the summary and the report show.
    let arena_f32_bytes = if opts.activations == ActType::F32 {
        None
    } else {
        let f32_opts = PlanOptions {
            activations: ActType::F32,
            ..plan_opts
        };
        Some(plan_graph(&mut imported.graph.clone(), &f32_opts)?.arena_bytes)
    };
    // Under an explicit --memory-limit the plan may still fit without Winograd's precomputed
    // weights, or patched: keep the graph as imported to try that before refusing.
    let unplanned = opts.memory_limit.is_some().then(|| imported.graph.clone());
    let mut plan_opts = plan_opts;
    let mut plan = plan_graph(&mut imported.graph, &plan_opts)?;
    if let (Some(budget), Some(g)) = (&budget, &unplanned)
        && plan.total_bytes() > budget.bytes
        && plan_opts.liveness.winograd_precompute
        && plan.weights.bytes > weight_stats(g).bytes
    {
        // Winograd's precomputed weights go first: transformed per run instead, in the
        // scratch, where the arena affords it.
        let mut o = plan_opts;
        o.liveness.winograd_precompute = false;
        let mut try_g = g.clone();
        let without = plan_graph(&mut try_g, &o)?;
        if without.total_bytes() < plan.total_bytes() {
            imported.graph = try_g;
            plan = without;
            plan_opts = o;
        }
    }
    if let (Some(budget), Some(g)) = (&budget, unplanned)
        && opts.patches == Patches::OverLimit
        && plan.total_bytes() > budget.bytes
    {
        // Larger recompute budgets (finer grids, deeper stages) only while it does not fit.
        for (i, pct) in [opts.patch_flops, 25, 50].into_iter().enumerate() {
            if (i > 0 && pct <= opts.patch_flops) || plan.total_bytes() <= budget.bytes {
                continue;
            }
            let patched_opts = PlanOptions {
                patches: true,
                patch_flops: pct,
                ..plan_opts
            };
            // The patched plans' Winograd growth (2%) goes too when the plan is over.
            let growths = match plan_opts.patched_winograd_growth {
                0 => vec![0],
                g => vec![g, 0],
            };
            for growth in growths {
                if plan.total_bytes() <= budget.bytes {
                    break;
                }
                let patched_opts = PlanOptions {
                    patched_winograd_growth: growth,
                    ..patched_opts
                };
                let mut try_g = g.clone();
                let patched = plan_graph(&mut try_g, &patched_opts)?;
                if patched.patches.is_some() && patched.arena_bytes < plan.arena_bytes {
                    imported.graph = try_g;
                    plan = patched;
                    plan_opts = patched_opts;
                }
            }
        }
    }
    if let Some(budget) = &budget {
        enforce(
            &proto,
            Some(dir),
            &import_opts,
            &plan_opts,
            &imported.graph,
            &plan,
            budget,
        )?;
    }
    let planned_at = Instant::now();
    memtrace::mark("planned");
    let executable = if opts.codegen {
        // Import and planning are done: their code, their freed heap and the model file's
        // pages read so far go before the weights region grows (codegen reads each weight
        // again from the file and releases it as it goes).
        // Only for a model whose weights dwarf the code (dropping the code of a small model
        // would only make code generation fault it back in).
        if opts.release_memory
            && source
                .as_ref()
                .is_some_and(|s| s.len() >= RELEASE_EARLY_BYTES)
        {
            if let Some(s) = &source {
                s.release();
            }
            release::after_compile();
            memtrace::mark("released before codegen");
        }
        // The weights end up in the executable's own region: the mapped file's pages can go
        // as soon as they have been copied (they are read again from the file if needed).
        let mut release = |part: Option<&[u8]>| {
            if let Some(s) = &source {
                match part {
                    Some(bytes) => s.release_range(bytes),
                    None => s.release(),
                }
            }
        };
        let codegen = arenac_compiler::codegen::CodegenOptions {
            profile: opts.profile,
            weights: opts.weights,
        };
        Some(Arc::new(arenac_compiler::codegen::compile_with(
            &imported.graph,
            &plan,
            &codegen,
            &mut release,
        )?))
    } else {
        None
    };
    let done = Instant::now();
    memtrace::mark("generated");
    if opts.codegen && opts.release_memory {
        release::after_compile();
        memtrace::mark("released");
    }
    let timings = CompileTimings {
        import: imported_at - started,
        plan: planned_at - imported_at,
        codegen: done - planned_at,
        jit: executable.as_ref().map_or(Duration::ZERO, |e| e.jit_time()),
    };
    Ok(Model {
        graph: imported.graph,
        plan,
        executable,
        warnings: imported.warnings,
        frozen: imported.frozen,
        timing: (started, done - started),
        timings,
        weights: opts.weights,
        arena_f32_bytes,
    })
}

/// One supported op type with its opset range, for `arenac ops`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSupport {
    /// ONNX op type (default domain).
    pub op_type: &'static str,
    /// First supported opset.
    pub since: i64,
    /// Last supported opset.
    pub until: i64,
}

/// Every supported op, sorted by name (the `Constant` node included).
pub fn supported_ops() -> Vec<OpSupport> {
    let mut ops: Vec<OpSupport> = arenac_compiler::ops::registry()
        .map(|d| OpSupport {
            op_type: d.op_type,
            since: d.since,
            until: d.until,
        })
        .collect();
    // Ops expanded at import into other ops (Attention, RotaryEmbedding).
    for (op_type, since) in arenac_compiler::import::expand::EXPANDED {
        ops.push(OpSupport {
            op_type,
            since,
            until: arenac_compiler::ops::MAX_OPSET,
        });
    }
    ops.push(OpSupport {
        op_type: "Constant",
        since: arenac_compiler::ops::MIN_OPSET,
        until: arenac_compiler::ops::MAX_OPSET,
    });
    // Recurrent ops become a Scan per direction at import (compiler/src/import/rnn), not in
    // the registry.
    ops.extend(
        arenac_compiler::import::rnn::OPS
            .iter()
            .map(|&op_type| OpSupport {
                op_type,
                since: arenac_compiler::ops::MIN_OPSET,
                until: arenac_compiler::ops::MAX_OPSET,
            }),
    );
    // Control flow (compiler/src/import/control): bodies imported as nested graphs.
    ops.extend(
        arenac_compiler::import::control::OPS
            .iter()
            .map(|&(op_type, since)| OpSupport {
                op_type,
                since,
                until: arenac_compiler::ops::MAX_OPSET,
            }),
    );
    ops.sort_by(|a, b| a.op_type.cmp(b.op_type).then(a.since.cmp(&b.since)));
    ops
}
