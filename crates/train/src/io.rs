//! Files written whole or not at all: through a temporary file beside the target, synced,
//! then renamed over it, so a full disk or a killed process never leaves a half-written file
//! under the real name.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Writes `bytes` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, &mut |w| w.write_all(bytes))
}

/// Writes what `write` produces through a buffered temporary file and a rename (the
/// content is streamed, never held whole); the temporary is removed when anything fails.
pub fn write_atomic_with(
    path: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        write(&mut f)?;
        let f = f.into_inner().map_err(io::IntoInnerError::into_error)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Whether a temporary name `*.tmp-PID` was left by a process that has ended (this
/// process's own are not; where the system cannot tell, none is).
pub fn left_by_ended_process(name: &str) -> bool {
    let Some(pid) = temporary_pid(name) else {
        return false;
    };
    let proc_fs = Path::new("/proc/self").exists();
    pid != std::process::id() && proc_fs && !Path::new(&format!("/proc/{pid}")).exists()
}

/// The process id a temporary name `*.tmp-PID` carries (the writer that made it).
pub fn temporary_pid(name: &str) -> Option<u32> {
    name.rsplit_once(".tmp-")
        .and_then(|(_, pid)| pid.parse::<u32>().ok())
}
