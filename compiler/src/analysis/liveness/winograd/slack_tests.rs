//! The placement's slack ([`super::into_slack`]): a Conv whose every Winograd scratch size
//! raises the peak of live bytes takes one only where the placed arena has room for it.

use super::super::tiles;
use super::*;
use crate::import::builder::{Attr, Dim, ModelBuilder};
use crate::import::{ImportOptions, import_model};
use crate::ir::tensor::Tensor;
use crate::ir::types::DType;

/// One 32 -> 32 3 x 3 Conv on 48 x 48: its step is the peak.
fn one_conv() -> Graph {
    let m = ModelBuilder::new("slack", 13)
        .input(
            "x",
            DType::F32,
            &[Dim::N(1), Dim::N(32), Dim::N(48), Dim::N(48)],
        )
        .output("y", DType::F32, &[])
        .initializer(
            "w",
            &Tensor::f32(vec![32, 32, 3, 3], &vec![0.01; 32 * 32 * 9]),
        )
        .node(
            "a",
            "Conv",
            &["x", "w"],
            &["y"],
            vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .build();
    import_model(&m, None, &ImportOptions::default())
        .expect("imports")
        .graph
}

#[test]
fn a_conv_takes_winograd_from_the_placements_slack_only() {
    let o = LivenessOptions {
        winograd_precompute: false,
        ..LivenessOptions::full()
    };
    let g = one_conv();
    let order: Vec<NodeId> = g.nodes().map(|(id, _)| id).collect();
    let cx = Decide {
        g: &g,
        order: &order,
        opts: o,
    };
    let mut d = Decisions::default();
    tiles::smallest(&cx, &mut d);
    let live = cx.measure(&d);
    let (total, peak) = step_bytes(&live);
    let (id, _) = g.nodes().find(|(_, n)| n.name == "a").expect("the conv");
    let b = live
        .buffers
        .iter()
        .find(|b| b.kind == BufferKind::Scratch && b.node == Some(id))
        .expect("its scratch");
    let step = b.interval.start;
    let p = winograd_conv_in(&g, id, &o, &precomputed(&g, &o)).expect("Winograd applies");
    let rest = total[step] - aligned(b.interval.size);
    let sizes: Vec<usize> = winograd::block_sizes(&p)
        .map(|t| winograd::scratch_bytes(&winograd::with_block(&p, t)))
        .collect();
    let (&largest, &smallest) = (sizes.first().expect("sizes"), sizes.last().expect("sizes"));
    assert!(
        rest + aligned(smallest) > peak,
        "every size raises the peak"
    );
    let planned = d.scratch[step];
    assert!(
        winograd::block_for_scratch(&p, planned).is_none(),
        "im2col planned"
    );

    // No slack: the placement is the live peak; nothing changes.
    let base = cx.placed_arena(&d);
    into_slack(&cx, &mut d, vec![(step, rest, sizes.clone(), 1)], base);
    assert_eq!(d.scratch[step], planned);

    // A placement with room for the smallest size only (as a patched plan leaves): taken,
    // and the arena stays within it.
    let room = usize::try_from(rest + aligned(smallest)).expect("bytes");
    into_slack(&cx, &mut d, vec![(step, rest, sizes.clone(), 1)], room);
    assert_eq!(d.scratch[step], smallest);
    assert!(cx.placed_arena(&d) <= room);

    // Room for the largest: the largest, the fastest.
    d.scratch[step] = planned;
    let room = usize::try_from(rest + aligned(largest)).expect("bytes");
    into_slack(&cx, &mut d, vec![(step, rest, sizes, 1)], room);
    assert_eq!(d.scratch[step], largest);
    assert!(cx.placed_arena(&d) <= room);
}
