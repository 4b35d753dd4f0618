//! Graph fixtures: every `fixtures/<family>/<name>.onnxtxt` is parsed (our ONNX text parser),
//! imported with the shapes of its `# shapes:` header, verified, and its printed IR (plus
//! warnings) compared to the insta snapshot `snapshots/<family>__<name>.snap`. Fixtures under
//! `fixtures/errors/` must fail; the snapshot is then the error's one-line Display.
//!
//! `onnx_reference_parser_agrees` cross-checks the text parser against ONNX's own: with
//! `ARENAC_FIXTURE_ONNX_DIR` pointing at the output of `scripts/fixtures_to_onnx.py`, each
//! `.onnx` there must import to exactly what the text fixture imports to.
//!
//! Review snapshot changes with `cargo insta review`, or accept with `INSTA_UPDATE=always`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use arenac_compiler::import::load_model_file;
use arenac_tests::{
    Fixture, Outcome, header_shapes, list_fixtures, render_import, render_plan, run_fixture,
};

/// Checks one fixture; `Err` describes a failure other than a snapshot mismatch.
fn check(fx: &Fixture) -> Result<(), String> {
    let outcome = run_fixture(fx)?;
    let text = match (outcome, fx.expects_error()) {
        (Outcome::Graph(g), false) => g,
        (Outcome::Error(e), true) => e,
        (Outcome::Error(e), false) => return Err(format!("import failed: {e}")),
        (Outcome::Graph(g), true) => return Err(format!("expected an error, imported:\n{g}")),
    };
    let rel = format!("fixtures/{}/{}.onnxtxt", fx.family, fx.name);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_description(rel);
    settings.bind(|| insta::assert_snapshot!(fx.id(), text));
    Ok(())
}

#[test]
fn fixtures() {
    let all = list_fixtures();
    assert!(all.len() >= 32, "only {} fixtures found", all.len());
    let mut failures = Vec::new();
    for fx in &all {
        match catch_unwind(AssertUnwindSafe(|| check(fx))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{}: {e}", fx.id())),
            Err(_) => failures.push(format!("{}: snapshot mismatch (see above)", fx.id())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n  {}",
        failures.len(),
        all.len(),
        failures.join("\n  ")
    );
}

/// Liveness and plan snapshots: for every fixture that imports, the schedule and the plan
/// report (buffers with offsets, first/last steps and aliases) in `snapshots/plan/`. The plan
/// itself is checked by the verifier inside `plan_arena`.
#[test]
fn plan_snapshots() {
    let mut failures = Vec::new();
    let mut planned = 0;
    for fx in list_fixtures().iter().filter(|f| !f.expects_error()) {
        let result = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            let text = render_plan(fx)?;
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_path("snapshots/plan");
            settings.set_prepend_module_to_snapshot(false);
            settings.set_omit_expression(true);
            settings.set_description(format!(
                "plan of fixtures/{}/{}.onnxtxt",
                fx.family, fx.name
            ));
            settings.bind(|| insta::assert_snapshot!(fx.id(), text));
            Ok(())
        }));
        match result {
            Ok(Ok(())) => planned += 1,
            Ok(Err(e)) => failures.push(format!("{}: {e}", fx.id())),
            Err(_) => failures.push(format!("{}: snapshot mismatch (see above)", fx.id())),
        }
    }
    assert!(planned >= 30, "only {planned} fixtures planned");
    assert!(
        failures.is_empty(),
        "plan failures:\n  {}",
        failures.join("\n  ")
    );
}

#[test]
fn every_family_has_fixtures_and_errors_are_one_line() {
    let all = list_fixtures();
    for family in [
        "elementwise",
        "conv",
        "pool",
        "matmul",
        "norm",
        "reduce",
        "view",
        "movement",
        "constant",
        "resize",
        "models",
        "errors",
    ] {
        assert!(
            all.iter().any(|f| f.family == family),
            "no fixture for family '{family}'"
        );
    }
    for fx in all.iter().filter(|f| f.expects_error()) {
        if let Ok(Outcome::Error(e)) = run_fixture(fx) {
            assert!(!e.contains('\n'), "{}: multi-line error: {e}", fx.id());
        }
    }
}

#[test]
fn shapes_header_is_read() {
    let src = "# conv fixture\n# shapes: X=2x3x8x8, N=4\n<ir_version: 8>\n# shapes: ignored=1\n";
    assert_eq!(
        header_shapes(src),
        vec![
            ("X".to_string(), vec![2, 3, 8, 8]),
            ("N".to_string(), vec![4])
        ]
    );
    assert!(header_shapes("<ir_version: 8>").is_empty());
}

/// Imports the reference parser's `.onnx` for each fixture and compares with our text parser.
#[test]
fn onnx_reference_parser_agrees() {
    let Some(dir) = std::env::var_os("ARENAC_FIXTURE_ONNX_DIR") else {
        println!(
            "skipped: set ARENAC_FIXTURE_ONNX_DIR to the output of scripts/fixtures_to_onnx.py"
        );
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let mut failures = Vec::new();
    let mut compared = 0;
    for fx in list_fixtures().iter().filter(|f| !f.is_syntax_error()) {
        let path = fx.onnx_path(&dir);
        let ours = run_fixture(fx);
        let theirs = load_model_file(&path)
            .map_err(|e| format!("cannot load {}: {e}", path.display()))
            .and_then(|m| render_import(&m, &header_shapes(&fx.source())));
        compared += 1;
        if ours != theirs {
            failures.push(format!(
                "{}:\n--- text parser:\n{ours:?}\n--- onnx.parser:\n{theirs:?}",
                fx.id()
            ));
        }
    }
    assert!(compared >= 30, "only {compared} fixtures compared");
    assert!(
        failures.is_empty(),
        "{} fixtures differ between our text parser and ONNX's:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
