//! Memory given back when [`crate::compile_file`] is done, so that the process runs with
//! its weights, its arena and little else resident:
//!
//! - the heap's free memory left by import, planning and code generation (the decoded
//!   protobuf, the f32 source copies, per-node vectors) is returned to the system
//!   (`malloc_trim`, glibc only);
//! - the clean, file-backed pages of the program's own code and read-only data (the
//!   executable or the shared library holding arenac) are dropped from the process: most of
//!   them are the importer, the planner and the code generator, which a run never executes
//!   again. The run faults back in only the pages it executes (the kernels), read again from
//!   the page cache. Only mappings that were never written (no anonymous pages, not
//!   writable) are touched, so nothing can change: this is `MADV_DONTNEED` on a private file
//!   mapping, whose contract is that the next access reads the file's bytes again.
//!
//! These are resident-set savings of the process (what `VmHWM`, `ps` and `time` report);
//! the page cache itself still holds the binary's pages, shared with every other process
//! that runs it, and the kernel reclaims them as it needs.

/// Returns free heap memory and drops the clean pages of the program's own mapped image
/// (see the module doc). Best effort: on any failure (no `/proc`, another libc) it does
/// nothing. Costs about a millisecond; the first run after it takes a few hundred minor page
/// faults to bring its kernels back.
pub fn after_compile() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    drop_own_image();
}

/// `MADV_DONTNEED` on every mapping of the file that holds this function's code, when the
/// mapping is not writable and holds no anonymous (written, copied-on-write) pages.
#[cfg(target_os = "linux")]
fn drop_own_image() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    let here = drop_own_image as *const () as usize;
    let maps = parse_smaps(&smaps);
    // The file holding this code: the mapping that contains `here`.
    let Some(own) = maps
        .iter()
        .find(|m| m.start <= here && here < m.end)
        .and_then(|m| m.path)
    else {
        return;
    };
    for m in maps.iter().filter(|m| m.path == Some(own)) {
        if m.writable || m.anonymous_kib != 0 || m.end <= m.start {
            continue;
        }
        // SAFETY: a private (or shared read-only) mapping of the program's own file that was
        // never written (no anonymous pages, not writable): DONTNEED drops clean pages that
        // the next access reads back unchanged from the file. The range is a whole mapping,
        // page-aligned by construction.
        unsafe {
            libc::madvise(
                m.start as *mut libc::c_void,
                m.end - m.start,
                libc::MADV_DONTNEED,
            );
        }
    }
}

/// One mapping of `/proc/self/smaps`: its range, whether it is writable, its path (if a
/// file) and its `Anonymous:` size.
#[derive(Debug, PartialEq)]
struct Mapping<'a> {
    start: usize,
    end: usize,
    writable: bool,
    path: Option<&'a str>,
    anonymous_kib: u64,
}

/// The mappings of an smaps text; malformed lines are skipped (a header that does not
/// parse ends the previous mapping without starting a new one).
fn parse_smaps(text: &str) -> Vec<Mapping<'_>> {
    let mut out: Vec<Mapping<'_>> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if let Some(rest) = line.strip_prefix("Anonymous:") {
            if let Some(m) = out.last_mut() {
                m.anonymous_kib = rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(u64::MAX);
            }
            continue;
        }
        if first.ends_with(':') {
            continue;
        }
        let Some((a, b)) = first.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
        else {
            continue;
        };
        let perms = words.next().unwrap_or("");
        // offset, device, inode, then the path (which may hold spaces).
        let path = line
            .splitn(6, char::is_whitespace)
            .nth(5)
            .map(str::trim)
            .filter(|p| p.starts_with('/'));
        out.push(Mapping {
            start,
            end,
            writable: perms.as_bytes().get(1) != Some(&b'-'),
            path,
            // Unknown until its `Anonymous:` line: assume written.
            anonymous_kib: u64::MAX,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mappings_and_their_anonymous_pages() {
        let text = "\
5609793c2000-5609795d0000 r--p 00000000 fe:00 5532842                    /x/arenac
Size:               2104 kB
Anonymous:             0 kB
5609795d0000-560979f57000 r-xp 0020d000 fe:00 5532842                    /x/arenac
Anonymous:             0 kB
56097a000000-56097a001000 rw-p 00b00000 fe:00 5532842                    /x/arenac
Anonymous:             4 kB
7fd227883000-7fd227f68000 rw-p 00000000 00:00 0 
Anonymous:          7060 kB
7fd227f69000-7fd227f6a000 r--p 00000000 fe:00 1 /a dir/with space.so
";
        let m = parse_smaps(text);
        assert_eq!(m.len(), 5);
        assert_eq!(m[1].start, 0x5609795d0000);
        assert_eq!(m[1].path, Some("/x/arenac"));
        assert!(!m[1].writable && m[1].anonymous_kib == 0);
        assert!(m[2].writable && m[2].anonymous_kib == 4);
        assert_eq!(m[3].path, None);
        assert_eq!(m[4].path, Some("/a dir/with space.so"));
        // No Anonymous line seen: treated as written, never dropped.
        assert_eq!(m[4].anonymous_kib, u64::MAX);
    }

    #[test]
    fn dropping_the_image_keeps_the_program_running() {
        // The code and read-only data come back from the file on their next use.
        after_compile();
        let v: Vec<u64> = (0..1000).map(|i| i * i).collect();
        assert_eq!(v.iter().sum::<u64>(), 332_833_500);
        after_compile();
        assert_eq!(format!("{:?}", &v[..3]), "[0, 1, 4]");
    }
}
