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
