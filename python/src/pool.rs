//! One compiled model and its pool of sessions (arenas), shared by the Python threads that
//! run it.
//!
//! A run takes an idle session from the pool, or creates one (a new arena) while fewer than
//! `max_sessions` exist, or waits for one to come back. So several Python threads run one
//! `InferenceSession` at once, each in its own arena, and memory stays bounded: weights once,
//! plus at most `max_sessions` arenas.

use std::sync::{Condvar, Mutex, MutexGuard};

use arenac::{Model, RunError, Session};

use crate::errors::{Failure, Kind};

/// A compiled model, the input shapes it was compiled for, and its sessions.
pub struct Compiled {
    /// The input shapes (in graph-input order) this model was compiled for.
    pub shapes: Vec<Vec<usize>>,
    /// The compiled model.
    pub model: Model,
    state: Mutex<PoolState>,
    returned: Condvar,
    max_sessions: usize,
}

struct PoolState {
    idle: Vec<Session>,
    created: usize,
}

/// A session taken from a [`Compiled`]'s pool; it goes back when dropped.
pub struct Lease<'a> {
    pool: &'a Compiled,
    session: Option<Session>,
}

impl Compiled {
    /// Wraps a compiled model whose pool may grow to `max_sessions` sessions (at least 1).
    pub fn new(shapes: Vec<Vec<usize>>, model: Model, max_sessions: usize) -> Compiled {
        Compiled {
            shapes,
            model,
            state: Mutex::new(PoolState {
                idle: Vec::new(),
                created: 0,
            }),
            returned: Condvar::new(),
            max_sessions: max_sessions.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A panic while holding the lock leaves the pool's list intact: keep using it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sessions created so far (each holds one arena).
    pub fn sessions(&self) -> usize {
        self.lock().created
    }

    /// Takes an idle session, creates one if the pool may still grow, or waits for one.
    pub fn lease(&self) -> Result<Lease<'_>, Failure> {
        let mut state = self.lock();
        loop {
            if let Some(session) = state.idle.pop() {
                return Ok(Lease {
                    pool: self,
                    session: Some(session),
                });
            }
            if state.created < self.max_sessions {
                state.created += 1;
                drop(state);
                return match Session::new(&self.model) {
                    Ok(session) => Ok(Lease {
                        pool: self,
                        session: Some(session),
                    }),
                    Err(e) => {
                        self.lock().created -= 1;
                        self.returned.notify_one();
                        Err(session_failure(e))
                    }
                };
            }
            state = self.returned.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

fn session_failure(e: RunError) -> Failure {
    let kind = match e {
        RunError::ArenaAlloc { .. } => Kind::MemoryLimitExceeded,
        _ => Kind::Error,
    };
    Failure::new(kind, e.to_string())
}

impl Lease<'_> {
    /// The leased session.
    pub fn session(&mut self) -> &mut Session {
        // Present from `lease` until `drop`.
        self.session.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            self.pool.lock().idle.push(s);
            self.pool.returned.notify_one();
        }
    }
}
