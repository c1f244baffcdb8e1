//! The hugetlb page pools (`/sys/kernel/mm/hugepages`): how many pages of a size are
//! free, and a temporary reservation that gives back exactly what it added.
//!
//! The pools are host-wide state shared with other software, so nothing here changes
//! them unless a caller asks for a [`Reservation`], and that only ever adds pages and
//! removes the same number again when dropped.

use std::path::{Path, PathBuf};

use crate::{PathError, read_u64, write_text};

/// One pool, e.g. `hugepages-1048576kB`.
#[derive(Debug, Clone)]
pub struct Pool {
    dir: PathBuf,
    pub page_bytes: u64,
}

impl Pool {
    /// The pool of `page_bytes` pages under `root` (normally `/sys/kernel/mm/hugepages`).
    pub fn new(root: &Path, page_bytes: u64) -> Pool {
        Pool { dir: root.join(format!("hugepages-{}kB", page_bytes >> 10)), page_bytes }
    }

    pub fn host(page_bytes: u64) -> Pool {
        Pool::new(Path::new("/sys/kernel/mm/hugepages"), page_bytes)
    }

    /// Whether the kernel and CPU offer pages of this size at all.
    pub fn exists(&self) -> bool {
        self.dir.is_dir()
    }

    fn read(&self, file: &str) -> Result<u64, PathError> {
        Ok(read_u64(&self.dir.join(file))?.unwrap_or(0))
    }

    /// Pages free in the pool now.
    pub fn free(&self) -> Result<u64, PathError> {
        self.read("free_hugepages")
    }

    /// Pages in the pool.
    pub fn total(&self) -> Result<u64, PathError> {
        self.read("nr_hugepages")
    }

    /// Adds pages until `pages` are free (never shrinks the pool). The kernel may
    /// find fewer contiguous ranges than asked for: the reservation holds what it got,
    /// see [`Reservation::free`].
    pub fn reserve(&self, pages: u64) -> Result<Reservation, PathError> {
        let free = self.free()?;
        let want = pages.saturating_sub(free);
        let before = self.total()?;
        if want > 0 {
            write_text(&self.dir.join("nr_hugepages"), &(before + want).to_string())?;
        }
        let added = self.total()?.saturating_sub(before);
        Ok(Reservation { pool: self.clone(), added })
    }
}

/// Pages added to a pool; removed again on drop.
#[derive(Debug)]
pub struct Reservation {
    pool: Pool,
    added: u64,
}

impl Reservation {
    pub fn added(&self) -> u64 {
        self.added
    }

    pub fn free(&self) -> u64 {
        self.pool.free().unwrap_or(0)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.added == 0 {
            return;
        }
        if let Ok(total) = self.pool.total() {
            let _ = write_text(&self.pool.dir.join("nr_hugepages"), &total.saturating_sub(self.added).to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(total: u64, free: u64) -> (tempfile::TempDir, Pool) {
        let d = tempfile::tempdir().unwrap();
        let p = Pool::new(d.path(), 1 << 30);
        std::fs::create_dir_all(&p.dir).unwrap();
        std::fs::write(p.dir.join("nr_hugepages"), format!("{total}\n")).unwrap();
        std::fs::write(p.dir.join("free_hugepages"), format!("{free}\n")).unwrap();
        (d, p)
    }

    #[test]
    fn reservation_adds_what_is_missing_and_gives_back_only_that() {
        let (_d, p) = fixture(3, 1);
        assert!(p.dir.ends_with("hugepages-1048576kB"));
        {
            let r = p.reserve(4).unwrap();
            assert_eq!(r.added(), 3);
            assert_eq!(p.total().unwrap(), 6);
            // Someone else grows the pool meanwhile: their pages stay.
            std::fs::write(p.dir.join("nr_hugepages"), "8\n").unwrap();
        }
        assert_eq!(p.total().unwrap(), 5);
    }

    #[test]
    fn enough_free_pages_change_nothing() {
        let (_d, p) = fixture(2, 2);
        let r = p.reserve(2).unwrap();
        assert_eq!(r.added(), 0);
        drop(r);
        assert_eq!(p.total().unwrap(), 2);
    }
}
