//! Scratch folders and files for the crate's own tests: created under the system's temporary
//! folder and removed when the test drops them, so a test run leaves nothing behind.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh, empty scratch folder, removed with everything in it when dropped.
pub struct ScratchDir {
    path: PathBuf,
    _root: tempfile::TempDir,
}

impl ScratchDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// A file written into a folder of its own, both removed on drop.
pub struct ScratchFile {
    path: PathBuf,
    _dir: ScratchDir,
}

impl ScratchFile {
    /// Writes `text` to `name` in a fresh scratch folder.
    pub fn new(name: &str, text: &str) -> ScratchFile {
        let dir = scratch_dir();
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("writing a scratch file");
        ScratchFile { path, _dir: dir }
    }
}

impl Deref for ScratchFile {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

/// A fresh, empty scratch folder.
pub fn scratch_dir() -> ScratchDir {
    let root = tempfile::Builder::new()
        .prefix("capplan-unit-")
        .tempdir()
        .expect("a scratch folder");
    ScratchDir {
        path: root.path().to_path_buf(),
        _root: root,
    }
}

/// A fresh, empty folder called `name` (some tests read a folder's name), inside a scratch
/// folder of its own.
pub fn scratch_named(name: &str) -> ScratchDir {
    let root = scratch_dir();
    let path = root.path().join(name);
    std::fs::create_dir_all(&path).expect("a named scratch folder");
    ScratchDir {
        path,
        _root: root._root,
    }
}
