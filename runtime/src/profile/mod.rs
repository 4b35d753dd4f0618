//! Per-node profiles of runs: [`Profile`] holds the times of up to a fixed number of runs,
//! recorded by [`crate::Session::run_profiled`] into memory allocated when the profile is
//! created (a profiled run allocates nothing), and turns them into a Chrome trace
//! ([`Profile::to_trace_json`], see `trace.rs`) or a per-op-type summary
//! ([`Profile::summary`]).
//!
//! The model must be compiled with [`crate::CompileOptions::profile`]: its program then calls a
//! timer hook between nodes (without it, the program has no such call). What each node is (op
//! types, shapes, bytes, FLOPs, kernel path, live arena bytes) was fixed at compile time
//! ([`NodeProfile`]); a run adds only its stamps.
//!
//! Times are nanoseconds since compilation started (of the whole [`crate::compile_file`] for
//! [`Profile::for_model`], of code generation for [`Profile::new`]): the trace's time zero,
//! where its `session_initialization` event begins.

mod summary;
mod trace;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arenac_compiler::codegen::Executable;
pub use arenac_compiler::codegen::profile::NodeProfile;
pub use summary::{ProfileSummary, SummaryRow};

use crate::session::RunError;

/// Most node events one profile holds (ONNX Runtime's profiler stops at the same count):
/// a profile asked for more runs keeps the first ones and counts the others as dropped.
pub const MAX_EVENTS: usize = 1_000_000;

/// The times of profiled runs of one compiled model (see the module doc).
pub struct Profile {
    pub(crate) exe: Arc<Executable>,
    /// Time zero.
    pub(crate) origin: Instant,
    /// How long compiling took (the `session_initialization` event).
    init: Duration,
    /// Slots per run: run start, one per node, the end of the last node, run end.
    per_run: usize,
    /// `capacity * per_run` slots, zero until written.
    stamps: Vec<u64>,
    runs: usize,
    dropped: usize,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("nodes", &self.nodes().len())
            .field("runs", &self.runs)
            .field("capacity", &self.capacity())
            .field("dropped", &self.dropped)
            .finish()
    }
}

/// The times of one recorded run, in nanoseconds since compilation started.
#[derive(Clone, Copy, Debug)]
pub struct RunTimes<'p> {
    /// When [`crate::Session::run_profiled`] was entered (before the inputs were checked and
    /// copied).
    pub start: u64,
    /// When it returned.
    pub end: u64,
    /// `nodes[k]`: when node `k` started; the last entry: when the last node ended.
    pub marks: &'p [u64],
}

impl RunTimes<'_> {
    /// Start and duration of node `k`, nanoseconds.
    pub fn node(&self, k: usize) -> Option<(u64, u64)> {
        let (&a, &b) = (self.marks.get(k)?, self.marks.get(k + 1)?);
        Some((a, b.saturating_sub(a)))
    }
}

impl Profile {
    /// A profile with room for `runs` runs of `exe` (at most [`MAX_EVENTS`] node events; at
    /// least one run), its time zero when code generation started. Fails with
    /// [`RunError::NotProfiled`] unless `exe` was compiled with profiling.
    pub fn new(exe: Arc<Executable>, runs: usize) -> Result<Profile, RunError> {
        let (origin, init) = (exe.compile_started(), exe.compile_time());
        Profile::with_origin(exe, runs, origin, init)
    }

    fn with_origin(
        exe: Arc<Executable>,
        runs: usize,
        origin: Instant,
        init: Duration,
    ) -> Result<Profile, RunError> {
        let nodes = exe.profile().ok_or(RunError::NotProfiled)?.nodes.len();
        let per_run = nodes + 3;
        let capacity = runs.min(MAX_EVENTS / nodes.max(1)).max(1);
        let stamps = capacity
            .checked_mul(per_run)
            .map(|n| vec![0u64; n])
            .ok_or(RunError::ArenaAlloc { bytes: usize::MAX })?;
        Ok(Profile {
            exe,
            origin,
            init,
            per_run,
            stamps,
            runs: 0,
            dropped: 0,
        })
    }

    /// A profile for runs of `model` (see [`Profile::new`]), its time zero when
    /// [`crate::compile_file`] started.
    pub fn for_model(model: &crate::Model, runs: usize) -> Result<Profile, RunError> {
        let exe = model.executable().ok_or(RunError::NotCompiled)?.clone();
        let (origin, init) = model.compile_timing();
        Profile::with_origin(exe, runs, origin, init)
    }

    /// How long compiling took (from time zero).
    pub fn compile_time(&self) -> Duration {
        self.init
    }

    /// The executed nodes, in run order, with what was fixed at compile time.
    pub fn nodes(&self) -> &[NodeProfile] {
        self.exe.profile().map_or(&[], |p| p.nodes.as_slice())
    }

    /// The compiled program profiled.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exe
    }

    /// Runs recorded.
    pub fn runs(&self) -> usize {
        self.runs
    }

    /// Runs this profile can hold.
    pub fn capacity(&self) -> usize {
        self.stamps.len() / self.per_run
    }

    /// Runs made after the profile was full (they ran, their times were not kept).
    pub fn dropped_runs(&self) -> usize {
        self.dropped
    }

    /// Forgets the recorded runs (the memory stays).
    pub fn clear(&mut self) {
        self.runs = 0;
        self.dropped = 0;
    }

    /// The times of recorded run `r`.
    pub fn run(&self, r: usize) -> Option<RunTimes<'_>> {
        if r >= self.runs {
            return None;
        }
        let s = self.stamps.get(r * self.per_run..(r + 1) * self.per_run)?;
        let (&start, rest) = s.split_first()?;
        let (&end, marks) = rest.split_last()?;
        Some(RunTimes { start, end, marks })
    }

    /// The slots of the next run, or `None` when full.
    pub(crate) fn next_slots(&mut self) -> Option<&mut [u64]> {
        let at = self.runs.checked_mul(self.per_run)?;
        self.stamps.get_mut(at..at + self.per_run)
    }

    /// Counts the run whose slots [`Profile::next_slots`] gave (or a dropped one).
    pub(crate) fn commit(&mut self, recorded: bool) {
        if recorded {
            self.runs += 1;
        } else {
            self.dropped += 1;
        }
    }

    /// Nanoseconds since compilation started.
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}
