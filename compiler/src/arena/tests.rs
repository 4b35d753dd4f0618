use super::budget::{Budget, MemoryLimit, enforce, parse_meminfo};
use super::report::build_report;
use super::svg::render_svg;
use super::*;
use crate::error::budget::Fit;
use crate::import::builder::{Dim, ModelBuilder};
use crate::import::{ImportOptions, import_model};
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;
use arenac_proto::ModelProto;

/// x[N,256] → Relu → Neg → Add(w) → out, plus a folded Identity of `w` read again by Mul.
pub(crate) fn chain_model() -> ModelProto {
    ModelBuilder::new("chain", 13)
        .input("x", DType::F32, &[Dim::Sym("N"), Dim::N(256)])
        .initializer("w", &Tensor::f32(vec![256], &[0.5; 256]))
        .node("wid", "Identity", &["w"], &["w_alias"], vec![])
        .node("r", "Relu", &["x"], &["a"], vec![])
        .node("n", "Neg", &["a"], &["b"], vec![])
        .node("add", "Add", &["b", "w"], &["c"], vec![])
        .node("mul", "Mul", &["c", "w_alias"], &["out"], vec![])
        .output("out", DType::F32, &[])
        .build()
}

fn import(m: &ModelProto, shapes: &[(&str, usize)]) -> Graph {
    let shapes = shapes
        .iter()
        .map(|(n, k)| (n.to_string(), vec![*k]))
        .collect();
    import_model(
        m,
        None,
        &ImportOptions {
            shapes,
            ..Default::default()
        },
    )
    .expect("imports")
    .graph
}

#[test]
fn plan_figures_hold() {
    let g = import(&chain_model(), &[("N", 8)]);
    let p = plan_arena(&g, &PlanOptions::default()).unwrap();
    assert!(p.arena_bytes >= p.lower_bound_bytes);
    assert!(p.naive_bytes >= p.layer_wise_bound_bytes);
    assert_eq!(p.placement.offsets.len(), p.liveness.buffers.len());
    for (b, &off) in p.liveness.buffers.iter().zip(&p.placement.offsets) {
        assert!(off + b.interval.size <= p.arena_bytes, "{}", b.name);
    }
    // Five values of 8 x 256 f32 in the layer-wise baseline, nothing shared: naive = 5 x 8 KiB.
    assert_eq!(p.naive_bytes, 5 * 8 * 1024);
    // `w` and its folded Identity share bytes: counted once.
    assert_eq!(
        p.weights,
        WeightStats {
            tensors: 2,
            bytes: 1024
        }
    );
    assert_eq!(p.total_bytes(), p.arena_bytes + 1024);
    let peak = p.peak_buffers(2);
    assert!(!peak.is_empty() && peak.len() <= 2);
    for (_, b) in &peak {
        assert!(b.interval.start <= p.peak_step && p.peak_step < b.interval.end);
    }
    if peak.len() == 2 {
        assert!(peak[0].1.interval.size >= peak[1].1.interval.size);
    }
    assert!(p.peak_node().is_some());
}

#[test]
fn report_and_svg() {
    let g = import(&chain_model(), &[("N", 4)]);
    let p = plan_arena(&g, &PlanOptions::default()).unwrap();
    let r = build_report(&g, &p);
    assert_eq!(r.arena_bytes, p.arena_bytes);
    assert_eq!(r.arena_buffers, p.liveness.buffers.len());
    // One entry per arena value.
    let in_arena = g
        .values()
        .iter()
        .filter(|v| !matches!(v.kind, ValueKind::Constant(_)))
        .count();
    assert!(r.buffers.len() >= in_arena);
    assert!(
        r.buffers
            .windows(2)
            .all(|w| w[0].first_step <= w[1].first_step)
    );
    let mut back: report::PlanReport = serde_json::from_str(&r.to_json()).unwrap();
    // Floats may come back one ulp off: compare them loosely, the rest exactly.
    assert!((back.efficiency - r.efficiency).abs() < 1e-9);
    assert!((back.planning_ms - r.planning_ms).abs() < 1e-6);
    (back.efficiency, back.planning_ms) = (r.efficiency, r.planning_ms);
    assert_eq!(back, r);
    let text = r.to_text();
    assert!(
        text.contains("lower bound") && text.contains("alias of"),
        "{text}"
    );
    let svg = render_svg(&g, &p);
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<rect").count(), p.liveness.buffers.len());
    assert!(svg.trim_end().ends_with("</svg>"));
}

#[test]
fn memory_limit_parsing() {
    let b = |s: &str| s.parse::<MemoryLimit>().unwrap();
    assert_eq!(b("123456"), MemoryLimit::Bytes(123456));
    assert_eq!(b("64MiB"), MemoryLimit::Bytes(64 << 20));
    assert_eq!(b("1.5GiB"), MemoryLimit::Bytes(3 << 29));
    assert_eq!(b("500MB"), MemoryLimit::Bytes(500_000_000));
    assert_eq!(b("2 kb"), MemoryLimit::Bytes(2000));
    assert_eq!(b("10KiB"), MemoryLimit::Bytes(10240));
    assert_eq!(b("7B"), MemoryLimit::Bytes(7));
    assert_eq!(b("10%"), MemoryLimit::PercentOfRam(10.0));
    for junk in [
        "", "abc", "10XB", "-5MiB", "0", "0%", "150%", "1.5", "MiB", "1..2MiB", "%",
    ] {
        assert!(junk.parse::<MemoryLimit>().is_err(), "{junk:?} parsed");
    }
    let e = "12 parsecs".parse::<MemoryLimit>().unwrap_err().to_string();
    assert!(e.contains("--memory-limit 12 parsecs"), "{e}");
    assert_eq!(
        parse_meminfo("MemTotal:       16314372 kB\nMemFree: 1 kB\n"),
        Some(16314372 * 1024)
    );
    assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
}

#[test]
fn budget_finds_the_largest_batch() {
    let m = chain_model();
    let opts = PlanOptions::default();
    let import_opts = ImportOptions {
        shapes: vec![("x".into(), vec![64, 256])],
        ..Default::default()
    };
    let g = import_model(&m, None, &import_opts).unwrap().graph;
    let p = plan_arena(&g, &opts).unwrap();
    let need = |k: usize| {
        plan_arena(&import(&m, &[("N", k)]), &opts)
            .unwrap()
            .total_bytes()
    };
    // A limit between what N=20 and N=21 need.
    let limit = need(20);
    assert!(need(21) > limit);
    let budget = Budget {
        bytes: limit,
        source: "test".into(),
    };
    let err = enforce(&m, None, &import_opts, &opts, &g, &p, &budget).unwrap_err();
    let Error::MemoryBudget(b) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        b.fit,
        Fit::LargestBatch {
            symbol: "N".into(),
            current: 64,
            largest: 20
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("largest N that fits: 20"), "{msg}");
    assert!(
        msg.contains(&format!("peak at step {}", p.peak_step)),
        "{msg}"
    );
    assert!(!b.largest.is_empty());
    // Generous limit: fine. Tiny limit: nothing fits.
    let big = Budget {
        bytes: usize::MAX,
        source: "test".into(),
    };
    assert!(enforce(&m, None, &import_opts, &opts, &g, &p, &big).is_ok());
    let tiny = Budget {
        bytes: 10,
        source: "test".into(),
    };
    let err = enforce(&m, None, &import_opts, &opts, &g, &p, &tiny).unwrap_err();
    assert!(err.to_string().contains("even N=1"), "{err}");
}

/// A leading dim of `-1` / `"?"` is a free batch dim too: the search binds it as `x[0]`,
/// whether the user gave the whole shape or that dim alone.
#[test]
fn budget_searches_an_anonymous_batch_dim() {
    let mut m = chain_model();
    let graph = m.graph.as_mut().unwrap();
    graph.input[0] =
        crate::import::builder::value_info("x", DType::F32, &[Dim::Sym("?"), Dim::N(256)]);
    let opts = PlanOptions::default();
    let need = |k: usize| {
        plan_arena(&import(&m, &[("x[0]", k)]), &opts)
            .unwrap()
            .total_bytes()
    };
    let limit = need(20);
    assert!(need(21) > limit);
    let budget = Budget {
        bytes: limit,
        source: "test".into(),
    };
    for shapes in [
        vec![("x".to_string(), vec![64, 256])],
        vec![("x[0]".to_string(), vec![64])],
    ] {
        let import_opts = ImportOptions {
            shapes,
            ..Default::default()
        };
        let g = import_model(&m, None, &import_opts).unwrap().graph;
        let p = plan_arena(&g, &opts).unwrap();
        let err = enforce(&m, None, &import_opts, &opts, &g, &p, &budget).unwrap_err();
        let Error::MemoryBudget(b) = &err else {
            panic!("{err}")
        };
        assert_eq!(
            b.fit,
            Fit::LargestBatch {
                symbol: "x[0]".into(),
                current: 64,
                largest: 20
            }
        );
        assert!(err.to_string().contains("pass --shape x[0]=20"), "{err}");
    }
}

#[test]
fn over_without_a_batch_symbol() {
    let m = ModelBuilder::new("fixed", 13)
        .input("x", DType::F32, &[Dim::N(4), Dim::N(16)])
        .node("r", "Relu", &["x"], &["y"], vec![])
        .output("y", DType::F32, &[])
        .build();
    let g = import(&m, &[]);
    let opts = PlanOptions::default();
    let p = plan_arena(&g, &opts).unwrap();
    let budget = Budget {
        bytes: 64,
        source: "test".into(),
    };
    let err = enforce(&m, None, &ImportOptions::default(), &opts, &g, &p, &budget).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("over the limit") && msg.contains("'r' (Relu)"),
        "{msg}"
    );
}

#[test]
fn human_sizes() {
    assert_eq!(human_bytes(100), "100 B");
    assert_eq!(human_bytes(1536), "1.5 KiB");
    assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    assert_eq!(grouped(1234567), "1,234,567");
}
