//! A small fork-join pool: `threads - 1` workers, parked between runs, that help the calling
//! thread through one indexed job at a time.
//!
//! Protocol (one job at a time, published by the thread that owns the pool):
//! - the owner writes the job (a borrowed `&dyn Fn(task, thread)`, the task count) into the
//!   shared slot, resets the task counter, then publishes a new *generation* in `state`
//!   (`gen << 32 | closed << 31 | entered`), and unparks the workers that went to sleep;
//! - a worker that sees a new generation *enters* it with a compare-exchange that increments
//!   `entered` only while the generation is current and not closed; inside, it claims task
//!   indices from the shared counter (`fetch_add`) until they run out, then leaves
//!   (decrementing `entered`);
//! - the owner claims tasks the same way; when they run out it waits until `entered` is 0
//!   and closes the generation with a compare-exchange (which fails if a worker entered in
//!   between). After that no worker can read the job, so the borrowed closure may die.
//!
//! A worker that is asleep when a job is published and wakes after the owner has done all
//! the work never delays the owner: it finds the generation closed and goes back to waiting.
//! Nothing is allocated per job: the job is a borrowed trait object on the owner's stack.
//!
//! Waiting: a worker spins (with `spin_loop` hints) for at most [`SPIN`] after its last job
//! while the pool is *hot* (the owner is inside a model run), then parks; when the owner's run
//! ends ([`Pool::cool`]) spinning workers park at once, so an idle session costs no CPU. A run
//! starting ([`Pool::heat`]) wakes the parked workers, so they are up by its first parallel
//! kernel. A worker spins only off the CPU the owner last ran on: woken onto the owner's CPU
//! (what the scheduler does when the other CPUs are busy) it would preempt the owner and
//! spin while the owner waits for that CPU — measured: 100 µs added to a 50 µs run — so it
//! parks at once instead. CPU bound of the spin: at most [`SPIN`] per worker per idle gap
//! inside a run (and after a run's start), none outside runs. The owner waiting for a
//! worker inside a job spins briefly, then yields its CPU on each check ([`close`]).

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// How long an idle worker spins for the next job while the owner is running a model.
pub const SPIN: Duration = Duration::from_micros(100);

const CLOSED: u64 = 1 << 31;
const ENTERED: u64 = CLOSED - 1;

/// The job being run: a borrowed closure of `(task index, thread index)`, lifetime erased.
type JobFn = dyn Fn(usize, usize) + Sync;

struct Shared {
    /// `generation << 32 | closed << 31 | workers inside the job`.
    state: AtomicU64,
    /// The job of the current generation; written by the owner only while no worker is
    /// inside (the previous generation is closed with `entered == 0`).
    job: UnsafeCell<Option<*const JobFn>>,
    /// Tasks of the current job.
    tasks: AtomicUsize,
    /// Threads that may take part in the current job (workers `w >= width` stay out).
    width: AtomicUsize,
    /// Next unclaimed task index.
    next: AtomicUsize,
    /// The owner is inside a run: idle workers spin before they park.
    hot: AtomicBool,
    /// Workers exit.
    shutdown: AtomicBool,
    /// A task panicked on a worker during the current job.
    poisoned: AtomicBool,
    /// Workers that have started (their thread set up) and wait for jobs.
    started: AtomicUsize,
    /// Per worker: it is parked (or about to park) and needs an unpark (cleared by whoever
    /// unparks it, so that it is unparked once).
    sleeping: Vec<AtomicBool>,
    /// Per worker: it is running (set by the worker itself when it comes back from parking,
    /// cleared when it goes to park): a worker unparked but not yet scheduled is not awake.
    awake: Vec<AtomicBool>,
    /// Times a worker came back from parking (tests see wake-ups).
    wakes: AtomicUsize,
    /// The CPU the owner last ran on (at [`Pool::heat`] and at each job; `usize::MAX`:
    /// unknown). A worker running on it has most likely preempted the owner, so it parks
    /// instead of spinning (see [`worker`]).
    owner_cpu: AtomicUsize,
    /// Times a worker gave up spinning because it found itself on the owner's CPU.
    yielded: AtomicUsize,
}

// SAFETY: the `UnsafeCell` is written only by the owner while no worker can read it (see the
// protocol above), and read by workers only after entering a generation with an acquire
// compare-exchange on `state` that follows the owner's release store of that generation. The
// raw job pointer refers to a `Sync` closure borrowed for the whole generation.
unsafe impl Sync for Shared {}
// SAFETY: as above; the pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// A fork-join pool of `threads` threads (the caller and `threads - 1` workers).
///
/// `Send` but not `Sync`: jobs are published by the one thread that holds the pool.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<(Thread, JoinHandle<()>)>,
    threads: usize,
    /// Jobs published to the workers so far (jobs run inline are not counted).
    jobs: std::cell::Cell<u64>,
    /// Jobs found worth the workers ([`super::width`]), whether published or run inline
    /// while the workers were asleep, plus the published ones of direct callers.
    wanted: std::cell::Cell<u64>,
    /// `wanted` at the last [`Pool::heat`].
    wanted_at_heat: std::cell::Cell<u64>,
    /// Every job goes to the workers whatever its cost ([`Pool::set_eager`]).
    eager: std::cell::Cell<bool>,
    /// Workers' same-CPU give-ups (`Shared::yielded`) at the last [`Pool::heat`].
    yielded_at_heat: std::cell::Cell<usize>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish()
    }
}

impl Pool {
    /// A pool running jobs on `threads` threads (at least 1): the calling thread and
    /// `threads - 1` workers spawned now, parked until the first job. Fails when the
    /// operating system refuses a thread.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            state: AtomicU64::new(CLOSED),
            job: UnsafeCell::new(None),
            tasks: AtomicUsize::new(0),
            width: AtomicUsize::new(threads),
            next: AtomicUsize::new(0),
            hot: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            started: AtomicUsize::new(0),
            sleeping: (1..threads).map(|_| AtomicBool::new(false)).collect(),
            awake: (1..threads).map(|_| AtomicBool::new(true)).collect(),
            wakes: AtomicUsize::new(0),
            owner_cpu: AtomicUsize::new(usize::MAX),
            yielded: AtomicUsize::new(0),
        });
        let mut pool = Pool {
            shared,
            workers: Vec::with_capacity(threads - 1),
            threads,
            jobs: std::cell::Cell::new(0),
            wanted: std::cell::Cell::new(0),
            wanted_at_heat: std::cell::Cell::new(0),
            eager: std::cell::Cell::new(false),
            yielded_at_heat: std::cell::Cell::new(0),
            _not_sync: std::marker::PhantomData,
        };
        for w in 1..threads {
            let s = pool.shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("arenac-{w}"))
                .spawn(move || worker(&s, w))?;
            pool.workers.push((handle.thread().clone(), handle));
        }
        // Wait until every worker has set its thread up (what a new thread allocates happens
        // now, not during the first run).
        while pool.shared.started.load(Ordering::Acquire) < threads - 1 {
            std::thread::yield_now();
        }
        Ok(pool)
    }

    /// Threads a job runs on (the caller included).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Jobs this pool has published to its workers (a job of one task, or on a one-thread
    /// pool, runs inline and is not counted): how tests see that a kernel went parallel.
    pub fn jobs(&self) -> u64 {
        self.jobs.get()
    }

    /// Marks the start of a model run: idle workers spin (up to [`SPIN`]) between jobs
    /// instead of parking at once, and parked workers are woken now, so that their wake-up
    /// (a futex and, on a VM, a halted virtual CPU: tens of µs) overlaps the run's first
    /// kernels instead of delaying its first parallel one (after a pause between runs every
    /// worker is parked). A woken worker that sees no job within [`SPIN`] parks again.
    ///
    /// Only when the previous run had a job worth the workers (published, or run inline
    /// because they were asleep: [`super::width`]): a program without parallel kernels (a
    /// tiny model) never pays for a wake-up (which, on a busy machine, can preempt the owner
    /// itself).
    pub fn heat(&self) {
        let s = &*self.shared;
        s.owner_cpu.store(current_cpu(), Ordering::Relaxed);
        s.hot.store(true, Ordering::SeqCst);
        self.yielded_at_heat.set(s.yielded.load(Ordering::Relaxed));
        let wanted = self.wanted.get();
        if self.wanted_at_heat.replace(wanted) == wanted {
            return;
        }
        self.unpark_parked(self.workers.len());
    }

    /// Unparks the parked ones among the first `n` workers, each once (whoever clears its
    /// `sleeping` flag unparks it).
    fn unpark_parked(&self, n: usize) {
        let s = &*self.shared;
        for (w, (thread, _)) in self.workers.iter().enumerate().take(n) {
            if s.sleeping[w].load(Ordering::SeqCst) && s.sleeping[w].swap(false, Ordering::SeqCst) {
                thread.unpark();
            }
        }
    }

    /// Workers parked now (or about to park): how tests see that an idle pool sleeps.
    pub fn parked(&self) -> usize {
        self.shared
            .sleeping
            .iter()
            .filter(|f| f.load(Ordering::SeqCst))
            .count()
    }

    /// Counts a job found worth the workers but run inline (they were asleep): the next run
    /// wakes them at its start ([`Pool::heat`]).
    pub(crate) fn note_wanted(&self) {
        self.wanted.set(self.wanted.get() + 1);
    }

    /// With `true`, [`super::width`] gives every job its full width, skipping the cost
    /// check (tests of the parallel code paths on small inputs); `false` (the default)
    /// restores it.
    pub fn set_eager(&self, eager: bool) {
        self.eager.set(eager);
    }

    /// Whether [`Pool::set_eager`] is on.
    pub fn eager(&self) -> bool {
        self.eager.get()
    }

    /// Whether one of the workers a job of `width` threads would use is parked (or about to
    /// park): such a job pays a wake-up ([`super::cost::WAKE_NS`]).
    pub fn asleep(&self, width: usize) -> bool {
        let n = width.min(self.threads).saturating_sub(1);
        self.shared.awake[..n]
            .iter()
            .any(|f| !f.load(Ordering::Relaxed))
    }

    /// Wakes the parked workers among the first `width` threads so that they spin for the
    /// next jobs of this run, unless a worker has already given up spinning in this run
    /// because it was woken onto the owner's CPU (waking it again would preempt the owner
    /// again). Costs the caller a futex wake per parked worker.
    pub fn wake_for_later(&self, width: usize) {
        let s = &*self.shared;
        if s.yielded.load(Ordering::Relaxed) != self.yielded_at_heat.get() {
            return;
        }
        s.owner_cpu.store(current_cpu(), Ordering::Relaxed);
        self.unpark_parked(width.saturating_sub(1));
    }

    /// Times a worker parked instead of spinning because it ran on the CPU the owner last
    /// ran on (see [`worker`]).
    pub fn yielded(&self) -> usize {
        self.shared.yielded.load(Ordering::Relaxed)
    }

    /// Times a worker came back from parking (a wake-up, or a spurious return of `park`).
    pub fn wakes(&self) -> usize {
        self.shared.wakes.load(Ordering::Relaxed)
    }

    /// Marks the end of a model run: spinning workers park now.
    pub fn cool(&self) {
        self.shared.hot.store(false, Ordering::Relaxed);
    }

    /// Runs `f(task, thread)` for every `task` in `0..tasks`, spread over at most `width` of
    /// the pool's threads (`thread < min(width, threads())`, 0 being the caller); returns
    /// when all are done. Each task runs exactly once; which thread runs it is not fixed.
    /// Allocates nothing.
    ///
    /// Must not be called from inside a job of the same pool (the caller is the owner).
    pub fn run(&self, tasks: usize, width: usize, f: &(dyn Fn(usize, usize) + Sync)) {
        if tasks == 0 {
            return;
        }
        if self.threads == 1 || tasks == 1 || width <= 1 {
            (0..tasks).for_each(|t| f(t, 0));
            return;
        }
        self.jobs.set(self.jobs.get() + 1);
        self.wanted.set(self.wanted.get() + 1);
        let s = &*self.shared;
        // SAFETY: erases the closure's lifetime. The pointer is read by workers only inside
        // this generation, which is closed below (with no worker inside) before `f`'s borrow
        // ends at the return of this function.
        let job: *const JobFn = unsafe {
            std::mem::transmute::<&(dyn Fn(usize, usize) + Sync + '_), &'static JobFn>(f)
        };
        // SAFETY: the previous generation is closed with no worker inside (the invariant
        // `run` re-establishes before returning), so nobody reads the slot now.
        unsafe { *s.job.get() = Some(job) };
        s.tasks.store(tasks, Ordering::Relaxed);
        s.width.store(width, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        s.owner_cpu.store(current_cpu(), Ordering::Relaxed);
        let gen_next = (s.state.load(Ordering::Relaxed) >> 32).wrapping_add(1) & 0xffff_ffff;
        s.state.store(gen_next << 32, Ordering::SeqCst);
        self.unpark_parked(width - 1);
        // Closes the generation even if a task of ours panics: `f` must outlive every worker
        // inside it.
        struct Close<'a>(&'a Shared);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                close(self.0);
            }
        }
        let closer = Close(s);
        run_tasks(s, f, 0);
        drop(closer);
        if s.poisoned.swap(false, Ordering::AcqRel) {
            panic!("a task of a parallel kernel panicked on a worker thread");
        }
    }
}

/// Spins of [`close`] before it starts yielding its CPU (about a microsecond of `pause`s).
const CLOSE_SPINS: u32 = 64;

/// Waits until no worker is inside the current generation, then closes it.
///
/// A worker inside normally finishes its last task within microseconds, so the owner spins;
/// but a worker that shares the owner's CPU and was preempted mid-task cannot finish while
/// the owner spins, so after [`CLOSE_SPINS`] the owner yields its CPU on each check.
fn close(s: &Shared) {
    let mut spins = 0u32;
    loop {
        let cur = s.state.load(Ordering::Acquire);
        if cur & ENTERED == 0 {
            if s.state
                .compare_exchange_weak(cur, cur | CLOSED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
        } else if spins < CLOSE_SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The CPU this thread runs on now (`usize::MAX` where the platform cannot tell).
fn current_cpu() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_getcpu` has no preconditions (glibc answers from the vDSO).
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu >= 0 {
            return cpu as usize;
        }
    }
    usize::MAX
}

/// The CPUs a worker may run on (its affinity mask when it started: the process's, as
/// `taskset` or a cgroup set it), to move itself off the owner's CPU.
struct Affinity {
    #[cfg(target_os = "linux")]
    mask: libc::cpu_set_t,
}

impl Affinity {
    /// This thread's mask; `None` where it cannot be read (or on other systems).
    fn of_this_thread() -> Option<Affinity> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at
            // most `size_of::<cpu_set_t>()` bytes into it.
            unsafe {
                let mut mask: libc::cpu_set_t = std::mem::zeroed();
                if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mask)
                    == 0
                {
                    return Some(Affinity { mask });
                }
            }
        }
        None
    }

    /// Restricts this thread to its CPUs but `cpu` and yields, so the scheduler moves it;
    /// `false` (nothing done) when `cpu` is its only one or the call fails.
    fn move_off(&self, cpu: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            let mut mask = self.mask;
            // SAFETY: CPU_* only read and write the set; `cpu` comes from sched_getcpu, below
            // CPU_SETSIZE; sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
            unsafe {
                if cpu >= libc::CPU_SETSIZE as usize {
                    return false;
                }
                libc::CPU_CLR(cpu, &mut mask);
                if libc::CPU_COUNT(&mask) == 0
                    || libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask)
                        != 0
                {
                    return false;
                }
            }
            std::thread::yield_now();
            true
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = cpu;
            false
        }
    }
}

/// Claims and runs tasks of the current job until none are left.
fn run_tasks(s: &Shared, f: &(dyn Fn(usize, usize) + Sync + '_), thread: usize) {
    let tasks = s.tasks.load(Ordering::Relaxed);
    loop {
        let t = s.next.fetch_add(1, Ordering::Relaxed);
        if t >= tasks {
            break;
        }
        f(t, thread);
    }
}

fn worker(s: &Shared, w: usize) {
    // Anything lazily set up per thread (the current-thread handle parking needs) is made
    // before the pool reports the worker ready.
    let _ = std::thread::current();
    let allowed = Affinity::of_this_thread();
    s.started.fetch_add(1, Ordering::Release);
    let mut seen = CLOSED >> 32; // generation 0, the initial closed one
    let mut idle_since = Instant::now();
    let mut spins = 0u32;
    loop {
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        let mut cur = s.state.load(Ordering::Acquire);
        let generation = cur >> 32;
        if generation != seen {
            seen = generation;
            if w >= s.width.load(Ordering::Relaxed) {
                continue;
            }
            // Enter while the generation is current and open (other workers entering at the
            // same time change the count: retry).
            while cur >> 32 == generation && cur & CLOSED == 0 {
                match s.state.compare_exchange_weak(
                    cur,
                    cur + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        // SAFETY: entered the open generation: the owner wrote its job before
                        // publishing it and neither closes it nor touches the slot while we
                        // are inside.
                        if let Some(job) = unsafe { *s.job.get() } {
                            // SAFETY: the closure outlives the generation (see `Pool::run`).
                            let job = unsafe { &*job };
                            let ran =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    run_tasks(s, job, w)
                                }));
                            if ran.is_err() {
                                // The owner re-raises it; the remaining tasks stay claimable.
                                s.poisoned.store(true, Ordering::Release);
                            }
                        }
                        s.state.fetch_sub(1, Ordering::AcqRel);
                        break;
                    }
                    Err(now) => cur = now,
                }
            }
            idle_since = Instant::now();
            spins = 0;
            continue;
        }
        // Spin while the owner runs, for at most SPIN, and only off the owner's CPU: a worker
        // woken onto the CPU the owner was running on (the scheduler's choice when the other
        // CPUs are busy) would otherwise spin while the owner waits for that CPU.
        let check = spins.is_multiple_of(64);
        spins = spins.wrapping_add(1);
        let hot = s.hot.load(Ordering::Relaxed);
        if hot && !check {
            std::hint::spin_loop();
            continue;
        }
        if hot && idle_since.elapsed() < SPIN {
            let cpu = current_cpu();
            if cpu == usize::MAX || cpu != s.owner_cpu.load(Ordering::Relaxed) {
                std::hint::spin_loop();
                continue;
            }
            // Move to another CPU this thread may run on and spin there: on an idle
            // machine the scheduler wakes a worker onto its waker's CPU, and parking would
            // leave the run without its workers.
            if allowed.as_ref().is_some_and(|a| a.move_off(cpu)) {
                continue;
            }
            s.yielded.fetch_add(1, Ordering::Relaxed);
        }
        // Park: announce it, re-check for a job published meanwhile, then sleep.
        let flag = &s.sleeping[w - 1];
        s.awake[w - 1].store(false, Ordering::Relaxed);
        flag.store(true, Ordering::SeqCst);
        if s.state.load(Ordering::SeqCst) >> 32 == seen && !s.shutdown.load(Ordering::SeqCst) {
            std::thread::park();
            s.wakes.fetch_add(1, Ordering::Relaxed);
        }
        flag.store(false, Ordering::SeqCst);
        s.awake[w - 1].store(true, Ordering::Relaxed);
        idle_since = Instant::now();
        spins = 0;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        for (thread, _) in &self.workers {
            thread.unpark();
        }
        for (_, handle) in self.workers.drain(..) {
            let _ = handle.join();
        }
    }
}
