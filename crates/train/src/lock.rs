//! One writer per folder: an advisory lock on `<dir>/.lock`, held for the writer's life and
//! released by the operating system when the process ends, however it ends (kill -9
//! included), so a killed run can be resumed at once. Readers (`eval`, `export`, the app)
//! never take it. The file holds the writer's process id, for the message a second writer
//! gets.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// The lock file's name inside a locked folder.
pub const LOCK_FILE: &str = ".lock";

/// A held folder lock (released on drop or at process exit).
#[derive(Debug)]
pub struct FolderLock {
    _file: File,
}

impl FolderLock {
    /// Takes the lock of `dir` (created if missing), or fails with `WouldBlock` naming the
    /// process that holds it.
    pub fn acquire(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {
                file.set_len(0)?;
                writeln!(file, "{}", std::process::id())?;
                Ok(FolderLock { _file: file })
            }
            Err(fs::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&path).unwrap_or_default();
                let holder = holder.trim();
                Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "{} is being written by another process{}; one writer per folder (wait \
                         for it to finish, or stop it first)",
                        dir.display(),
                        if holder.is_empty() {
                            String::new()
                        } else {
                            format!(" (pid {holder})")
                        }
                    ),
                ))
            }
            Err(fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
                // No file locks here (the browser's file system): one writer by construction.
                Ok(FolderLock { _file: file })
            }
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("hif8lab-lock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let first = FolderLock::acquire(&dir).unwrap();
        let e = FolderLock::acquire(&dir).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(first);
        let again = FolderLock::acquire(&dir);
        assert!(again.is_ok());
        drop(again);
        fs::remove_dir_all(&dir).unwrap();
    }
}
