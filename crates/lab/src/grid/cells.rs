//! The grid's cells: the one table of cell names and keys ([`CellKey::TABLE`]), and the runs
//! a grid may hold.

use hif8lab_format::Format;
use hif8lab_scaling::EstimatorSpec;

/// The positive control's run name (its cell's name in [`CellKey::TABLE`]).
pub const CONTROL_RUN: &str = CellKey::TABLE[10].0;

/// One run of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRun {
    /// Folder name.
    pub name: String,
    /// The estimator (None: the high-precision baseline).
    pub estimator: Option<EstimatorSpec>,
    /// High or low learning rate.
    pub high_lr: bool,
    /// With the high-precision warmup.
    pub warmup: bool,
    /// Which setting of the paper it stands for.
    pub paper: &'static str,
    /// The number format of its quantizers.
    pub format: Format,
    /// The positive control (`continue.control`).
    pub control: bool,
}

/// A grid cell's identity: what makes one run of the grid another run (its name is only a
/// label of it). A run's matched baseline is found by its key, never by comparing names,
/// learning rates or the string "none".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellKey {
    /// The estimator (None: the high-precision baseline).
    pub estimator: Option<EstimatorSpec>,
    /// High or low learning rate.
    pub high_lr: bool,
    /// With the high-precision warmup.
    pub warmup: bool,
    /// The quantizers' number format (HiF8 for the baselines, which quantize nothing).
    pub format: Format,
    /// The positive control (its estimate deliberately too small).
    pub control: bool,
}

impl GridRun {
    /// This run's cell.
    pub fn key(&self) -> CellKey {
        CellKey {
            estimator: self.estimator,
            high_lr: self.high_lr,
            warmup: self.warmup,
            format: self.format,
            control: self.control,
        }
    }

    /// The cell of its matched high-precision baseline.
    pub fn baseline_key(&self) -> CellKey {
        self.key().baseline()
    }
}

/// A cell of the table: an estimator (none: the baseline), the rate, warmup, format, control.
const fn cell(
    estimator: Option<EstimatorSpec>,
    high_lr: bool,
    warmup: bool,
    format: Format,
    control: bool,
) -> CellKey {
    CellKey {
        estimator,
        high_lr,
        warmup,
        format,
        control,
    }
}

const MR: Option<EstimatorSpec> = Some(EstimatorSpec::MostRecent);
const MW: Option<EstimatorSpec> = Some(EstimatorSpec::MaxWindow(Some(64)));
const MW65: Option<EstimatorSpec> = Some(EstimatorSpec::MaxWindow(Some(65)));

impl CellKey {
    /// The high-precision baseline at the high rate.
    pub const BASELINE_HIGH: CellKey = cell(None, true, false, Format::HiF8, false);
    /// The high-precision baseline at the low rate.
    pub const BASELINE_LOW: CellKey = cell(None, false, false, Format::HiF8, false);
    /// most_recent at the high rate.
    pub const MOST_RECENT_HIGH: CellKey = cell(MR, true, false, Format::HiF8, false);
    /// most_recent at the low rate.
    pub const MOST_RECENT_LOW: CellKey = cell(MR, false, false, Format::HiF8, false);
    /// max_window(64) at the high rate.
    pub const MAX_WINDOW_HIGH: CellKey = cell(MW, true, false, Format::HiF8, false);
    /// max_window(64) at the low rate.
    pub const MAX_WINDOW_LOW: CellKey = cell(MW, false, false, Format::HiF8, false);
    /// most_recent with the warmup at the low rate.
    pub const MOST_RECENT_LOW_WARMUP: CellKey = cell(MR, false, true, Format::HiF8, false);
    /// The paper's fix: max_window(64) with the warmup at the low rate.
    pub const MAX_WINDOW_LOW_WARMUP: CellKey = cell(MW, false, true, Format::HiF8, false);
    /// most_recent's E4M3 twin at the low rate.
    pub const MOST_RECENT_LOW_E4M3: CellKey = cell(MR, false, false, Format::E4M3, false);
    /// max_window(64)'s E4M3 twin at the low rate.
    pub const MAX_WINDOW_LOW_E4M3: CellKey = cell(MW, false, false, Format::E4M3, false);
    /// The positive control (max_window(64) at the low rate, its estimate too small).
    pub const CONTROL_LOW: CellKey = cell(MW, false, false, Format::HiF8, true);
    /// The sham: max_window with a window of 65 at the low rate (a change that should not
    /// matter).
    pub const SHAM_LOW: CellKey = cell(MW65, false, false, Format::HiF8, false);

    /// Every cell a grid may hold, with its name: the one table of cell names (runs,
    /// reports, lessons and the app name cells by it, and find them by key).
    pub const TABLE: [(&'static str, CellKey); 12] = [
        ("baseline-high", CellKey::BASELINE_HIGH),
        ("baseline-low", CellKey::BASELINE_LOW),
        ("most_recent-high", CellKey::MOST_RECENT_HIGH),
        ("most_recent-low", CellKey::MOST_RECENT_LOW),
        ("max_window-high", CellKey::MAX_WINDOW_HIGH),
        ("max_window-low", CellKey::MAX_WINDOW_LOW),
        ("most_recent-low-warmup", CellKey::MOST_RECENT_LOW_WARMUP),
        ("max_window-low-warmup", CellKey::MAX_WINDOW_LOW_WARMUP),
        ("most_recent-low-e4m3", CellKey::MOST_RECENT_LOW_E4M3),
        ("max_window-low-e4m3", CellKey::MAX_WINDOW_LOW_E4M3),
        ("control-low", CellKey::CONTROL_LOW),
        ("max_window65-low", CellKey::SHAM_LOW),
    ];

    /// The cell's name in [`Self::TABLE`] (a cell outside it: its fields, spelled out).
    pub fn name(self) -> String {
        match CellKey::TABLE.iter().find(|(_, k)| *k == self) {
            Some((name, _)) => (*name).to_owned(),
            None => format!("{self:?}"),
        }
    }

    /// The cell a name names; an unknown name is an error naming the cells there are.
    pub fn named(name: &str) -> Result<CellKey, hif8lab_format::UnknownName> {
        CellKey::TABLE
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .ok_or_else(|| hif8lab_format::UnknownName {
                kind: "grid cell",
                given: name.to_owned(),
                expected: CellKey::TABLE.map(|(n, _)| n).join(", "),
            })
    }

    /// The cell of the high-precision baseline matched to this one: the same learning
    /// rate, no estimator, no warmup.
    pub fn baseline(self) -> CellKey {
        CellKey {
            estimator: None,
            high_lr: self.high_lr,
            warmup: false,
            format: Format::HiF8,
            control: false,
        }
    }
}

/// The runs: the paper's cells. Two high-precision baselines, most_recent and
/// max_window(64) at both learning rates without warmup, and both at the low rate with the
/// high-precision warmup. (Exponential smoothing and current scaling are measured on every
/// call of these runs as shadows.) The grid's own rates are `continue.lr_high` and
/// `continue.lr_low`; `paper` names the paper's setting each run stands in for.
pub fn grid_runs() -> Vec<GridRun> {
    [
        (
            CellKey::BASELINE_HIGH,
            "BF16 baseline at the high rate (paper: 1e-4)",
        ),
        (
            CellKey::BASELINE_LOW,
            "BF16 baseline at the low rate (paper: 1e-5)",
        ),
        (
            CellKey::MOST_RECENT_HIGH,
            "HiF8 most-recent, high rate (paper: 1e-4; saturation + forgetting)",
        ),
        (
            CellKey::MOST_RECENT_LOW,
            "HiF8 most-recent, low rate (paper: 1e-5; saturation)",
        ),
        (
            CellKey::MAX_WINDOW_HIGH,
            "HiF8 max-window(64), high rate (paper: 1e-4; forgetting)",
        ),
        (
            CellKey::MAX_WINDOW_LOW,
            "HiF8 max-window(64), low rate (paper: 1e-5), no warmup",
        ),
        (
            CellKey::MOST_RECENT_LOW_WARMUP,
            "HiF8 most-recent + warmup, low rate (paper: 500-step warmup, 1e-5)",
        ),
        (
            CellKey::MAX_WINDOW_LOW_WARMUP,
            "the paper's fix: max-window(64) + warmup, low rate (paper: 1e-5)",
        ),
    ]
    .into_iter()
    .map(|(key, paper)| GridRun::of(key, paper))
    .collect()
}

impl GridRun {
    /// The run of cell `key`, named by the table.
    pub fn of(key: CellKey, paper: &'static str) -> GridRun {
        GridRun {
            name: key.name(),
            estimator: key.estimator,
            high_lr: key.high_lr,
            warmup: key.warmup,
            paper,
            format: key.format,
            control: key.control,
        }
    }
}

/// The E4M3 twins of the low-rate estimator cells (`continue.e4m3`): the same runs with
/// E4M3 quantizers at target 448, clipping above it, so that clipping is seen where HiF8's
/// range absorbs an outlier.
pub fn e4m3_runs() -> Vec<GridRun> {
    vec![
        GridRun::of(
            CellKey::MOST_RECENT_LOW_E4M3,
            "E4M3 most-recent, low rate (clipping where HiF8 absorbs)",
        ),
        GridRun::of(
            CellKey::MAX_WINDOW_LOW_E4M3,
            "E4M3 max-window(64), low rate (clipping where HiF8 absorbs)",
        ),
    ]
}

/// Every run a grid may hold ([`grid_runs`] then [`e4m3_runs`]).
pub fn all_runs() -> Vec<GridRun> {
    let mut runs = grid_runs();
    runs.extend(e4m3_runs());
    runs.push(control_run());
    runs.push(sham_run());
    runs
}

/// The sham (`continue.sham`): max_window-low with a window of 65 calls instead of 64, the
/// only change; its contrast with max_window-low within each data order is a placebo that
/// can fail.
pub fn sham_run() -> GridRun {
    GridRun::of(
        CellKey::SHAM_LOW,
        "sham: max-window(65), low rate, no warmup (a change that should not matter)",
    )
}

/// The positive control (`continue.control`): max_window(64) at the low rate, no warmup, its
/// estimate too small by the control's margin, overflow clipped.
pub fn control_run() -> GridRun {
    GridRun::of(
        CellKey::CONTROL_LOW,
        "positive control: max-window(64) with its estimate made too small (clipping on purpose)",
    )
}

#[cfg(test)]
mod cell_tests {
    use super::*;

    #[test]
    fn every_run_is_named_by_the_cell_table_and_found_by_its_key() {
        let runs = all_runs();
        assert_eq!(runs.len(), CellKey::TABLE.len());
        for (run, (name, key)) in runs.iter().zip(CellKey::TABLE) {
            assert_eq!(run.name, name);
            assert!(run.key() == key, "{name}");
            assert_eq!(key.name(), name);
            assert!(CellKey::named(name) == Ok(key), "{name}");
        }
        // The table's keys are distinct: a lookup by key finds one cell.
        for (i, (_, a)) in CellKey::TABLE.iter().enumerate() {
            for (_, b) in &CellKey::TABLE[i + 1..] {
                assert!(a != b);
            }
        }
        assert_eq!(CONTROL_RUN, CellKey::CONTROL_LOW.name());
        let e = CellKey::named("max_window-low-wamrup")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown grid cell 'max_window-low-wamrup'")
                && e.contains("max_window-low-warmup"),
            "{e}"
        );
    }
}
