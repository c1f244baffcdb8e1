//! Page runs from `PAGEMAP_SCAN`, read per sample and per 2 MiB region.

use std::collections::HashMap;

use tierd_sys::pagemap::{PAGE_IS_HUGE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PageRegion};

use super::REGION;

/// Bytes of `[start, start+len)` that `runs` (sorted, of one process) mark present.
pub(super) fn present_within(runs: &[PageRegion], start: u64, len: u64) -> u64 {
    let end = start + len;
    let first = runs.partition_point(|r| r.end <= start);
    runs[first..]
        .iter()
        .take_while(|r| r.start < end)
        .filter(|r| r.categories & PAGE_IS_PRESENT != 0)
        .map(|r| r.end.min(end) - r.start.max(start))
        .sum()
}

/// The mapping (of address-ordered, disjoint `ranges`) that holds all of the region
/// starting at `block`, if any.
pub(super) fn mapping_holding(ranges: &[(u64, u64)], block: u64) -> Option<(u64, u64)> {
    let i = ranges.partition_point(|r| r.0 <= block);
    let r = *ranges.get(i.checked_sub(1)?)?;
    (block >= r.0 && block + REGION <= r.1).then_some(r)
}

/// Splits page runs (sorted by address) into per-region (present, swapped, huge) byte
/// counts. Fragmented memory has hundreds of thousands of runs per GiB, so the counts
/// of one region are gathered locally and the map is touched once per region.
pub(super) fn region_counts(pid: u32, runs: &[PageRegion], out: &mut HashMap<(u32, u64), (u64, u64, u64)>) {
    let mut cur: Option<(u64, (u64, u64, u64))> = None;
    let flush = |c: Option<(u64, (u64, u64, u64))>, out: &mut HashMap<(u32, u64), (u64, u64, u64)>| {
        if let Some((block, (p, sw, h))) = c {
            let e = out.entry((pid, block)).or_default();
            e.0 += p;
            e.1 += sw;
            e.2 += h;
        }
    };
    for r in runs {
        let mut at = r.start;
        while at < r.end {
            let block = at & !(REGION - 1);
            let end = (block + REGION).min(r.end);
            if cur.is_none_or(|(b, _)| b != block) {
                flush(cur.take(), out);
                cur = Some((block, (0, 0, 0)));
            }
            let counts = &mut cur.as_mut().expect("set above").1;
            let len = end - at;
            if r.categories & PAGE_IS_PRESENT != 0 {
                counts.0 += len;
                if r.categories & PAGE_IS_HUGE != 0 {
                    counts.2 += len;
                }
            }
            if r.categories & PAGE_IS_SWAPPED != 0 {
                counts.1 += len;
            }
            at = end;
        }
    }
    flush(cur, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: u64, end: u64, categories: u64) -> PageRegion {
        PageRegion { start, end, categories }
    }

    #[test]
    fn present_bytes_within_a_sample() {
        let runs =
            [run(0, 8192, PAGE_IS_PRESENT), run(8192, 16384, PAGE_IS_SWAPPED), run(16384, 40960, PAGE_IS_PRESENT)];
        assert_eq!(present_within(&runs, 4096, 16384), 4096 + 4096);
        assert_eq!(present_within(&runs, 8192, 8192), 0);
        assert_eq!(present_within(&runs, 36864, 65536), 4096);
    }

    #[test]
    fn counts_split_at_region_boundaries() {
        let mut out = HashMap::new();
        region_counts(
            7,
            &[run(REGION - 4096, REGION + 8192, PAGE_IS_PRESENT), run(REGION + 8192, REGION + 12288, PAGE_IS_SWAPPED)],
            &mut out,
        );
        assert_eq!(out[&(7, 0)], (4096, 0, 0));
        assert_eq!(out[&(7, REGION)], (8192, 4096, 0));
    }

    #[test]
    fn a_region_belongs_to_a_mapping_only_when_wholly_inside_it() {
        let maps = [(0, 4 * REGION), (10 * REGION, 10 * REGION + REGION / 2), (20 * REGION + 4096, 30 * REGION)];
        assert_eq!(mapping_holding(&maps, 0), Some(maps[0]));
        assert_eq!(mapping_holding(&maps, 3 * REGION), Some(maps[0]));
        assert_eq!(mapping_holding(&maps, 4 * REGION), None, "past the end");
        assert_eq!(mapping_holding(&maps, 10 * REGION), None, "mapping shorter than a region");
        assert_eq!(mapping_holding(&maps, 20 * REGION), None, "region starts before the mapping");
        assert_eq!(mapping_holding(&maps, 21 * REGION), Some(maps[2]));
        assert_eq!(mapping_holding(&[], 0), None);
    }
}
