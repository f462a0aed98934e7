//! Replay input is streamed: importing a file holds its series, not its text. Its own test
//! binary (one test) so the process's peak memory is this test's alone.

use std::io::Read;
use std::path::Path;

use hif8lab_scaling::import::import_reader;

/// CSV rows made on the fly: `rows` calls with a wide comment column, so the text is ~50× the
/// series it holds.
struct WideCsv {
    rows: u64,
    next: u64,
    pending: Vec<u8>,
}

impl Read for WideCsv {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.len() < buf.len() && self.next <= self.rows {
            if self.next == 0 {
                self.pending
                    .extend_from_slice(b"step,layer,role,amax,comment\n");
            } else {
                let i = self.next - 1;
                let line = format!(
                    "{},block{},down.A,{}.5,\"{}\"\n",
                    i / 4,
                    i % 4,
                    i % 97,
                    "x".repeat(560)
                );
                self.pending.extend_from_slice(line.as_bytes());
            }
            self.next += 1;
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

/// Peak resident memory of this process (kB), from /proc.
#[cfg(target_os = "linux")]
fn peak_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[cfg(target_os = "linux")]
#[test]
fn a_large_csv_is_imported_in_the_memory_of_its_series() {
    let rows = 200_000u64; // ~120 MB of text, 2.4 MB of series
    let before = peak_kb();
    let imported = import_reader(
        Path::new("wide.csv"),
        WideCsv {
            rows,
            next: 0,
            pending: Vec::new(),
        },
    )
    .expect("imports");
    let grown_mb = (peak_kb() - before) as f64 / 1024.0;
    assert_eq!(imported.kind, "csv");
    assert_eq!(imported.series.len(), 4);
    let calls: usize = imported.series.iter().map(|s| s.amax.len()).sum();
    assert_eq!(calls as u64, rows);
    assert_eq!(imported.series[1].amax[..2], [1.5, 5.5]);
    // Reading the text whole would take ≥ 120 MB (it took ~8× the file before streaming).
    assert!(
        grown_mb < 40.0,
        "importing ~120 MB of CSV grew peak memory by {grown_mb:.0} MB"
    );
}
