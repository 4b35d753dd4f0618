//! Single-thread benchmark of compiled Conv layers (the whole JIT path: `arenac_conv2d`).
//!
//! Run with `cargo run --release -p arenac-compiler --example conv_bench [REPS]`. For each
//! layer (shapes from MobileNetV2, ResNet-18 and SqueezeNet), builds a one-node model, compiles
//! it, and prints the median time of REPS runs (default 30) and GFLOP/s (2 flops per
//! multiply-add), and the rate by the thread's least CPU time (`POOL_SHAPES="c,h,w,k,stride,pad;..."`:
//! MaxPool layers instead). Other layers: `CONV_SHAPES="c,h,w,m,k,stride,pad,group;..."`.

use std::time::Instant;

use arenac_compiler::arena::{PlanOptions, plan_arena};
use arenac_compiler::codegen::compile;
use arenac_compiler::codegen::weights::AlignedBytes;
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use arenac_compiler::import::{ImportOptions, import_model};
use arenac_compiler::ir::tensor::Tensor;
use arenac_compiler::ir::types::DType;

/// `(c, h, w, m, k, stride, pad, group, name)`.
type Layer = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    String,
);

fn default_layers() -> Vec<Layer> {
    let l = |c, h, w, m, k, s, p, g, n: &str| (c, h, w, m, k, s, p, g, n.to_string());
    vec![
        l(32, 112, 112, 32, 3, 1, 1, 32, "mbv2 dw 3x3 32@112"),
        l(96, 112, 112, 96, 3, 2, 1, 96, "mbv2 dw 3x3 s2 96@112"),
        l(144, 56, 56, 144, 3, 1, 1, 144, "mbv2 dw 3x3 144@56"),
        l(384, 14, 14, 384, 3, 1, 1, 384, "mbv2 dw 3x3 384@14"),
        l(960, 7, 7, 960, 3, 1, 1, 960, "mbv2 dw 3x3 960@7"),
        l(32, 112, 112, 16, 1, 1, 0, 1, "mbv2 pw 32->16 @112"),
        l(144, 56, 56, 24, 1, 1, 0, 1, "mbv2 pw 144->24 @56"),
        l(3, 224, 224, 64, 7, 2, 3, 1, "resnet conv1 7x7 s2"),
        l(64, 56, 56, 64, 3, 1, 1, 1, "resnet 3x3 64@56"),
        l(256, 14, 14, 256, 3, 1, 1, 1, "resnet 3x3 256@14"),
        l(512, 7, 7, 512, 3, 1, 1, 1, "resnet 3x3 512@7"),
        l(16, 55, 55, 64, 3, 1, 1, 1, "squeeze expand3x3 16->64"),
    ]
}

fn parse_layers(s: &str) -> Vec<Layer> {
    s.split(';')
        .filter_map(|t| {
            let v: Vec<usize> = t.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            (v.len() == 8).then(|| (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], t.into()))
        })
        .collect()
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    if let Ok(pools) = std::env::var("POOL_SHAPES") {
        return pool_layers(&pools, reps);
    }
    let layers = std::env::var("CONV_SHAPES")
        .map(|s| parse_layers(&s))
        .unwrap_or_else(|_| default_layers());
    println!("gemm kernel: {}", arenac_compiler::gemm::kernel_name());
    for (c, h, w, m, k, s, p, g, name) in layers {
        let oh = (h + 2 * p - k) / s + 1;
        let ow = (w + 2 * p - k) / s + 1;
        let dims = |v: &[usize]| v.iter().map(|&d| Dim::N(d)).collect::<Vec<_>>();
        let wt = Tensor::f32(
            vec![m, c / g, k, k],
            &(0..m * (c / g) * k * k)
                .map(|i| (i % 7) as f32 * 0.01)
                .collect::<Vec<_>>(),
        );
        let model = ModelBuilder::new("conv", 13)
            .input("x", DType::F32, &dims(&[1, c, h, w]))
            .initializer("w", &wt)
            .output("y", DType::F32, &dims(&[1, m, oh, ow]))
            .node(
                "conv",
                "Conv",
                &["x", "w"],
                &["y"],
                vec![
                    ("group", Attr::Int(g as i64)),
                    ("strides", Attr::Ints(vec![s as i64; 2])),
                    ("pads", Attr::Ints(vec![p as i64; 4])),
                ],
            )
            .build();
        let graph = match import_model(&model, None, &ImportOptions::default()) {
            Ok(i) => i.graph,
            Err(e) => {
                println!("{name}: import failed: {e}");
                continue;
            }
        };
        let exe = match plan_arena(&graph, &PlanOptions::default())
            .map_err(|e| e.to_string())
            .and_then(|plan| compile(&graph, &plan).map_err(|e| e.to_string()))
        {
            Ok(e) => e,
            Err(e) => {
                println!("{name}: compile failed: {e}");
                continue;
            }
        };
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        let (mut times, mut cpu): (Vec<f64>, Vec<f64>) = (0..reps + 2)
            .map(|_| {
                let (t, c) = (Instant::now(), thread_cpu_s());
                // SAFETY: the arena is 64-aligned, `arena_bytes` long and ours alone (the
                // input slot holds zeros: the timing does not depend on values).
                let ran = unsafe { exe.run(arena.as_mut_ptr()) };
                assert!(ran.is_ok(), "a convolution checks no index");
                (t.elapsed().as_secs_f64(), thread_cpu_s() - c)
            })
            .skip(2)
            .unzip();
        times.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        let med = times.get(times.len() / 2).copied().unwrap_or(0.0);
        let cpu_min = cpu.first().copied().unwrap_or(0.0);
        let flops = 2.0 * (m * oh * ow * (c / g) * k * k) as f64;
        let rate = |s: f64| flops / s.max(1e-12) / 1e9;
        println!(
            "{name:<28} {:>9.3} ms {:>8.1} GFLOP/s (wall median) {:>8.1} GFLOP/s (thread CPU min)",
            med * 1e3,
            rate(med),
            rate(cpu_min)
        );
    }
}

/// CPU time of the calling thread, seconds (`CLOCK_THREAD_CPUTIME_ID`: time the scheduler
/// gave other processes on a shared machine is not counted).
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// MaxPool layers `c,h,w,k,stride,pad;...`: the same timing as the convolutions.
fn pool_layers(spec: &str, reps: usize) {
    for t in spec.split(';') {
        let v: Vec<usize> = t.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        let [c, h, w, k, s, p] = v[..] else {
            continue;
        };
        let (oh, ow) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
        let dims = |v: &[usize]| v.iter().map(|&d| Dim::N(d)).collect::<Vec<_>>();
        let model = ModelBuilder::new("pool", 13)
            .input("x", DType::F32, &dims(&[1, c, h, w]))
            .output("y", DType::F32, &dims(&[1, c, oh, ow]))
            .node(
                "pool",
                "MaxPool",
                &["x"],
                &["y"],
                vec![
                    ("kernel_shape", Attr::Ints(vec![k as i64; 2])),
                    ("strides", Attr::Ints(vec![s as i64; 2])),
                    ("pads", Attr::Ints(vec![p as i64; 4])),
                ],
            )
            .build();
        let Ok(graph) = import_model(&model, None, &ImportOptions::default()).map(|i| i.graph)
        else {
            continue;
        };
        let Ok(exe) = plan_arena(&graph, &PlanOptions::default())
            .map_err(|e| e.to_string())
            .and_then(|plan| compile(&graph, &plan).map_err(|e| e.to_string()))
        else {
            continue;
        };
        let mut arena = AlignedBytes::zeroed(exe.arena_bytes());
        let mut cpu: Vec<f64> = (0..reps + 2)
            .map(|_| {
                let c = thread_cpu_s();
                // SAFETY: as for the convolutions.
                let ran = unsafe { exe.run(arena.as_mut_ptr()) };
                assert!(ran.is_ok(), "a pooling checks no index");
                thread_cpu_s() - c
            })
            .skip(2)
            .collect();
        cpu.sort_by(f64::total_cmp);
        println!("maxpool {t:<24} {:>9.4} ms (thread CPU min)", cpu[0] * 1e3);
    }
}
