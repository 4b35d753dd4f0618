//! MaxPool kernel time on the benchmark models' shapes (one thread, input in cache or not as
//! the plane count decides): `cargo run --release -p arenac-compiler --example maxpool_bench [REPS] [NAME]`.
//! Prints the median µs of [`arenac_pool2d`] per shape and its input GB/s.

use std::time::Instant;

use arenac_compiler::gemm::pool::{POOL_MAX, PoolParams, arenac_pool2d};

fn main() {
    // (name, channels, h, w, k, s, pad, oh, ow): SqueezeNet 1.1's three (3x3/s2, ceil_mode)
    // and ResNet-18's (3x3/s2 pad 1).
    let shapes = [
        ("squeezenet 1", 64, 111, 111, 3, 2, 0, 55, 55),
        ("squeezenet 2", 128, 55, 55, 3, 2, 0, 27, 27),
        ("squeezenet 3", 256, 27, 27, 3, 2, 0, 13, 13),
        ("resnet18", 64, 112, 112, 3, 2, 1, 56, 56),
    ];
    println!("| shape | µs | input GB/s |");
    println!("|---|---:|---:|");
    let only = std::env::args().nth(2).unwrap_or_default();
    for (name, c, h, w, k, s, pad, oh, ow) in shapes {
        if !name.contains(only.as_str()) {
            continue;
        }
        let p = PoolParams {
            planes: c,
            h,
            w,
            oh,
            ow,
            kh: k,
            kw: k,
            sh: s,
            sw: s,
            pt: pad,
            pl: pad,
            dh: 1,
            dw: 1,
            pb: pad,
            pr: pad,
            kind: POOL_MAX,
        };
        let n = (c * h * w) as usize;
        let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 * 1e-3).collect();
        let mut y = vec![0.0f32; (c * oh * ow) as usize];
        let reps: usize = std::env::args()
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or(200);
        let mut times: Vec<f64> = (0..reps)
            .map(|_| {
                let t = Instant::now();
                // SAFETY: x and y are sized for p, disjoint.
                unsafe { arenac_pool2d(&p, x.as_ptr(), y.as_mut_ptr()) };
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        println!("| {name} | {med:.1} | {:.1} |", n as f64 * 4.0 / med / 1e3);
        std::hint::black_box(&y);
    }
}
