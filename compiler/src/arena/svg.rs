//! The arena as a picture: x = step, y = offset (0 at the bottom), one `<rect>` per arena
//! buffer coloured by kind, with the value names, sizes and steps in a `<title>` (shown on
//! hover). The peak step is a vertical dashed line and the lower bound a horizontal one. The
//! drawing is scaled into a fixed 1600 x 900 view box, so a 1,000-step model gets thin but
//! visible rectangles.
//!
//! Only `<rect>` elements draw buffers (the frame, grid and markers are `<path>`/`<line>`), so
//! the number of `<rect` tags equals the number of arena buffers.
//!
//! A plan with subgraphs (an `If`'s branches) gets one more panel of the same size below for
//! each subgraph plan, depth first, titled with the node and branch and the offset of its
//! sub-arena (the node's scratch buffer) in the enclosing arena. The `<rect` count is then the
//! buffers of every plan.

use std::fmt::Write as _;

use super::{ArenaPlan, grouped, human_bytes};
use crate::analysis::liveness::BufferKind;
use crate::ir::graph::Graph;

const W: f64 = 1600.0;
const H: f64 = 900.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 64.0;

fn colour(k: BufferKind) -> &'static str {
    match k {
        BufferKind::Input => "#4e79a7",
        BufferKind::Output => "#59a14f",
        BufferKind::Intermediate => "#f28e2b",
        BufferKind::Scratch => "#b07aa1",
    }
}

/// Escapes text for XML content and attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks.
fn tick_step(range: f64, target: f64) -> f64 {
    if range <= 0.0 {
        return 1.0;
    }
    let raw = range / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// The SVG document for `plan` of `g`: one panel for the plan, then one per subgraph plan.
pub fn render_svg(g: &Graph, plan: &ArenaPlan) -> String {
    let mut panels: Vec<(String, &Graph, &ArenaPlan)> = Vec::new();
    collect_panels(g, plan, String::new(), &mut panels);
    let total = H * panels.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {total}" width="{W}" height="{total}" font-family="sans-serif" font-size="13">"#
    );
    for (i, (title, pg, pp)) in panels.iter().enumerate() {
        let _ = writeln!(s, r#"<g transform="translate(0 {})">"#, H * i as f64);
        panel(&mut s, pg, pp, title);
        let _ = writeln!(s, "</g>");
    }
    let _ = writeln!(s, "</svg>");
    s
}

/// `plan` and its subgraph plans, depth first, each with the title prefix of its panel.
fn collect_panels<'a>(
    g: &'a Graph,
    plan: &'a ArenaPlan,
    title: String,
    out: &mut Vec<(String, &'a Graph, &'a ArenaPlan)>,
) {
    out.push((title.clone(), g, plan));
    for (&id, subs) in &plan.sub_plans {
        let node = g.node(id);
        let base = super::report::scratch_offset(plan, id).unwrap_or(0);
        for ((what, sg), sp) in node.op.subgraphs().into_iter().zip(subs) {
            let t = format!(
                "{title}{} of '{}' ({}) at offset {} — ",
                what,
                node.name,
                node.op.name(),
                grouped(base)
            );
            collect_panels(sg, sp, t, out);
        }
    }
}

/// One panel (a `W x H` picture) of `plan` of `g`, its title prefixed by `title`.
fn panel(s: &mut String, g: &Graph, plan: &ArenaPlan, title: &str) {
    let steps = plan.schedule.len().max(1) as f64;
    let arena = plan.arena_bytes.max(1) as f64;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |step: f64| LEFT + step * pw / steps;
    let y = |offset: f64| TOP + ph - offset * ph / arena;
    // Offsets in MiB, or KiB for small arenas.
    let (unit, unit_bytes) = if plan.arena_bytes >= 1 << 20 {
        ("MiB", 1048576.0)
    } else {
        ("KiB", 1024.0)
    };

    let _ = writeln!(s, r##"<path d="M0 0H{W}V{H}H0Z" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r##"<path d="M{LEFT} {TOP}H{}V{}H{LEFT}Z" fill="#f7f7f7" stroke="#999" stroke-width="1"/>"##,
        LEFT + pw,
        TOP + ph
    );
    // Title.
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="22" font-size="16" font-weight="bold">{}{}: arena {} — lower bound {} — efficiency {:.3} — {} ({} buffers, {} steps)</text>"#,
        esc(title),
        esc(&g.name),
        human_bytes(plan.arena_bytes),
        human_bytes(plan.lower_bound_bytes),
        plan.efficiency(),
        plan.placement.strategy.name(),
        plan.liveness.buffers.len(),
        plan.schedule.len()
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="42" fill="#555">naive sum {} — layer-wise bound {} — weights {} (not in the arena)</text>"##,
        human_bytes(plan.naive_bytes),
        human_bytes(plan.layer_wise_bound_bytes),
        human_bytes(plan.weights.bytes)
    );
    // The stage run patch by patch (grid, passes, arena without patches, recompute).
    if let Some(p) = &plan.patches {
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="{:.1}" font-size="12" fill="#555">patches: {}</text>"##,
            H - 6.0,
            esc(&p.describe(plan.arena_bytes))
        );
    }

    // Grid and axes.
    let mut grid = String::new();
    let xs = tick_step(steps, 12.0).max(1.0);
    let mut t = 0.0;
    while t <= steps + 1e-9 {
        let px = x(t);
        let _ = write!(grid, "M{px:.1} {TOP}V{:.1}", TOP + ph);
        let _ = writeln!(
            s,
            r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + ph + 18.0,
            t as usize
        );
        t += xs;
    }
    let range = plan.arena_bytes as f64 / unit_bytes;
    let ys = tick_step(range, 10.0);
    let mut t = 0.0;
    while t <= range + 1e-9 {
        let py = y(t * unit_bytes);
        let _ = write!(grid, "M{LEFT} {py:.1}H{:.1}", LEFT + pw);
        let label = if ys >= 1.0 {
            format!("{t:.0}")
        } else {
            format!("{t:.2}")
        };
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
            LEFT - 8.0,
            py + 4.0
        );
        t += ys;
    }
    let _ = writeln!(
        s,
        r##"<path d="{grid}" stroke="#e0e0e0" stroke-width="0.6" fill="none"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">step (schedule position)</text>"#,
        LEFT + pw / 2.0,
        H - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(24 {:.1}) rotate(-90)" text-anchor="middle">offset ({unit})</text>"#,
        TOP + ph / 2.0
    );

    // Buffers.
    let _ = writeln!(s, "<g>");
    for (i, b) in plan.liveness.buffers.iter().enumerate() {
        let off = plan.placement.offsets.get(i).copied().unwrap_or(0);
        let iv = b.interval;
        let (x0, x1) = (x(iv.start as f64), x(iv.end as f64));
        let (y0, y1) = (y((off + iv.size) as f64), y(off as f64));
        // A value inside the buffer at an offset (an in-place Concat slice) says where.
        let names: Vec<String> = b
            .values
            .iter()
            .map(|&v| match plan.liveness.offset_of(v) {
                0 => g.value(v).name.clone(),
                at => format!("{} (+{})", g.value(v).name, grouped(at)),
            })
            .collect();
        let also = if names.len() > 1 {
            format!("\nalso holds: {}", names[1..].join(", "))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.2}" y="{y0:.2}" width="{:.2}" height="{:.2}" fill="{}"{}><title>{}
{} bytes ({}) at offset {}
steps {}..{} ({:?}){}</title></rect>"#,
            (x1 - x0).max(0.5),
            (y1 - y0).max(0.5),
            colour(b.kind),
            // A white edge separates neighbours, but would wash out a sliver.
            if x1 - x0 > 3.0 && y1 - y0 > 3.0 {
                r##" stroke="#ffffff" stroke-width="0.5""##
            } else {
                ""
            },
            esc(&b.name),
            grouped(iv.size),
            human_bytes(iv.size),
            grouped(off),
            iv.start,
            iv.end.saturating_sub(1),
            b.kind,
            esc(&also)
        );
    }
    let _ = writeln!(s, "</g>");

    // Lower bound and peak.
    let lb = y(plan.lower_bound_bytes as f64);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{lb:.1}" x2="{:.1}" y2="{lb:.1}" stroke="#333" stroke-width="1.2" stroke-dasharray="3 3"/>"##,
        LEFT + pw
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" fill="#333">lower bound</text>"##,
        LEFT + pw + 6.0,
        lb + 4.0
    );
    let px = x(plan.peak_step as f64 + 0.5);
    let peak_label = match plan.peak_node() {
        Some(id) => format!(
            "peak: step {} ({}, {})",
            plan.peak_step,
            g.node(id).name,
            g.node(id).op.name()
        ),
        None => format!("peak: step {}", plan.peak_step),
    };
    let _ = writeln!(
        s,
        r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="6 4"><title>{}</title></line>"##,
        TOP + ph,
        esc(&peak_label)
    );
    let anchor = if px > LEFT + pw * 0.7 { "end" } else { "start" };
    let dx = if anchor == "end" { -4.0 } else { 4.0 };
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" fill="#d62728" text-anchor="{anchor}" stroke="#ffffff" stroke-width="3" paint-order="stroke">{}</text>"##,
        px + dx,
        TOP + 14.0,
        esc(&peak_label)
    );

    // Legend: one row in the header, right-aligned with the plot.
    let items = [
        (BufferKind::Input, "input"),
        (BufferKind::Intermediate, "intermediate"),
        (BufferKind::Output, "output"),
        (BufferKind::Scratch, "scratch"),
    ];
    let mut lx = LEFT + pw - 410.0;
    for (k, label) in items {
        let _ = writeln!(
            s,
            r#"<path d="M{lx:.1} 31h13v13h-13Z" fill="{}"/><text x="{:.1}" y="42">{label}</text>"#,
            colour(k),
            lx + 18.0,
        );
        lx += 28.0 + 8.0 * label.len() as f64;
    }
}
