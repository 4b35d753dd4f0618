//! The fault record: how generated code reports a run-time fault — an index outside its dim
//! (Gather, GatherElements, GatherND, ScatterElements, ScatterND) or a sequence length outside
//! the time dim (ReverseSequence), which ONNX calls errors — without heap allocation and
//! with nothing to do while every value is in range.
//!
//! # Where it lives
//! [`FAULT_RECORD_BYTES`] (one cache line) at the end of the arena, at a 64-aligned offset
//! after the plan's buffers, present only when some kernel checks. Each arena (each
//! `Session`) therefore has its own record, and every kernel of one run — on any thread —
//! reports into the same one.
//!
//! # Protocol
//! A checking kernel takes two extra parameters, the record's address and its node's *tag*
//! (the node's position in the executable's table of checked nodes, plus one). It compares
//! each run-time value with its valid range, replaces a bad one by a valid one (so no access
//! ever leaves the tensor, fault or not) and, when it was outside, in a cold block:
//! 1. `atomic_cas(state, 0 → 1)`: the first reporter of the run claims the record; every
//!    later one (another element, node or thread) sees a non-zero state and writes nothing;
//! 2. the claimer writes its tag, the value and the range's bounds (plain stores);
//! 3. then `atomic_store(state, 2)` (sequentially consistent).
//!
//! The executable zeroes `state` before calling the program and reads the record after it
//! returned: by then every kernel of the run has finished (a thread pool joins its workers
//! before the entry function returns, which orders their writes before the read), so the
//! reader sees `0` (no fault) or `2` with exactly one reporter's whole record — never fields
//! of two reporters, since losers write nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;

/// Bytes of the record (a multiple of the arena alignment).
pub const FAULT_RECORD_BYTES: usize = 64;

/// `state`: 0 clear, 1 claimed, 2 written.
const STATE: i32 = 0;
const TAG: i32 = 8;
const VALUE: i32 = 16;
const LO: i32 = 24;
const HI: i32 = 32;

/// A node whose kernel checks run-time values, as the executable's table holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedNode {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op: String,
    /// What its kernel checks ("index", "sequence length", "branch").
    pub what: &'static str,
    /// For a fault that is the whole message (a run taking an `If` branch that cannot run,
    /// see [`crate::ops::control::Unrunnable`]): that message; the value and range mean
    /// nothing then.
    pub detail: Option<String>,
}

/// A fault reported by a run: which node, what value, and the valid range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFault<'a> {
    /// Node name (`"?"` when the record was claimed but not written: an arenac bug).
    pub node: &'a str,
    /// Op type.
    pub op: &'a str,
    /// What was out of range ("index", "sequence length").
    pub what: &'static str,
    /// The value as the model gave it (before negative indices are counted from the end).
    pub value: i64,
    /// Lowest valid value.
    pub lo: i64,
    /// Highest valid value.
    pub hi: i64,
    /// The whole message, for a fault that is no value out of range ([`CheckedNode::detail`]).
    pub detail: Option<&'a str>,
}

impl std::fmt::Display for RunFault<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(d) = self.detail {
            return write!(f, "node '{}' ({}): {d}", self.node, self.op);
        }
        write!(
            f,
            "node '{}' ({}): {} {} is out of range (valid: {} to {})",
            self.node, self.op, self.what, self.value, self.lo, self.hi
        )
    }
}

/// Where a checking kernel reports: its record and tag parameters.
#[derive(Clone, Copy, Debug)]
pub struct FaultSink {
    /// The record's address.
    pub record: Value,
    /// The node's tag.
    pub tag: Value,
}

impl FaultSink {
    /// Emits the report of `v` (an i64 outside `lo..=hi`) when `bad` (an `icmp` result the
    /// caller computed, usually one unsigned compare) is set. Code after it continues in a
    /// new block.
    pub fn report_if(&self, b: &mut FunctionBuilder<'_>, bad: Value, v: Value, lo: i64, hi: i64) {
        let report = b.create_block();
        let write = b.create_block();
        let cont = b.create_block();
        b.set_cold_block(report);
        b.set_cold_block(write);
        b.ins().brif(bad, report, &[], cont, &[]);

        b.switch_to_block(report);
        let flags = MemFlagsData::new().with_notrap().with_aligned();
        let zero = b.ins().iconst(I64, 0);
        let one = b.ins().iconst(I64, 1);
        let record = self.record;
        let claim = b.ins().iadd_imm_s(record, i64::from(STATE));
        let old = b.ins().atomic_cas(flags, claim, zero, one);
        let won = b.ins().icmp_imm_s(IntCC::Equal, old, 0);
        b.ins().brif(won, write, &[], cont, &[]);

        b.switch_to_block(write);
        let lo_v = b.ins().iconst(I64, lo);
        let hi_v = b.ins().iconst(I64, hi);
        for (x, at) in [(self.tag, TAG), (v, VALUE), (lo_v, LO), (hi_v, HI)] {
            b.ins().store(flags, x, record, at);
        }
        let two = b.ins().iconst(I64, 2);
        b.ins().atomic_store(flags, two, claim);
        b.ins().jump(cont, &[]);

        b.switch_to_block(cont);
    }
}

/// Emits an unconditional report with value `v` (a kernel that only faults: a run taking an
/// `If` branch that cannot run).
pub fn emit_trap(b: &mut FunctionBuilder<'_>, sink: FaultSink, v: i64) {
    let val = b.ins().iconst(I64, v);
    let always = b.ins().icmp_imm_s(IntCC::Equal, val, v);
    sink.report_if(b, always, val, 0, 0);
}

/// The record's word `at` bytes into it, as an atomic.
///
/// # Safety
/// `arena + offset` must be 8-aligned and valid for [`FAULT_RECORD_BYTES`] bytes, for as long
/// as the returned reference is used.
unsafe fn word<'a>(arena: *mut u8, offset: usize, at: i32) -> &'a AtomicU64 {
    // SAFETY: the caller guarantees the record lies in the arena, 8-aligned, for 'a; `at` is
    // one of the word offsets above, inside the record.
    unsafe { AtomicU64::from_ptr(arena.add(offset + at as usize).cast::<u64>()) }
}

/// Reports `value` outside `lo..=hi` for the node tagged `tag` from Rust code (a precompiled
/// kernel, `super::host`), by the protocol above: only the run's first reporter writes.
///
/// # Safety
/// `record` is the fault record's address (the fault sink's first operand): 8-aligned and
/// valid for [`FAULT_RECORD_BYTES`] bytes during the run.
pub unsafe fn report(record: *mut u8, tag: u64, value: i64, lo: i64, hi: i64) {
    // SAFETY: forwarded from the caller.
    let state = unsafe { word(record, 0, STATE) };
    if state
        .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    for (x, at) in [
        (tag, TAG),
        (value as u64, VALUE),
        (lo as u64, LO),
        (hi as u64, HI),
    ] {
        // SAFETY: as above.
        unsafe { word(record, 0, at) }.store(x, Ordering::Relaxed);
    }
    state.store(2, Ordering::SeqCst);
}

/// Clears the record before a run.
///
/// # Safety
/// `arena + offset` must be 8-aligned and valid for [`FAULT_RECORD_BYTES`] bytes; no kernel
/// runs meanwhile.
pub unsafe fn clear(arena: *mut u8, offset: usize) {
    // SAFETY: forwarded from the caller.
    let state = unsafe { word(arena, offset, STATE) };
    state.store(0, Ordering::Relaxed);
}

/// The fault the run reported, if any, named through `table` (tag `k` is entry `k - 1`).
///
/// # Safety
/// `arena + offset` must be 8-aligned and valid for [`FAULT_RECORD_BYTES`] bytes, and the
/// run must have returned (every kernel finished).
pub unsafe fn read(arena: *mut u8, offset: usize, table: &[CheckedNode]) -> Option<RunFault<'_>> {
    let mut w = [0u64; 5];
    for (x, at) in w.iter_mut().zip([STATE, TAG, VALUE, LO, HI]) {
        // SAFETY: forwarded from the caller; the state is read first (acquire), then the
        // fields its writer stored before releasing it.
        let a = unsafe { word(arena, offset, at) };
        *x = a.load(Ordering::Acquire);
    }
    let [state, tag, value, lo, hi] = w;
    if state == 0 {
        return None;
    }
    // State 1 (claimed, never written) cannot happen after a finished run: no entry.
    let entry = usize::try_from(tag)
        .ok()
        .filter(|_| state == 2)
        .and_then(|t| t.checked_sub(1))
        .and_then(|i| table.get(i));
    Some(RunFault {
        node: entry.map_or("?", |e| e.node.as_str()),
        op: entry.map_or("?", |e| e.op.as_str()),
        what: entry.map_or("value", |e| e.what),
        value: value as i64,
        lo: lo as i64,
        hi: hi as i64,
        detail: entry.and_then(|e| e.detail.as_deref()),
    })
}
