//! Analyses over the typed graph that feed planning: the execution order ([`schedule`]) and
//! buffer lifetimes ([`liveness`]), and the graph rewrite that precedes planning
//! ([`fuse`]: element-wise fusion).

pub mod fuse;
pub mod liveness;
pub mod schedule;
