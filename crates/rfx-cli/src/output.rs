//! Every file the `rfx` command writes, and everything it prints on stdout, goes through here.
//!
//! **Files.** A command's outputs form one [`OutputSet`]: each is first written to a fresh
//! temporary file created exclusively (`O_EXCL`, a random name, never through a link) in its
//! destination's directory and synced; only when every one of them is complete are they renamed
//! into place, each rename atomic. So:
//! - a failed command leaves every existing output as it was (all or nothing per run);
//! - a reader never sees a half-written file (atomic per file);
//! - two runs writing the same destination each write their own temporary file, so every final
//!   file is whole and comes from one run (when several runs race, each may win some files);
//! - a link planted under a temporary-looking name is never followed, and a destination that is
//!   a link is replaced, not written through.
//!
//! If a rename fails after others succeeded (the destination became a directory in between),
//! the renamed files are put back from hard-linked copies of the files they replaced.
//!
//! **Stdout.** [`print()`] writes and flushes, and returns a [`StdoutError`] instead of
//! panicking as `println!` does: a reader that closed the pipe (`rfx … | head`) ends the command
//! quietly; a full disk is an error like any other.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::{Builder, NamedTempFile, TempPath};

/// Writing a file failed: which file, and the I/O error.
#[derive(Debug)]
pub struct WriteError {
    /// The destination (or its directory).
    pub path: PathBuf,
    /// Why.
    pub source: io::Error,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write {}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn write_error(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError {
        path: path.to_path_buf(),
        source,
    }
}

/// The files one command writes, all or nothing (see the module documentation).
#[derive(Debug, Default)]
pub struct OutputSet {
    staged: Vec<Staged>,
    /// Directories this set created, removed again (when still empty) if it is not committed.
    created_dirs: Vec<PathBuf>,
}

#[derive(Debug)]
struct Staged {
    file: NamedTempFile,
    dest: PathBuf,
}

/// The directory `dest` goes into (`.` for a bare file name).
fn parent_of(dest: &Path) -> &Path {
    match dest.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The file name `dest` names, for temporary names that say what they are.
fn file_name_of(dest: &Path) -> String {
    dest.file_name()
        .map_or_else(|| "output".to_string(), |n| n.to_string_lossy().into_owned())
}

/// An error unless `dest` can be replaced by a file: it is missing, a file or a link.
fn check_replaceable(dest: &Path) -> Result<(), WriteError> {
    match std::fs::symlink_metadata(dest) {
        Ok(meta) if meta.is_dir() => Err(WriteError {
            path: dest.to_path_buf(),
            source: io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"),
        }),
        _ => Ok(()),
    }
}

impl OutputSet {
    /// An empty set.
    pub fn new() -> OutputSet {
        OutputSet::default()
    }

    /// Creates `dir` (and its parents) if it is missing; an error if it is not a directory.
    /// A directory created here is removed again if the set is dropped without committing
    /// and nothing else was put in it.
    pub fn create_dir(&mut self, dir: &Path) -> Result<(), WriteError> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty()) {
            if std::fs::symlink_metadata(d).is_ok() {
                break;
            }
            missing.push(d.to_path_buf());
            at = d.parent();
        }
        let not_a_directory = || WriteError {
            path: dir.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "it is not a directory"),
        };
        if std::fs::metadata(dir).is_ok_and(|meta| !meta.is_dir()) {
            return Err(not_a_directory());
        }
        std::fs::create_dir_all(dir).map_err(write_error(dir))?;
        if !std::fs::metadata(dir).map_err(write_error(dir))?.is_dir() {
            return Err(not_a_directory());
        }
        // Innermost first, so that removal can go in order.
        self.created_dirs.extend(missing);
        Ok(())
    }

    /// Writes the contents of `dest` with `write` into a new temporary file beside it; `dest`
    /// itself is replaced only by [`OutputSet::commit`].
    pub fn stage(
        &mut self,
        dest: &Path,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), WriteError> {
        check_replaceable(dest)?;
        let dir = parent_of(dest);
        let prefix = format!(".{}.", file_name_of(dest));
        let mut builder = Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // The final file gets the permissions `File::create` would give it (0o666 less the
        // umask), not the temporary file's default of owner-only.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let file = builder.tempfile_in(dir).map_err(write_error(dest))?;
        let result = (|| {
            let mut out = BufWriter::new(file.as_file());
            write(&mut out)?;
            out.flush()?;
            drop(out);
            file.as_file().sync_all()
        })();
        result.map_err(write_error(dest))?;
        self.staged.push(Staged {
            file,
            dest: dest.to_path_buf(),
        });
        Ok(())
    }

    /// Renames every staged file into place. On an error nothing is replaced: the files already
    /// renamed are put back (see the module documentation).
    pub fn commit(mut self) -> Result<(), WriteError> {
        for staged in &self.staged {
            check_replaceable(&staged.dest)?;
        }
        rename_all(std::mem::take(&mut self.staged))?;
        self.created_dirs.clear();
        Ok(())
    }
}

/// Renames every staged file into place, or none: after a failed rename the ones done are
/// undone from hard-linked copies of the files they replaced (a destination that did not
/// exist is removed again). Where a link cannot be made the replacement is still atomic.
fn rename_all(staged: Vec<Staged>) -> Result<(), WriteError> {
    let backups: Vec<Option<TempPath>> = staged.iter().map(|s| backup(&s.dest)).collect();
    let mut done: Vec<(PathBuf, Option<TempPath>)> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (Staged { file, dest }, backup) in staged.into_iter().zip(backups) {
        if let Err(error) = file.persist(&dest) {
            for (dest, backup) in done.into_iter().rev() {
                match backup {
                    Some(backup) => {
                        let _ = backup.persist(&dest);
                    }
                    None => {
                        let _ = std::fs::remove_file(&dest);
                    }
                }
            }
            return Err(WriteError {
                path: dest,
                source: error.error,
            });
        }
        let dir = parent_of(&dest).to_path_buf();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
        done.push((dest, backup));
    }
    // The renames are durable once their directories are synced; a failure here changes
    // nothing a reader can see, so it is not an error.
    for dir in dirs {
        if let Ok(dir) = File::open(&dir) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        // The temporary files delete themselves; directories made for them go too if empty.
        self.staged.clear();
        for dir in &self.created_dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A hard link to `dest` under a fresh name beside it, if `dest` is a regular file.
fn backup(dest: &Path) -> Option<TempPath> {
    let meta = std::fs::symlink_metadata(dest).ok()?;
    if !meta.is_file() {
        return None;
    }
    let prefix = format!(".{}.", file_name_of(dest));
    Builder::new()
        .prefix(&prefix)
        .suffix(".bak")
        .make_in(parent_of(dest), |path| std::fs::hard_link(dest, path))
        .ok()
        .map(NamedTempFile::into_temp_path)
}

/// Writes one file on its own, all or nothing (an [`OutputSet`] of one).
pub fn write_file(
    dest: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), WriteError> {
    let mut set = OutputSet::new();
    set.stage(dest, write)?;
    set.commit()
}

/// Writing to stdout failed. [`StdoutError::is_closed_pipe`]: the reader went away
/// (`rfx … | head`), which the command ends on quietly, the way Unix filters do; anything else
/// (a full disk) is an error to report.
#[derive(Debug)]
pub struct StdoutError(pub io::Error);

impl StdoutError {
    /// `true` for a pipe whose reader has gone.
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write to stdout: {}", self.0)
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Writes to stdout with `write` and flushes; the error is returned, never a panic as with
/// `println!`.
pub fn print(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), StdoutError> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    write(&mut out).and_then(|()| out.flush()).map_err(StdoutError)
}

/// Prints `text` on stdout (see [`print()`]).
pub fn print_str(text: &str) -> Result<(), StdoutError> {
    print(|out| out.write_all(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::entries;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rfx-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    /// A scratch directory with `a.txt` holding "old a", and a set that stages "new a" to it
    /// and "new b" to `b.txt`.
    fn staged_pair(tag: &str) -> (PathBuf, PathBuf, PathBuf, OutputSet) {
        let dir = temp_dir(tag);
        let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
        std::fs::write(&a, "old a").expect("write");
        let mut set = OutputSet::new();
        set.stage(&a, |w| w.write_all(b"new a")).expect("stage a");
        set.stage(&b, |w| w.write_all(b"new b")).expect("stage b");
        (dir, a, b, set)
    }

    #[test]
    fn a_set_is_written_only_on_commit_and_leaves_no_temporary_files() {
        let (dir, a, b, set) = staged_pair("commit");
        assert_eq!(std::fs::read_to_string(&a).expect("a"), "old a");
        assert!(!b.exists());
        set.commit().expect("commit");
        assert_eq!(std::fs::read_to_string(&a).expect("a"), "new a");
        assert_eq!(std::fs::read_to_string(&b).expect("b"), "new b");
        assert_eq!(entries(&dir), ["a.txt", "b.txt"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_gets_the_permissions_file_create_gives() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = temp_dir("mode");
        let plain = dir.join("plain.txt");
        std::fs::write(&plain, "x").expect("write");
        let written = dir.join("written.txt");
        write_file(&written, |w| w.write_all(b"x")).expect("write_file");
        let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&written), mode(&plain));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_leaves_everything_as_it_was() {
        let dir = temp_dir("fail");
        let a = dir.join("a.txt");
        std::fs::write(&a, "old a").expect("write");
        let mut set = OutputSet::new();
        set.stage(&a, |w| w.write_all(b"new a")).expect("stage a");
        let err = set
            .stage(&dir.join("b.txt"), |_| Err(io::Error::other("disk on fire")))
            .expect_err("failing writer");
        assert!(err.to_string().contains("disk on fire"), "{err}");
        drop(set);
        assert_eq!(std::fs::read_to_string(&a).expect("a"), "old a");
        assert_eq!(entries(&dir), ["a.txt"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_destination_that_is_a_directory_fails_the_commit_before_any_rename() {
        let (dir, a, b, set) = staged_pair("isdir");
        std::fs::create_dir(&b).expect("dir");
        assert!(set.commit().is_err());
        assert_eq!(std::fs::read_to_string(&a).expect("a"), "old a");
        assert_eq!(entries(&dir), ["a.txt", "b.txt"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rename_failing_after_another_succeeded_puts_the_first_back() {
        let (dir, a, b, mut set) = staged_pair("rollback");
        // The destination becomes a directory after the up-front check: the second rename
        // fails, and the first is undone.
        std::fs::create_dir(&b).expect("dir");
        std::fs::write(b.join("inside"), "x").expect("write");
        let staged = std::mem::take(&mut set.staged);
        let err = rename_all(staged).expect_err("b is a directory");
        assert_eq!(err.path, b);
        drop(set);
        assert_eq!(std::fs::read_to_string(&a).expect("a"), "old a");
        assert_eq!(entries(&dir), ["a.txt", "b.txt"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_made_for_a_set_that_fails_is_removed() {
        let dir = temp_dir("made");
        let out = dir.join("x").join("y");
        let mut set = OutputSet::new();
        set.create_dir(&out).expect("create");
        assert!(out.is_dir());
        drop(set);
        assert!(entries(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
