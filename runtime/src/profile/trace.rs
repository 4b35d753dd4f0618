//! The Chrome trace-event form of a [`Profile`], laid out as ONNX Runtime's profiler writes
//! it so that its tools read it (`python -m onnxruntime.transformers.profiler`'s
//! `profile_result_processor`, Perfetto, chrome://tracing):
//!
//! - a top-level JSON array, one event per line, sorted by `ts`; `ts` and `dur` integer
//!   microseconds since compilation started (each node's `ts` and end are its stamps rounded
//!   down, so the durations of a run's nodes add up to its span exactly);
//! - `session_initialization` (cat `Session`) covering the compilation, one `model_run` per
//!   run, then per executed node an `"X"` event, cat `Node`, name `<node>_kernel_time`, with
//!   ONNX Runtime's args (`op_name`, `provider: "CPUExecutionProvider"`, `node_index`,
//!   `activation_size`, `parameter_size`, `output_size` as strings, `input_type_shape`,
//!   `output_type_shape` as `[{"float":[1,3,224,224]}]`) and arenac's own: `computes` (the op
//!   types done by the node: a fused node's steps, a Conv's epilogue activation), `kernel`,
//!   `flops`, `bytes` (moved), `dur_ns`, `step`, `run`;
//! - a counter (`"ph":"C"`, name `arena`) at each node's start: the arena bytes live at that
//!   step, as two stacked series `tensors` and `scratch`;
//! - metadata events naming the process and thread.
//!
//! Every event has a `cat` (ONNX Runtime's reader indexes it unconditionally).

use serde_json::{Value, json};

use super::Profile;
use arenac_compiler::import::text::elem_type_name;
use arenac_compiler::ir::types::{DType, TensorType};

/// ONNX Runtime's name of a tensor element type (`tensor(float)` without the wrapper): ONNX's
/// element type names, which cover every [`DType`].
fn ort_type(d: DType) -> &'static str {
    elem_type_name(d.to_onnx()).unwrap_or("unknown")
}

fn type_shapes(ts: &[TensorType]) -> Value {
    Value::Array(
        ts.iter()
            .map(|t| {
                let mut m = serde_json::Map::new();
                m.insert(ort_type(t.dtype).into(), json!(t.shape));
                Value::Object(m)
            })
            .collect(),
    )
}

fn us(ns: u64) -> u64 {
    ns / 1000
}

impl Profile {
    /// The recorded runs as a Chrome trace (see the module doc): a JSON array, one event per
    /// line.
    pub fn to_trace_json(&self) -> String {
        let pid = std::process::id();
        let tid = 1;
        let exe = &self.exe;
        let nodes = self.nodes();
        let mut events: Vec<Value> = vec![
            json!({"cat": "__metadata", "name": "process_name", "ph": "M", "pid": pid,
                   "tid": tid, "ts": 0, "args": {"name": "arenac"}}),
            json!({"cat": "__metadata", "name": "thread_name", "ph": "M", "pid": pid,
                   "tid": tid, "ts": 0, "args": {"name": "run"}}),
            json!({"cat": "Session", "pid": pid, "tid": tid, "ph": "X", "ts": 0,
                   "dur": self.compile_time().as_micros() as u64,
                   "name": "session_initialization",
                   "args": {"arena_bytes": exe.arena_bytes(), "weights_bytes": exe.weights_bytes(),
                            "kernels": exe.kernel_count(), "nodes": nodes.len()}}),
        ];
        for r in 0..self.runs() {
            let Some(run) = self.run(r) else { continue };
            events.push(json!({
                "cat": "Session", "pid": pid, "tid": tid, "ph": "X", "name": "model_run",
                "ts": us(run.start), "dur": us(run.end).saturating_sub(us(run.start)),
                "args": {"run": r, "dur_ns": run.end.saturating_sub(run.start)}
            }));
            for (k, n) in nodes.iter().enumerate() {
                let Some((start, dur)) = run.node(k) else {
                    continue;
                };
                let ts = us(start);
                let end = us(start.saturating_add(dur));
                events.push(json!({
                    "cat": "Memory", "pid": pid, "tid": tid, "ph": "C", "name": "arena", "ts": ts,
                    "args": {"tensors": n.live_bytes.saturating_sub(n.scratch_bytes),
                             "scratch": n.scratch_bytes}
                }));
                events.push(json!({
                    "cat": "Node", "pid": pid, "tid": tid, "ph": "X",
                    "name": format!("{}_kernel_time", n.name),
                    "ts": ts, "dur": end.saturating_sub(ts),
                    "args": {
                        "op_name": n.op_type,
                        "provider": "CPUExecutionProvider",
                        "node_index": n.node_index.to_string(),
                        "activation_size": n.activation_bytes.to_string(),
                        "parameter_size": n.parameter_bytes.to_string(),
                        "output_size": n.output_bytes.to_string(),
                        "input_type_shape": type_shapes(&n.inputs),
                        "output_type_shape": type_shapes(&n.outputs),
                        "computes": n.computes,
                        "kernel": n.kernel,
                        "flops": n.flops,
                        "bytes": n.bytes_moved(),
                        "dur_ns": dur,
                        "step": n.step,
                        "run": r,
                    }
                }));
            }
        }
        let mut out = String::from("[\n");
        for (i, e) in events.iter().enumerate() {
            out.push_str(&e.to_string());
            out.push_str(if i + 1 < events.len() { ",\n" } else { "\n" });
        }
        out.push_str("]\n");
        out
    }
}
