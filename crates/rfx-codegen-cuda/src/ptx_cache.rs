//! An on-disk cache of the PTX that NVRTC makes, so that a process that starts again does not
//! pay NVRTC's tens of milliseconds per kernel again (the driver keeps its own cache of the
//! machine code it makes of PTX).
//!
//! Where: `RFX_CACHE_DIR` when set (`off` or empty turns the cache off), else
//! `$XDG_CACHE_HOME/rfx`, else `$HOME/.cache/rfx`; entries are files in its `ptx/` folder.
//!
//! An entry holds its whole key (the CUDA source, the program name, the architecture, the
//! fast-math choice, the NVRTC library and version, and a fingerprint of `nvrtc.rs`, which
//! holds the NVRTC flags and the rewrite applied to its output) and is used only when the key
//! matches exactly. File names are hashes of the key, so a collision, a stale entry or a
//! damaged file is a miss, never a wrong kernel. An entry is written to a temporary file and
//! renamed into place, so no process reads half of one. A failure to read or write is a miss:
//! the cache never turns a compile into an error. The folder holds at most
//! [`MAX_ENTRIES`] entries: every 256th write of a process counts them, and past the limit the
//! least recently written half is removed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Environment variable naming the cache folder (`off` or empty: no cache).
pub(crate) const CACHE_DIR_VAR: &str = "RFX_CACHE_DIR";
/// Most entries kept in the folder.
pub(crate) const MAX_ENTRIES: usize = 4096;
/// Writes between two counts of the folder's entries.
const PRUNE_EVERY: usize = 256;

/// Turned off for the process by [`set_enabled`].
static DISABLED: AtomicBool = AtomicBool::new(false);

/// Turns the process's use of the on-disk cache on or off (a fuzzer, which compiles every
/// kernel once, turns it off so as not to fill the folder).
pub(crate) fn set_enabled(enabled: bool) {
    DISABLED.store(!enabled, Ordering::Relaxed);
}

/// The process's cache, from the environment (read once); `None` when turned off or when no
/// folder can be named.
pub(crate) fn shared() -> Option<&'static PtxCache> {
    static CACHE: OnceLock<Option<PtxCache>> = OnceLock::new();
    if DISABLED.load(Ordering::Relaxed) {
        return None;
    }
    CACHE
        .get_or_init(|| {
            let env = |name: &str| {
                std::env::var_os(name)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            };
            let root = match std::env::var_os(CACHE_DIR_VAR) {
                Some(value) if value.is_empty() || value == "off" => return None,
                Some(value) => PathBuf::from(value),
                None => env("XDG_CACHE_HOME")
                    .or_else(|| env("HOME").map(|home| home.join(".cache")))?
                    .join("rfx"),
            };
            Some(PtxCache::new(root.join("ptx"), MAX_ENTRIES))
        })
        .as_ref()
}

/// A folder of PTX entries.
pub(crate) struct PtxCache {
    dir: PathBuf,
    max_entries: usize,
    writes: AtomicUsize,
}

impl PtxCache {
    pub(crate) fn new(dir: PathBuf, max_entries: usize) -> PtxCache {
        PtxCache {
            dir,
            max_entries,
            writes: AtomicUsize::new(0),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        self.dir.join(format!("{:016x}.ptx", hasher.finish()))
    }

    /// The PTX stored under exactly `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        let (length, rest) = text.split_once('\n')?;
        let length: usize = length.parse().ok()?;
        let stored = rest.get(..length)?;
        (stored == key).then(|| rest[length..].to_string())
    }

    /// Stores `ptx` under `key` (a failure is ignored: the next process compiles again).
    pub(crate) fn put(&self, key: &str, ptx: &str) {
        static TEMPORARIES: AtomicUsize = AtomicUsize::new(0);
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let temporary = self.dir.join(format!(
            ".{}-{}.tmp",
            std::process::id(),
            TEMPORARIES.fetch_add(1, Ordering::Relaxed)
        ));
        let entry = format!("{}\n{key}{ptx}", key.len());
        if std::fs::write(&temporary, entry).is_err() || std::fs::rename(&temporary, self.path(key)).is_err()
        {
            let _ = std::fs::remove_file(&temporary);
            return;
        }
        if self
            .writes
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(PRUNE_EVERY)
        {
            prune(&self.dir, self.max_entries);
        }
    }
}

/// Removes the least recently written half of the entries when there are more than `max`.
fn prune(dir: &Path, max: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "ptx"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= max {
        return;
    }
    files.sort();
    let remove = files.len() - max / 2;
    for (_, path) in files.into_iter().take(remove) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::{PtxCache, prune};

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rfx-ptx-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_entry_is_found_under_its_whole_key_only() {
        let dir = scratch("keys");
        let cache = PtxCache::new(dir.clone(), 100);
        assert_eq!(cache.get("key a"), None);
        cache.put("key a", ".version 8.8\n// a\n");
        assert_eq!(cache.get("key a").as_deref(), Some(".version 8.8\n// a\n"));
        // Another key's file name holding this entry (a hash collision) is a miss.
        std::fs::rename(cache.path("key a"), cache.path("key b")).expect("rename");
        assert_eq!(cache.get("key b"), None);
        // A damaged entry is a miss, and a new write replaces it.
        std::fs::write(cache.path("key a"), "999\nkey a").expect("write");
        assert_eq!(cache.get("key a"), None);
        std::fs::write(cache.path("key a"), "not a length\n").expect("write");
        assert_eq!(cache.get("key a"), None);
        cache.put("key a", "ptx 2");
        assert_eq!(cache.get("key a").as_deref(), Some("ptx 2"));
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        assert!(names.iter().all(|n| n.ends_with(".ptx")), "{names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn past_the_limit_the_oldest_half_is_removed() {
        let dir = scratch("prune");
        let cache = PtxCache::new(dir.clone(), 8);
        for k in 0..12 {
            cache.put(&format!("key {k}"), "ptx");
            // Distinct modification times, oldest first.
            let file = std::fs::File::options()
                .write(true)
                .open(cache.path(&format!("key {k}")))
                .expect("open");
            let time = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + k);
            file.set_modified(time).expect("set_modified");
        }
        prune(&dir, 8);
        for k in 0..12 {
            let kept = cache.get(&format!("key {k}")).is_some();
            assert_eq!(kept, k >= 8, "key {k}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
