//! Shared helpers of the integration tests: finding the graph fixtures, reading their
//! `# shapes:` headers, and importing a model into its printed, snapshot-ready form.
//!
//! A fixture is `fixtures/<family>/<name>.onnxtxt`, a model in ONNX textual syntax. Its first
//! lines may be comments; one of the form `# shapes: X=2x3x8x8, N=4` gives the shapes to bind
//! (each item as `arenac compile --shape` takes it). Fixtures under `fixtures/errors/` must fail;
//! those named `syntax_*` fail already in the text parser (the reference ONNX parser rejects
//! them too, so the cross-check skips them).

#![deny(missing_docs)]

pub mod fuzzing;

use std::path::{Path, PathBuf};

use arenac_compiler::import::inputs::parse_shape_spec;
use arenac_compiler::import::text::parse_model_text;
use arenac_compiler::import::{ImportOptions, import_model};
use arenac_compiler::ir::print::print_graph;
use arenac_compiler::ir::verify::verify;
use arenac_proto::ModelProto;

/// One fixture file.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// Folder under `fixtures/` (the op family, `models`, or `errors`).
    pub family: String,
    /// File stem.
    pub name: String,
    /// Full path.
    pub path: PathBuf,
}

impl Fixture {
    /// `family__name`: the snapshot name.
    pub fn id(&self) -> String {
        format!("{}__{}", self.family, self.name)
    }

    /// True for fixtures that must fail to import.
    pub fn expects_error(&self) -> bool {
        self.family == "errors"
    }

    /// True for error fixtures that are not valid ONNX text at all.
    pub fn is_syntax_error(&self) -> bool {
        self.expects_error() && self.name.starts_with("syntax_")
    }

    /// The fixture's source text.
    pub fn source(&self) -> String {
        std::fs::read_to_string(&self.path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", self.path.display()))
    }

    /// Where `scripts/fixtures_to_onnx.py` writes this fixture's `.onnx` under `dir`.
    pub fn onnx_path(&self, dir: &Path) -> PathBuf {
        dir.join(&self.family).join(format!("{}.onnx", self.name))
    }
}

/// The `tests/fixtures` folder.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every `*.onnxtxt` under `fixtures/<family>/`, sorted by family then name.
pub fn list_fixtures() -> Vec<Fixture> {
    let root = fixtures_dir();
    let mut out = Vec::new();
    let families =
        std::fs::read_dir(&root).unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()));
    for fam in families.flatten() {
        let fam_path = fam.path();
        if !fam_path.is_dir() {
            continue;
        }
        let family = fam.file_name().to_string_lossy().into_owned();
        let Ok(files) = std::fs::read_dir(&fam_path) else {
            continue;
        };
        for f in files.flatten() {
            let path = f.path();
            if path.extension().and_then(|e| e.to_str()) != Some("onnxtxt") {
                continue;
            }
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(Fixture {
                family: family.clone(),
                name,
                path,
            });
        }
    }
    out.sort_by(|a, b| (&a.family, &a.name).cmp(&(&b.family, &b.name)));
    out
}

/// The shapes from `# shapes: A=1x2, N=4` header comment lines (leading comment block only).
pub fn header_shapes(src: &str) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for line in src.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Some(comment) = line.strip_prefix('#') else {
            break;
        };
        let Some(specs) = comment.trim().strip_prefix("shapes:") else {
            continue;
        };
        for spec in specs.split_whitespace().flat_map(|s| s.split(';')) {
            let spec = spec.trim().trim_end_matches(',');
            if spec.is_empty() {
                continue;
            }
            match parse_shape_spec(spec) {
                Ok(s) => out.push(s),
                Err(e) => panic!("bad '# shapes:' header item '{spec}': {e}"),
            }
        }
    }
    out
}

/// Imports a decoded model with the given shapes and renders the outcome: the printed graph
/// followed by `warning: ...` lines, or `error: <Display>` (one line). `Err` only for an
/// import that succeeded but produced a graph the verifier rejects.
pub fn render_import(
    model: &ModelProto,
    shapes: &[(String, Vec<usize>)],
) -> Result<Outcome, String> {
    let opts = ImportOptions {
        shapes: shapes.to_vec(),
        ..Default::default()
    };
    match import_model(model, None, &opts) {
        Ok(imported) => {
            verify(&imported.graph).map_err(|e| format!("IR verifier: {e}"))?;
            let mut s = print_graph(&imported.graph);
            for w in &imported.warnings {
                s.push_str("warning: ");
                s.push_str(w);
                s.push('\n');
            }
            Ok(Outcome::Graph(s))
        }
        Err(e) => Ok(Outcome::Error(e.to_string())),
    }
}

/// What importing a fixture gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The printed graph (and warnings).
    Graph(String),
    /// The error's one-line Display.
    Error(String),
}

/// Parses a fixture's text and imports it with its header shapes.
pub fn run_fixture(fx: &Fixture) -> Result<Outcome, String> {
    let src = fx.source();
    let shapes = header_shapes(&src);
    match parse_model_text(&src) {
        Ok(model) => render_import(&model, &shapes),
        Err(e) => Ok(Outcome::Error(e.to_string())),
    }
}

/// Imports a fixture (which must import) and renders its arena plan: the report's text
/// without the planning time (the one line that varies run to run), preceded by the schedule.
pub fn render_plan(fx: &Fixture) -> Result<String, String> {
    use arenac_compiler::arena::{PlanOptions, plan_arena, report::build_report};
    let src = fx.source();
    let model = parse_model_text(&src).map_err(|e| e.to_string())?;
    let opts = ImportOptions {
        shapes: header_shapes(&src),
        ..Default::default()
    };
    let g = import_model(&model, None, &opts)
        .map_err(|e| e.to_string())?
        .graph;
    let plan = plan_arena(&g, &PlanOptions::default()).map_err(|e| e.to_string())?;
    let mut s = String::from("schedule:");
    for &id in &plan.schedule {
        s.push(' ');
        s.push_str(&g.node(id).name);
    }
    s.push('\n');
    for line in build_report(&g, &plan).to_text().lines() {
        if !line.trim_start().starts_with("planning time") {
            s.push_str(line);
            s.push('\n');
        }
    }
    Ok(s)
}

/// The body of the `import_bytes` fuzz target, shared with the corpus replay test: arbitrary
/// bytes through decode, import, the IR verifier and arena planning (whose own verifier runs
/// inside `plan_arena`). Errors are fine; a panic, an abort or a verifier complaint is a bug.
pub fn fuzz_import_bytes(data: &[u8]) {
    use arenac_compiler::arena::{PlanOptions, plan_arena};
    use arenac_compiler::import::decode_model;
    let Ok(model) = decode_model(data.to_vec().into()) else {
        return;
    };
    // Folding is capped low so that fuzzing exercises logic, not the machine's memory.
    let opts = ImportOptions {
        max_fold_bytes: 64 << 20,
        ..ImportOptions::default()
    };
    let Ok(imported) = import_model(&model, None, &opts) else {
        return;
    };
    if let Err(e) = verify(&imported.graph) {
        panic!("verifier rejected an imported graph: {e}");
    }
    if let Err(e @ arenac_compiler::Error::PlanInternal(_)) =
        plan_arena(&imported.graph, &PlanOptions::default())
    {
        panic!("planner produced an invalid plan: {e}");
    }
}
