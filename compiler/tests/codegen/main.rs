//! Differential tests of the generated code against the reference evaluation
//! (`ir::eval::eval_graph`): tiny models built with `ModelBuilder`, imported, planned,
//! compiled and run inside an aligned arena; plus the demo model against onnxruntime.
//! One test binary, one module per op family.

mod act16;
mod act16_inputs;
mod attention;
mod bitcast;
mod common;
mod concat;
mod control;
mod conv_act;
mod conv_direct;
mod convt;
mod convt16;
mod deform;
mod dense;
mod dropout;
mod einsum;
mod elementwise;
mod faults;
mod fused;
mod gated;
mod geometry;
mod indexing;
mod kvcache;
mod logical;
mod loss;
mod lrn;
mod models;
mod move16;
mod movement;
mod norm;
mod patches;
mod patches_convt;
mod patches_csp;
mod pool3d;
mod pow;
mod pw_small;
mod qlinear;
mod quant;
mod reduce;
mod residual;
mod residual16;
mod resize;
mod rnn;
mod runtime_operands;
mod sample;
mod spectral;
mod storage;
mod threads;
mod typed;
mod widen;
