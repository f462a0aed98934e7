//! Following a run folder another process is writing (`--watch DIR`, the side panel's
//! "Follow"): once a second its `metrics.jsonl` and trace files are looked at, and when they
//! grew the run is read again and replaces the shown one (the panel and quantizer chosen
//! stay). A folder that does not exist yet, or has no metrics yet, is waited for.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hif8lab_train::run::RunDir;

/// How often the folder is looked at.
pub const PERIOD: Duration = Duration::from_secs(1);

/// A followed run folder.
#[derive(Debug)]
pub struct Watch {
    /// The folder.
    pub dir: PathBuf,
    /// Sizes of its metrics and trace files when last read (None before the first read).
    seen: Option<(u64, u64)>,
    /// When to look next.
    next: Instant,
    /// Times the run was read.
    pub reads: u64,
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

impl Watch {
    /// Starts following `dir` (looked at on the next poll).
    pub fn new(dir: PathBuf) -> Self {
        Watch {
            dir,
            seen: None,
            next: Instant::now(),
            reads: 0,
        }
    }

    /// Whether the folder changed since it was last read (and it is time to look): the
    /// sizes of its `metrics.jsonl` and `trace.jsonl`. Records them as read when it did.
    pub fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now + PERIOD;
        let sizes = (
            size(&self.dir.join(RunDir::METRICS)),
            size(&self.dir.join(RunDir::TRACE)),
        );
        if sizes.0 == 0 || self.seen == Some(sizes) {
            return false;
        }
        self.seen = Some(sizes);
        self.reads += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_only_when_the_files_grew_and_not_before_the_period() {
        let dir = std::env::temp_dir().join(format!("hif8lab-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut w = Watch::new(dir.clone());
        let t = Instant::now();
        assert!(!w.due(t), "no folder yet: waits");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(RunDir::METRICS), "{}\n").unwrap();
        assert!(!w.due(t), "looked at less than a period ago");
        assert!(w.due(t + PERIOD));
        assert!(!w.due(t + PERIOD * 2), "unchanged");
        std::fs::write(dir.join(RunDir::TRACE), "{}\n").unwrap();
        assert!(w.due(t + PERIOD * 3), "the trace grew");
        assert_eq!(w.reads, 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
