//! The TLB coverage model of the huge-pages seed: coverage = entries × page size, and
//! the covered fraction of a working set under uniform access. A deliberately simple
//! model (one unified TLB): it shows the scale of what huge pages buy, and the
//! latency benchmark measures what they really buy on this machine.

use crate::size::human;

/// Page sizes the model (and x86-64) knows.
pub const PAGE_SIZES: [(&str, u64); 3] = [("4 KiB", 4 << 10), ("2 MiB", 2 << 20), ("1 GiB", 1 << 30)];

/// Bytes `entries` TLB entries map with pages of `page` bytes.
pub fn coverage(entries: u64, page: u64) -> u64 {
    entries.saturating_mul(page)
}

/// Fraction of a working set the TLB covers (1.0 when it covers all of it).
pub fn covered_fraction(entries: u64, page: u64, working_set: u64) -> f64 {
    if working_set == 0 {
        return 1.0;
    }
    (coverage(entries, page) as f64 / working_set as f64).min(1.0)
}

/// One row of the coverage table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub page: &'static str,
    pub page_bytes: u64,
    pub entries: u64,
    pub coverage_bytes: u64,
    /// Covered fraction of each working set, in the order given.
    pub covered: Vec<f64>,
}

/// The seed's Table 1: every page size × every TLB size, against each working set.
pub fn table(entries: &[u64], working_sets: &[u64]) -> Vec<Row> {
    PAGE_SIZES
        .iter()
        .flat_map(|&(page, page_bytes)| {
            entries.iter().map(move |&e| Row {
                page,
                page_bytes,
                entries: e,
                coverage_bytes: coverage(e, page_bytes),
                covered: working_sets.iter().map(|&w| covered_fraction(e, page_bytes, w)).collect(),
            })
        })
        .collect()
}

/// A percentage with as many digits as a tiny coverage needs (0.00038%, 6.25%, 100%).
pub fn percent(f: f64) -> String {
    let p = f * 100.0;
    if p >= 100.0 {
        "100%".to_string()
    } else if p >= 1.0 {
        format!("{:.2}%", p)
    } else {
        // Three significant digits.
        let digits = (-p.log10()).ceil().max(0.0) as usize + 2;
        format!("{:.*}%", digits, p)
    }
}

/// The table as aligned text, one line per row, with a header.
pub fn render(entries: &[u64], working_sets: &[u64]) -> String {
    let mut out = format!("{:<8} {:>8} {:>10}", "page", "entries", "coverage");
    for &w in working_sets {
        out.push_str(&format!(" {:>12}", format!("of {}", human(w))));
    }
    out.push('\n');
    for r in table(entries, working_sets) {
        out.push_str(&format!("{:<8} {:>8} {:>10}", r.page, r.entries, human(r.coverage_bytes)));
        for c in &r.covered {
            out.push_str(&format!(" {:>12}", percent(*c)));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::size::GIB;

    #[test]
    fn reproduces_the_seed_table() {
        let t = table(&[64, 256, 2048], &[8 * GIB, 64 * GIB]);
        assert_eq!(t.len(), 9);
        // 4 KiB × 64 entries: 0.000244 GB, 0.0031% of 8 GB, 0.00038% of 64 GB.
        assert_eq!(t[0].coverage_bytes, 256 << 10);
        assert_eq!(percent(t[0].covered[0]), "0.00305%");
        assert_eq!(percent(t[0].covered[1]), "0.000381%");
        // 4 KiB × 2048: 0.0977% of 8 GB.
        assert_eq!(percent(t[2].covered[0]), "0.0977%");
        // 2 MiB × 2048 entries: 4 GB, 50% of 8 GB, 6.25% of 64 GB.
        assert_eq!(t[5].coverage_bytes, 4 * GIB);
        assert_eq!(percent(t[5].covered[0]), "50.00%");
        assert_eq!(percent(t[5].covered[1]), "6.25%");
        // 1 GiB × 64: all of both.
        assert_eq!(t[6].coverage_bytes, 64 * GIB);
        assert_eq!(t[6].covered, vec![1.0, 1.0]);
    }

    #[test]
    fn coverage_is_capped_and_never_divides_by_zero() {
        assert_eq!(covered_fraction(2048, 1 << 30, 8 * GIB), 1.0);
        assert_eq!(covered_fraction(64, 4096, 0), 1.0);
        assert_eq!(coverage(u64::MAX, 1 << 30), u64::MAX);
    }

    #[test]
    fn rendered_table_has_a_line_per_row_and_a_column_per_working_set() {
        let s = render(&[64, 2048], &[8 * GIB, 64 * GIB]);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 1 + 6);
        assert!(lines[0].contains("of 8 GiB") && lines[0].contains("of 64 GiB"), "{}", lines[0]);
        assert!(lines[4].starts_with("2 MiB") && lines[4].contains("50.00%"), "{}", lines[4]);
    }
}
