//! A run view's exports: the loss curve (CSV, JSON lines) and every stored call (CSV).

use super::*;

impl RunView {
    /// The loss curve as CSV: `step,loss` and, when given, the matched baseline's loss.
    pub fn loss_csv(&self, baseline: &[[f64; 2]]) -> String {
        let mut out = csv::Writer::from_writer(Vec::new());
        let _ = out.write_record(["step", "loss", "baseline_loss"]);
        for (i, p) in self.loss.iter().enumerate() {
            let b = baseline
                .get(i)
                .filter(|b| b[0] == p[0])
                .map(|b| b[1].to_string())
                .unwrap_or_default();
            let _ = out.write_record([(p[0] as u64).to_string(), p[1].to_string(), b]);
        }
        csv_text(out)
    }

    /// The loss curve as JSON lines (`{"step":..,"loss":..,"qat_enabled":..}`).
    pub fn loss_jsonl(&self) -> String {
        let mut out = String::new();
        for p in &self.loss {
            let qat = self.qat_from.is_some_and(|q| p[0] >= q as f64);
            out.push_str(
                &serde_json::json!({"step": p[0] as u64, "loss": p[1], "qat_enabled": qat})
                    .to_string(),
            );
            out.push('\n');
        }
        out
    }

    /// Every quantizer call as CSV: `step,quantizer,amax,underflow`, then per estimator its
    /// `est_`, `above_est_` and `overflow_` columns.
    pub fn calls_csv(&self) -> String {
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut header: Vec<String> = ["step", "quantizer", "amax", "underflow"]
            .map(String::from)
            .to_vec();
        for e in &self.estimators {
            let e = e.replace(',', ";"); // holt(a,b,phi): a header without quoting
            header.extend([
                format!("est_{e}"),
                format!("above_est_{e}"),
                format!("overflow_{e}"),
            ]);
        }
        let _ = out.write_record(&header);
        for (name, calls) in &self.calls {
            for c in calls {
                let mut row = vec![
                    c.step.to_string(),
                    name.to_string(),
                    format!("{:e}", c.amax),
                    c.underflow.to_string(),
                ];
                for k in 0..self.estimators.len() {
                    let est = c.est.get(k).copied().unwrap_or(f32::NAN);
                    let above = c.above_est.get(k).copied().unwrap_or(0);
                    let over = c.overflow.get(k).copied().unwrap_or(0);
                    row.extend([format!("{est:e}"), above.to_string(), over.to_string()]);
                }
                let _ = out.write_record(&row);
            }
        }
        csv_text(out)
    }
}
