use super::{Pool, for_each, threads, with_pool};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `jobs` jobs of `tasks` tasks on a pool of `n` threads with `width`, checking that
/// every task runs exactly once per job and thread indices stay below the width.
fn exercise(n: usize, width: usize, jobs: usize, tasks: usize) -> Vec<usize> {
    let pool = Pool::new(n).expect("threads");
    let counts: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
    let per_thread: Vec<AtomicUsize> = (0..n.max(1)).map(|_| AtomicUsize::new(0)).collect();
    with_pool(Some(&pool), || {
        assert_eq!(threads(), n.max(1));
        for _ in 0..jobs {
            for_each(tasks, width, |t, th| {
                assert!(th < width.max(1), "thread {th} >= width {width}");
                counts[t].fetch_add(1, Ordering::Relaxed);
                per_thread[th].fetch_add(1, Ordering::Relaxed);
            });
        }
    });
    for (t, c) in counts.iter().enumerate() {
        assert_eq!(c.load(Ordering::Relaxed), jobs, "task {t}");
    }
    per_thread
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .collect()
}

#[test]
fn every_task_runs_once() {
    for (n, width) in [(1, 1), (2, 2), (3, 3), (4, 4), (4, 2), (3, 1)] {
        exercise(n, width, 200, 37);
    }
}

#[test]
fn many_small_jobs() {
    // Rapid publish/close cycles with workers entering late or not at all.
    exercise(4, 4, 20_000, 3);
    exercise(2, 2, 20_000, 2);
}

#[test]
fn workers_that_slept_still_help() {
    let pool = Pool::new(2).expect("threads");
    let used = AtomicUsize::new(0);
    // Not hot: workers park between jobs and are unparked by each job.
    for _ in 0..50 {
        with_pool(Some(&pool), || {
            for_each(64, 2, |_, th| {
                if th == 1 {
                    used.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_micros(20));
            })
        });
        std::thread::sleep(std::time::Duration::from_micros(300));
    }
    assert!(
        used.load(Ordering::Relaxed) > 0,
        "the worker never took a task"
    );
}

#[test]
fn nested_jobs_run_inline() {
    let pool = Pool::new(3).expect("threads");
    let total = AtomicUsize::new(0);
    with_pool(Some(&pool), || {
        for_each(8, 3, |_, _| {
            for_each(5, 3, |_, th| {
                assert_eq!(th, 0, "an inner job runs on the task's own thread");
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
    });
    assert_eq!(total.load(Ordering::Relaxed), 40);
}

#[test]
fn without_a_pool_everything_is_inline() {
    assert_eq!(threads(), 1);
    let seen = AtomicUsize::new(0);
    for_each(10, 8, |_, th| {
        assert_eq!(th, 0);
        seen.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(seen.load(Ordering::Relaxed), 10);
}

#[test]
fn a_panicking_task_reaches_the_caller() {
    let pool = Pool::new(2).expect("threads");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_pool(Some(&pool), || {
            for_each(64, 2, |t, _| {
                if t == 63 {
                    panic!("boom");
                }
            })
        })
    }));
    assert!(r.is_err());
    // The pool still works afterwards.
    let seen = AtomicUsize::new(0);
    with_pool(Some(&pool), || {
        for_each(16, 2, |_, _| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
    });
    assert_eq!(seen.load(Ordering::Relaxed), 16);
}

/// Waits up to 2 s for `cond`.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(2) {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    cond()
}

#[test]
fn heat_wakes_parked_workers_and_cool_parks_them() {
    let pool = Pool::new(3).expect("threads");
    // Idle and cool: both workers park.
    assert!(
        eventually(|| pool.parked() == 2),
        "idle workers did not park"
    );
    // No job yet: a run starting leaves them asleep (a program without parallel kernels
    // never pays for a wake-up).
    let woken = pool.wakes();
    pool.heat();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(pool.parked(), 2);
    assert_eq!(pool.wakes(), woken);
    pool.cool();
    with_pool(Some(&pool), || for_each(4, 3, |_, _| {}));
    assert!(eventually(|| pool.parked() == 2));
    // After a run that went parallel, the next run's start wakes them before any job
    // (clearing their flags: a worker sets its own again only when it has run and goes back
    // to sleep, so seeing both set again means both woke); with no job they spin at most
    // SPIN, then park again.
    let woken = pool.wakes();
    pool.heat();
    assert!(
        eventually(|| pool.wakes() >= woken + 2 && pool.parked() == 2),
        "hot workers did not wake and re-park"
    );
    pool.cool();
    // Woken again, then the run ends: they park (an idle session burns no core).
    with_pool(Some(&pool), || for_each(4, 3, |_, _| {}));
    pool.heat();
    pool.cool();
    assert!(
        eventually(|| pool.parked() == 2),
        "workers kept spinning after cool"
    );
    // Still a working pool.
    assert_eq!(exercise(3, 3, 10, 9).iter().sum::<usize>(), 90);
}

/// The operands of one `m x n x k` product through the GEMM entry point.
struct Product {
    mnk: (usize, usize, usize),
    a: Vec<f32>,
    packed: Vec<f32>,
    c: Vec<f32>,
    scratch: Vec<f32>,
}

impl Product {
    fn new(m: usize, n: usize, k: usize) -> Product {
        use crate::gemm::{a_scratch_slot, pack_b, packed_b_len};
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
        let mut packed = vec![0f32; packed_b_len(k, n)];
        pack_b(k, n, &b, n, 1, &mut packed);
        Product {
            mnk: (m, n, k),
            a: (0..m * k).map(|i| (i % 13) as f32 * 0.1).collect(),
            packed,
            c: vec![0f32; m * n],
            scratch: vec![0f32; 4 * a_scratch_slot(m, k)],
        }
    }

    /// Runs the product on `pool` (made current for the call unless it already is); returns
    /// how many jobs it published.
    fn jobs(&mut self, pool: &Pool) -> u64 {
        let (m, n, k) = self.mnk;
        let before = pool.jobs();
        let slots = pool.threads().min(4);
        let mut product = || {
            // SAFETY: A, packed B, C and the scratch slots are sized for the product.
            unsafe {
                crate::gemm::arenac_sgemm(
                    m,
                    n,
                    k,
                    self.a.as_ptr(),
                    k,
                    self.packed.as_ptr(),
                    self.c.as_mut_ptr(),
                    n,
                    0,
                    self.scratch.as_mut_ptr(),
                    slots,
                )
            }
        };
        if threads() == 1 {
            with_pool(Some(pool), product);
        } else {
            product();
        }
        pool.jobs() - before
    }
}

/// One `m x n x k` product on `pool`: the jobs it published.
fn gemm_jobs(pool: &Pool, m: usize, n: usize, k: usize) -> u64 {
    Product::new(m, n, k).jobs(pool)
}

#[test]
fn small_products_stay_inline_and_large_ones_go_parallel() {
    let pool = Pool::new(2).expect("threads");
    assert!(
        eventually(|| pool.parked() == 1),
        "idle worker did not park"
    );
    // A 64x64 GEMV (4 Ki MACs) never goes to the pool; a 512x512 one (256 Ki MACs, ~8 µs)
    // is not worth waking a parked worker (it wakes it for later instead).
    assert_eq!(gemm_jobs(&pool, 1, 64, 64), 0);
    assert!(eventually(|| pool.parked() == 1));
    assert_eq!(
        gemm_jobs(&pool, 1, 512, 512),
        0,
        "a parked worker was woken for a GEMV"
    );
    // A 256^3 product (16 M MACs) is worth a wake-up.
    assert!(eventually(|| pool.parked() == 1));
    assert_eq!(gemm_jobs(&pool, 256, 256, 256), 1);
    // Eager: even the tiny one goes.
    pool.set_eager(true);
    assert_eq!(
        gemm_jobs(&pool, 1, 64, 64),
        0,
        "one block: nothing to spread"
    );
    assert_eq!(gemm_jobs(&pool, 64, 256, 64), 1);
}

#[test]
fn width_follows_the_cost_and_the_workers_state() {
    use super::{cost, width};
    assert_eq!(width(u64::MAX, 4), 1, "no pool: inline");
    let pool = Pool::new(3).expect("threads");
    assert!(eventually(|| pool.parked() == 2));
    with_pool(Some(&pool), || {
        assert_eq!(width(cost::HOT_NS, 3), 1, "cheaper than its dispatch");
        assert_eq!(width(100 * cost::WAKE_NS, 8), 3, "capped by the pool");
        for_each(3, 3, |_, th| {
            assert_eq!(width(u64::MAX, 3), 1, "inside a task: inline");
            let _ = th;
        });
    });
}

/// Pins the calling thread (and the threads it spawns afterwards) to CPU `cpu` (`None`: the
/// one it runs on now); false where that is not possible.
#[cfg(target_os = "linux")]
fn pin_to(cpu: Option<usize>) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET/sched_setaffinity get a
    // valid pointer to it and its size.
    unsafe {
        let cpu = match cpu {
            Some(c) => c,
            None => match usize::try_from(libc::sched_getcpu()) {
                Ok(c) => c,
                Err(_) => return false,
            },
        };
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_worker_on_the_owners_cpu_parks_instead_of_spinning() {
    // Owner and worker share one CPU: a worker woken at a run's start must not spin there
    // (it would hold the CPU the owner needs for up to SPIN), it parks and says so.
    std::thread::spawn(|| {
        if !pin_to(None) {
            return;
        }
        let pool = Pool::new(2).expect("threads");
        with_pool(Some(&pool), || for_each(4, 2, |_, _| {}));
        assert!(eventually(|| pool.parked() == 1));
        let yielded = pool.yielded();
        let woken = pool.wakes();
        pool.heat(); // the previous run published a job: wakes the worker
        let start = std::time::Instant::now();
        // The owner sleeps, letting the worker run on the shared CPU.
        while pool.wakes() == woken && start.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        assert!(
            eventually(|| pool.yielded() > yielded),
            "the worker spun on the owner's CPU"
        );
        pool.cool();
        // Still a working pool.
        let seen = AtomicUsize::new(0);
        with_pool(Some(&pool), || {
            for_each(16, 2, |_, _| {
                seen.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(seen.load(Ordering::Relaxed), 16);
    })
    .join()
    .expect("pinned test thread");
}

#[cfg(target_os = "linux")]
#[test]
fn a_gemv_goes_to_an_awake_worker() {
    // Worker and owner pinned to two different CPUs (so that the worker can spin: on the
    // owner's CPU it parks at once); the owner keeps it awake with empty jobs and, whenever
    // it is seen awake, runs a 512x512 GEMV (~8 µs, worth a spinning worker, not a wake-up).
    if super::default_threads() < 2 {
        return;
    }
    std::thread::spawn(|| {
        if !pin_to(Some(0)) {
            return;
        }
        let pool = Pool::new(2).expect("threads");
        if !pin_to(Some(1)) {
            return; // CPU 1 not ours to use
        }
        let mut gemv = Product::new(1, 512, 512);
        let went = with_pool(Some(&pool), || {
            (0..5000).any(|_| {
                if pool.asleep(2) {
                    for_each(2, 2, |_, _| {});
                    let t = std::time::Instant::now();
                    while t.elapsed() < std::time::Duration::from_micros(30) {
                        std::hint::spin_loop();
                    }
                    return false;
                }
                gemv.jobs(&pool) > 0
            })
        });
        assert!(
            went,
            "a 512x512 GEMV never went to an awake worker (yielded {}, wakes {})",
            pool.yielded(),
            pool.wakes()
        );
    })
    .join()
    .expect("pinned test thread");
}
