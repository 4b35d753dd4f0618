//! Analyses over the typed graph that feed planning: the execution order ([`schedule`]) and
//! buffer lifetimes ([`liveness`]), and the graph rewrites: [`widen`] (f16/bf16/f64 nodes
//! without a kernel of their own computed in f32, run at the end of import) and [`fuse`]
//! (element-wise fusion, run before planning), [`act_type`] (`--activations f16|bf16`: f32
//! intermediates stored in 16 bits, run before fusion).

pub mod act_type;
pub mod fuse;
pub mod liveness;
pub mod patches;
pub mod schedule;
pub mod weights_type;
pub mod widen;
