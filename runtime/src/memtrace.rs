//! `ARENAC_MEMTRACE=1`: the process's resident memory at the phases of compile and run, on
//! stderr (Linux `/proc/self/status`: VmRSS, its anonymous and file parts, and the peak
//! VmHWM so far), to find what is held at the peak. A no-op when the variable is unset or the
//! file is unreadable. `ARENAC_MEMTRACE=smaps` adds every mapping with 256 KiB or more
//! resident. (`ARENAC_KEEP_MEMORY=1` makes `arenac` compile with
//! `CompileOptions::release_memory` off, to compare.)

use std::sync::OnceLock;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("ARENAC_MEMTRACE").is_some_and(|v| v != "0"))
}

/// Prints one line `memtrace <phase>: rss .. anon .. file .. hwm ..` (KiB) when enabled.
pub fn mark(phase: &str) {
    if !enabled() {
        return;
    }
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    eprintln!(
        "memtrace {phase}: rss {} anon {} file {} hwm {} KiB",
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:"),
        field("VmHWM:")
    );
    if std::env::var_os("ARENAC_MEMTRACE").is_some_and(|v| v == "smaps")
        && let Ok(m) = std::fs::read_to_string("/proc/self/smaps")
    {
        let mut head = "";
        for l in m.lines() {
            if l.split_whitespace()
                .next()
                .is_some_and(|w| w.contains('-') && !w.ends_with(':'))
            {
                head = l;
            } else if let Some(r) = l.strip_prefix("Rss:") {
                let kb: u64 = r
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if kb >= 256 {
                    eprintln!("  {kb:>8} KiB {head}");
                }
            }
        }
    }
}
