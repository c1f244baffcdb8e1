//! What a tenant touches: its memory split into page classes (pages used alike) laid
//! over its 2 MiB regions, and how each phase spreads its accesses over the classes.
//!
//! A class is a set of pages with one access rate per operation: the uniform hot set,
//! a stratum of a Zipf distribution's ranks, a server's dictionary, the cold rest. The
//! workload generator scatters Zipf ranks over its hot set, and a Redis server's hot
//! keys lie every few kilobytes, so a hot region holds every stratum in proportion:
//! the kernel's LRU sees pages of unequal heat, tierd's region view sees even regions.

use crate::calib::{
    PAGE, PG_ACCOUNT_BYTES, PG_CORE_BYTES, PG_CORE_PAGES_PER_OP, PG_HEAP_SHARE, PG_OP_SECS, PG_PAGES_PER_OP,
    REDIS_OP_SECS, REDIS_PAGES_PER_OP, REGION_PAGES, WORKLOAD_OP_SECS,
};

/// How a workload tenant picks pages of its hot set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    Uniform,
    /// Zipf with this exponent over the hot set's pages, ranks scattered over it.
    Zipf(f64),
}

/// What the tenant runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum App {
    /// `tierd-bench workload`: one thread, one cache line per access.
    Workload,
    /// redis-server driven by its own client: a ninth of its memory is dictionary (hot
    /// whenever any key is), the rest values, `hot_pct` % of the keys hot, Zipf(0.99).
    Redis { hot_pct: u64 },
    /// PostgreSQL under pgbench: accounts drawn Zipf(1.01), numbered in insertion order,
    /// so hot rows share heap pages and index leaves; `shared_buffers` bytes of its
    /// memory are the buffer pool, which holds the hottest pages (their page-cache copies
    /// go cold).
    Postgres { shared_buffers: u64 },
}

/// A phase of the tenant's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    Active,
    Idle,
    /// Every page at random (a noisy neighbour).
    Sweep,
}

/// One tenant as the scenario defines it.
#[derive(Debug, Clone)]
pub struct TenantModel {
    pub name: String,
    pub size: u64,
    pub hot: u64,
    pub pattern: Pattern,
    pub app: App,
    pub phases: Vec<(PhaseKind, f64)>,
    pub reserve: u64,
    pub shares: u32,
}

/// A tenant's classes and their place in its regions.
#[derive(Debug, Clone)]
pub struct Layout {
    pub regions: usize,
    pub classes: usize,
    /// Pages of each class in each region, `regions × classes`.
    pub cells: Vec<f32>,
    /// Pages of each class in all.
    pub class_pages: Vec<f64>,
    /// Share of an active operation's accesses that land in each class.
    pub active_share: Vec<f64>,
    /// Accesses per operation.
    pub pages_per_op: f64,
    /// CPU seconds per operation (the whole operation: a server's client too).
    pub op_secs: f64,
    /// The share of its region a class's pages make up where they lie: a readahead of
    /// neighbouring slots brings that share of pages of the same class.
    pub density: Vec<f64>,
}

/// Strata of Zipf ranks: boundaries as fractions of the ranks, head first.
const ZIPF_STRATA: [f64; 6] = [1.0 / 4096.0, 1.0 / 512.0, 1.0 / 64.0, 1.0 / 16.0, 1.0 / 4.0, 1.0];

/// Probability mass of ranks `[a, b)` (1-based, continuous approximation) of Zipf(θ).
fn zipf_mass(a: f64, b: f64, theta: f64) -> f64 {
    if (theta - 1.0).abs() < 1e-9 { (b / a).ln() } else { (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta) }
}

/// Shares of Zipf(θ) over `n` ranks falling in each stratum, and each stratum's ranks.
fn zipf_strata(n: f64, theta: f64) -> (Vec<f64>, Vec<f64>) {
    zipf_clustered(n, n, theta)
}

/// Shares of Zipf(θ) over `ranks` laid `ranks / pages` to a page in rank order, in
/// strata of pages, and each stratum's pages: the page holding ranks 1 to 30 takes
/// what those thirty ranks take.
fn zipf_clustered(ranks: f64, pages: f64, theta: f64) -> (Vec<f64>, Vec<f64>) {
    let per_page = ranks / pages;
    let mut lo = 0.0;
    let (mut mass, mut stratum_pages) = (Vec::new(), Vec::new());
    for f in ZIPF_STRATA {
        let hi = (pages * f).max(lo + 1.0).min(pages);
        mass.push(zipf_mass(1.0 + lo * per_page, 1.0 + hi * per_page, theta));
        stratum_pages.push(hi - lo);
        lo = hi;
        if lo >= pages {
            break;
        }
    }
    let total: f64 = mass.iter().sum();
    (mass.iter().map(|m| m / total).collect(), stratum_pages)
}

/// A pgbench tenant of `pages`, `buffers` of them its buffer pool: a transaction's
/// always-hot pages (index root and inner pages, the WAL insert position, the commit
/// log, the page taking the new row version), then the account's heap page and index
/// leaf by their strata. The page-cache copies of what the pool holds are the cold rest.
fn postgres_classes(pages: f64, buffers: f64) -> (Vec<f64>, Vec<f64>) {
    let data = (pages - buffers).max(1.0);
    let accounts = data * PAGE / PG_ACCOUNT_BYTES;
    let heap = data * PG_HEAP_SHARE;
    let (heap_share, heap_pages) = zipf_clustered(accounts, heap, 1.01);
    let (leaf_share, leaf_pages) = zipf_clustered(accounts, data - heap, 1.01);
    let core = PG_CORE_PAGES_PER_OP / PG_PAGES_PER_OP;
    let drawn = (1.0 - core) / 2.0;
    let mut share = vec![core];
    let mut class_pages = vec![(PG_CORE_BYTES / PAGE).min(buffers)];
    share.extend(heap_share.iter().map(|s| s * drawn));
    class_pages.extend(heap_pages);
    share.extend(leaf_share.iter().map(|s| s * drawn));
    class_pages.extend(leaf_pages);
    (share, class_pages)
}

impl Layout {
    pub fn of(t: &TenantModel) -> Layout {
        let pages = (t.size as f64 / 4096.0).ceil().max(1.0);
        let regions = (pages as usize).div_ceil(REGION_PAGES);
        match t.app {
            App::Workload => {
                let hot = (t.hot as f64 / 4096.0).min(pages).max(1.0);
                match t.pattern {
                    Pattern::Uniform => Layout::front_hot(regions, pages, hot, &[1.0], &[hot], 1.0, WORKLOAD_OP_SECS),
                    Pattern::Zipf(theta) => {
                        let (share, strata) = zipf_strata(hot, theta);
                        Layout::front_hot(regions, pages, hot, &share, &strata, 1.0, WORKLOAD_OP_SECS)
                    }
                }
            }
            App::Redis { hot_pct } => {
                // About four 1000-byte values a page: a page is hot when any of them is.
                let dict = pages / 9.0;
                let values = pages - dict;
                let hot_share = 1.0 - (1.0 - hot_pct as f64 / 100.0).powi(4);
                let (zshare, strata) = zipf_strata(values * hot_share, 0.99);
                let mut share = vec![0.5];
                let mut class_pages = vec![dict];
                share.extend(zshare.iter().map(|s| s * 0.5));
                class_pages.extend(strata);
                Layout::spread(regions, pages, &share, &class_pages, REDIS_PAGES_PER_OP, REDIS_OP_SECS)
            }
            App::Postgres { shared_buffers } => {
                let (share, class_pages) = postgres_classes(pages, shared_buffers as f64 / PAGE);
                Layout::spread(regions, pages, &share, &class_pages, PG_PAGES_PER_OP, PG_OP_SECS)
            }
        }
    }

    /// Hot classes filling the first `hot` pages in proportion, the cold rest after.
    fn front_hot(
        regions: usize,
        pages: f64,
        hot: f64,
        share: &[f64],
        class_pages: &[f64],
        pages_per_op: f64,
        op_secs: f64,
    ) -> Layout {
        let k = share.len() + 1;
        let mut cells = vec![0f32; regions * k];
        for r in 0..regions {
            let start = (r * REGION_PAGES) as f64;
            let end = (start + REGION_PAGES as f64).min(pages);
            let in_hot = (end.min(hot) - start).max(0.0);
            for (c, &p) in class_pages.iter().enumerate() {
                cells[r * k + c] = (in_hot * p / hot) as f32;
            }
            cells[r * k + k - 1] = (end - start - in_hot).max(0.0) as f32;
        }
        let mut all_pages = class_pages.to_vec();
        all_pages.push(pages - hot);
        let mut active_share = share.to_vec();
        active_share.push(0.0);
        let mut density: Vec<f64> = class_pages.iter().map(|p| p / hot).collect();
        density.push(1.0);
        Layout { regions, classes: k, cells, class_pages: all_pages, active_share, pages_per_op, op_secs, density }
    }

    /// Classes spread evenly over every region, the cold rest too.
    fn spread(
        regions: usize,
        pages: f64,
        share: &[f64],
        class_pages: &[f64],
        pages_per_op: f64,
        op_secs: f64,
    ) -> Layout {
        let hot: f64 = class_pages.iter().sum::<f64>().min(pages);
        let k = share.len() + 1;
        let mut all_pages = class_pages.to_vec();
        all_pages.push((pages - hot).max(0.0));
        let mut cells = vec![0f32; regions * k];
        for r in 0..regions {
            let start = (r * REGION_PAGES) as f64;
            let here = ((start + REGION_PAGES as f64).min(pages) - start) / pages;
            for c in 0..k {
                cells[r * k + c] = (all_pages[c] * here) as f32;
            }
        }
        let mut active_share = share.to_vec();
        active_share.push(0.0);
        let density = all_pages.iter().map(|p| p / pages).collect();
        Layout { regions, classes: k, cells, class_pages: all_pages, active_share, pages_per_op, op_secs, density }
    }

    /// Accesses per operation that each page of each class gets in a phase.
    pub fn per_page(&self, phase: PhaseKind) -> Vec<f64> {
        let total: f64 = self.class_pages.iter().sum();
        (0..self.classes)
            .map(|c| {
                let pages = self.class_pages[c].max(1e-9);
                match phase {
                    PhaseKind::Active => self.pages_per_op * self.active_share[c] / pages,
                    PhaseKind::Sweep => self.pages_per_op / total,
                    PhaseKind::Idle => 0.0,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(size_mib: u64, hot_mib: u64, pattern: Pattern) -> TenantModel {
        TenantModel {
            name: "t".into(),
            size: size_mib << 20,
            hot: hot_mib << 20,
            pattern,
            app: App::Workload,
            phases: vec![(PhaseKind::Active, 10.0)],
            reserve: 0,
            shares: 100,
        }
    }

    #[test]
    fn a_uniform_hot_set_fills_the_first_regions_and_takes_every_access() {
        let l = Layout::of(&workload(512, 129, Pattern::Uniform));
        assert_eq!((l.regions, l.classes), (256, 2));
        assert_eq!(l.cells[0], 512.0, "region 0 is all hot");
        assert_eq!(l.cells[64 * 2], 256.0, "region 64 holds the last half region of the hot set");
        assert_eq!(l.cells[64 * 2 + 1], 256.0);
        let total: f32 = l.cells.iter().sum();
        assert_eq!(total, 512.0 * 256.0);
        let pp = l.per_page(PhaseKind::Active);
        assert!((pp[0] * l.class_pages[0] - 1.0).abs() < 1e-9 && pp[1] == 0.0);
        let sweep = l.per_page(PhaseKind::Sweep);
        assert!((sweep[0] - sweep[1]).abs() < 1e-15, "a sweep touches every page alike");
    }

    #[test]
    fn zipf_strata_put_most_accesses_on_few_pages() {
        let l = Layout::of(&workload(512, 256, Pattern::Zipf(0.99)));
        let hot_pages: f64 = l.class_pages[..l.classes - 1].iter().sum();
        assert!((hot_pages - 65536.0).abs() < 1.0, "{hot_pages}");
        // The hottest sixteenth of the hot set takes well over half the accesses.
        let head: f64 = l.active_share[..4].iter().sum();
        assert!(head > 0.6 && head < 0.85, "{head}");
    }

    #[test]
    fn a_redis_tenant_has_a_fifth_of_its_value_pages_hot_at_five_percent_of_keys() {
        let t = TenantModel { app: App::Redis { hot_pct: 5 }, ..workload(1152, 0, Pattern::Uniform) };
        let l = Layout::of(&t);
        let pages: f64 = l.class_pages.iter().sum();
        let hot: f64 = l.class_pages[..l.classes - 1].iter().sum();
        // The dictionary (a ninth) and 18.5% of the values.
        let want = pages / 9.0 + pages * 8.0 / 9.0 * 0.185;
        assert!((hot - want).abs() / want < 0.01, "{hot} vs {want}");
        assert!(l.cells.iter().all(|c| *c >= 0.0));
    }

    #[test]
    fn a_pgbench_tenant_touches_its_hot_rows_pages_and_never_its_pools_page_cache_copies() {
        // Scale 48: 720 MiB of tables and indexes and a 180 MiB buffer pool.
        let t = TenantModel { app: App::Postgres { shared_buffers: 180 << 20 }, ..workload(900, 0, Pattern::Uniform) };
        let l = Layout::of(&t);
        let pages: f64 = l.class_pages.iter().sum();
        assert!((pages - 900.0 * 256.0).abs() < 1.0, "{pages}");
        let cold = l.class_pages[l.classes - 1];
        assert!((cold - (180.0 - 2.0) * 256.0).abs() < 1.0, "the pool's copies, less its always-hot pages: {cold}");
        assert_eq!(l.active_share[l.classes - 1], 0.0);
        assert!((l.active_share[0] - 0.8).abs() < 1e-9, "eight of ten pages always hot");
        // Heap strata follow the core; the first five are its hottest quarter.
        let heap: f64 = l.active_share[1..7].iter().sum();
        let head: f64 = l.active_share[1..6].iter().sum();
        assert!((heap - 0.1).abs() < 1e-9);
        // Rows clustered 30 to a page: a quarter of the pages holds the top 1.2 M of
        // 4.8 M accounts, ~90% of the draws (Zipf(1.01)).
        assert!(head / heap > 0.88 && head / heap < 0.93, "{}", head / heap);
    }
}
