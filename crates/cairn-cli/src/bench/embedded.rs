//! The embedded mode's database: the file `--db` names (checked fresh by the arguments), or a file in a
//! temporary directory of its own that is removed when the run ends.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;

/// The file the embedded queue opens. Removes its temporary directory, if it made one, when dropped.
#[derive(Debug)]
pub struct BenchDb {
    path: PathBuf,
    temp_dir: Option<PathBuf>,
}

impl BenchDb {
    /// `path` if given (already checked to be missing or empty), else a file in a new temporary directory.
    ///
    /// # Errors
    /// When the temporary directory cannot be created.
    pub fn new(path: Option<&Path>) -> anyhow::Result<BenchDb> {
        if let Some(path) = path {
            return Ok(BenchDb {
                path: path.to_owned(),
                temp_dir: None,
            });
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("cairn-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir)
            .with_context(|| format!("creating the temporary directory {}", dir.display()))?;
        Ok(BenchDb {
            path: dir.join("bench.db"),
            temp_dir: Some(dir),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is temporary.
    pub fn is_temporary(&self) -> bool {
        self.temp_dir.is_some()
    }
}

impl Drop for BenchDb {
    fn drop(&mut self) {
        if let Some(dir) = &self.temp_dir
            && let Err(e) = std::fs::remove_dir_all(dir)
        {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove the bench's temporary directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_database_is_removed_with_its_directory() {
        let db = BenchDb::new(None).unwrap();
        assert!(db.is_temporary());
        std::fs::write(db.path(), b"x").unwrap();
        let dir = db.path().parent().unwrap().to_owned();
        drop(db);
        assert!(!dir.exists());
    }

    #[test]
    fn a_named_database_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.db");
        std::fs::write(&path, b"x").unwrap();
        let db = BenchDb::new(Some(&path)).unwrap();
        assert!(!db.is_temporary());
        drop(db);
        assert!(path.exists());
    }
}
