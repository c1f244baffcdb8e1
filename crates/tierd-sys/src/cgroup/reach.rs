//! Where a memory controller may write: tierd's own subtree, by paths relative to it,
//! and the cgroups an operator let tierd adopt, by their absolute hierarchy paths.
//!
//! The one check of where tierd writes lives here, so no caller can get around it:
//! an absolute path must lie below one of the adoptable roots (tierd's own cgroup is
//! always one), and only the memory-control files of such a cgroup are reached through
//! it ([`Reach::dir`]); creating, removing and moving processes stay inside `base`.

use std::path::{Component, Path, PathBuf};

use super::{CgroupError, inside, path_is_below};

#[derive(Debug, Clone)]
pub(crate) struct Reach {
    /// tierd's own cgroup directory.
    pub base: PathBuf,
    /// `base` as a path inside the hierarchy (`/system.slice/tierd.service`).
    pub own: String,
    /// The hierarchy's mount point: `base` without `own`.
    hierarchy: PathBuf,
    /// Hierarchy paths below which tierd may adopt a cgroup, `own` included.
    adoptable: Vec<String>,
}

impl Reach {
    pub fn new(base: PathBuf, own: String) -> Reach {
        let depth = Path::new(&own).components().filter(|c| matches!(c, Component::Normal(_))).count();
        let hierarchy = base.ancestors().nth(depth).unwrap_or(&base).to_path_buf();
        let adoptable = vec![own.clone()];
        Reach { base, own, hierarchy, adoptable }
    }

    /// Lets tierd adopt cgroups below `roots` as well as below its own.
    pub fn allow(&mut self, roots: &[String]) {
        self.adoptable = std::iter::once(self.own.clone()).chain(roots.iter().cloned()).collect();
    }

    /// The directory of `rel`: relative to `base`, or an absolute hierarchy path below an
    /// adoptable root.
    pub fn dir(&self, rel: &str) -> Result<PathBuf, CgroupError> {
        let Some(below_root) = rel.strip_prefix('/') else { return inside(&self.base, rel) };
        if !self.adoptable.iter().any(|root| path_is_below(rel, root)) {
            return Err(CgroupError::NotAdoptable(rel.to_string(), self.adoptable.clone()));
        }
        inside(&self.hierarchy, below_root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_reach_only_below_the_adoptable_roots() {
        let mut r = Reach::new(
            PathBuf::from("/sys/fs/cgroup/system.slice/tierd.service"),
            "/system.slice/tierd.service".into(),
        );
        assert_eq!(r.dir("tierd/tenants/db").unwrap(), r.base.join("tierd/tenants/db"));
        assert_eq!(
            r.dir("/system.slice/tierd.service/containers/c1").unwrap(),
            PathBuf::from("/sys/fs/cgroup/system.slice/tierd.service/containers/c1"),
            "below its own cgroup by default"
        );
        let e = r.dir("/machine.slice/vm1.scope").unwrap_err();
        assert!(e.to_string().contains("adopt_roots"), "{e}");
        r.allow(&["/machine.slice".into()]);
        assert_eq!(r.dir("/machine.slice/vm1.scope").unwrap(), PathBuf::from("/sys/fs/cgroup/machine.slice/vm1.scope"));
        for bad in ["/machine.slice/../system.slice", "/machine.slicex/a", "/", "/user.slice"] {
            assert!(r.dir(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_hierarchy_is_the_base_without_its_own_path() {
        let r = Reach::new(PathBuf::from("/sys/fs/cgroup/memory"), "/".into());
        assert_eq!(r.dir("/a/b").unwrap(), PathBuf::from("/sys/fs/cgroup/memory/a/b"));
    }
}
