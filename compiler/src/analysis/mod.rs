//! Analyses over the typed graph that feed planning: the execution order ([`schedule`]) and
//! buffer lifetimes ([`liveness`]).

pub mod liveness;
pub mod schedule;
