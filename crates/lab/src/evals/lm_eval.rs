//! lm-evaluation-harness output folders, read as that tool writes them: `results_<time>.json`
//! (per task and metric, `n-samples`, `versions`, `n-shot`, `group_subtasks`) and, where the
//! run had `--log_samples`, `samples_<task>_<time>.jsonl` (one line per document: `doc_id`,
//! `doc_hash`, the per-document metrics, the choices' log-likelihoods; also read gzipped as
//! `samples_<task>_<time>.jsonl.gz`).
//!
//! A folder may hold several results files (one `lm_eval` call per task, as many people run
//! it): they are merged, the newest file winning where two report the same task. The folder
//! named may be the `--output_path` itself, whose results lie one level down in a folder named
//! after the model, or that folder, or one results file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::EvalError;

/// One task's results in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskResult {
    /// The task's name as lm-eval reports it.
    pub name: String,
    /// Metric values by lm-eval's key (`acc,none`, `exact_match,flexible-extract`); the
    /// standard errors (`*_stderr,*`) are left out.
    pub metrics: BTreeMap<String, f64>,
    /// Documents scored (`n-samples.effective`), where reported.
    pub n: Option<u64>,
    /// Documents in the task (`n-samples.original`), where reported.
    pub n_original: Option<u64>,
    /// The task's version (as JSON text: lm-eval writes numbers or strings).
    pub version: Option<String>,
    /// Few-shot examples (`n-shot`).
    pub n_shot: Option<u64>,
    /// The results file it came from.
    pub file: PathBuf,
    /// The per-document log, where the run wrote one.
    pub samples: Option<Samples>,
}

/// A task's per-document log (`--log_samples`).
#[derive(Clone, Debug, PartialEq)]
pub struct Samples {
    /// The file read.
    pub file: PathBuf,
    /// One per document, ordered by `doc_id`.
    pub docs: Vec<Sample>,
}

/// One document's record.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// lm-eval's document index.
    pub doc_id: u64,
    /// The filter the record's metrics went through (`none`, `strict-match`, …): a task
    /// with several filters logs each document once per filter.
    pub filter: String,
    /// Hash of the document (same document in two runs: same hash).
    pub doc_hash: Option<String>,
    /// Hash of the prompt (few-shot context included).
    pub prompt_hash: Option<String>,
    /// Per-document metrics (`acc`, `acc_norm`, `exact_match`, …: numbers only).
    pub metrics: BTreeMap<String, f64>,
    /// The document's cluster where the task has one (HellaSwag's `activity_label`, MMLU's
    /// `subject`, a probe set's `cluster`).
    pub cluster: Option<String>,
    /// The document field the cluster was read from.
    pub cluster_field: Option<&'static str>,
    /// Multiple choice: the log-likelihood of each choice, where logged.
    pub loglik: Option<Vec<f64>>,
    /// Multiple choice: the index of the right choice, where it can be read.
    pub target: Option<usize>,
}

/// One lm-eval run (one model), all its tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalRun {
    /// What the user named.
    pub path: PathBuf,
    /// The model as lm-eval recorded it (`model_name`, else `config.model_args`), else the
    /// folder's name.
    pub model: String,
    /// Tasks by name.
    pub tasks: BTreeMap<String, TaskResult>,
    /// Groups and their subtasks (`group_subtasks`: MMLU's subjects).
    pub groups: BTreeMap<String, Vec<String>>,
}

/// Document fields that name a cluster, in order of preference.
const CLUSTER_FIELDS: [&str; 4] = ["cluster", "activity_label", "subject", "category"];

impl EvalRun {
    /// Reads an lm-eval output folder (or one results file) with its per-document logs.
    pub fn open(path: &Path) -> Result<Self, EvalError> {
        let files = results_files(path)?;
        let mut run = EvalRun {
            path: path.to_path_buf(),
            model: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            tasks: BTreeMap::new(),
            groups: BTreeMap::new(),
        };
        // Oldest first: a newer file's task replaces an older one's.
        for file in &files {
            run.merge_results(file)?;
        }
        // Every subtask a group lists is reported (as a task or a group): a group whose
        // member is missing would be pooled over part of itself.
        for (group, subs) in &run.groups {
            if let Some(s) = subs
                .iter()
                .find(|s| !run.tasks.contains_key(*s) && !run.groups.contains_key(*s))
            {
                let file = files.last().map_or(path, PathBuf::as_path);
                return Err(EvalError::new(
                    file,
                    &format!("group_subtasks.{group}"),
                    format!("lists the subtask {s}, which the results do not report"),
                ));
            }
        }
        Ok(run)
    }

    /// The tasks `task` scores documents of: itself where it is not a group, else its
    /// subtasks' leaves (nested groups expanded), in the order listed. The groups are
    /// acyclic (`open` refuses a cycle).
    pub fn leaves(&self, task: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![task.to_string()];
        while let Some(t) = stack.pop() {
            match self.groups.get(&t) {
                Some(subs) => stack.extend(subs.iter().rev().cloned()),
                None => {
                    if !out.contains(&t) {
                        out.push(t);
                    }
                }
            }
        }
        out
    }

    /// A group that reaches itself through `group_subtasks` (`a → b → a`), as its path.
    fn cycle(&self) -> Option<Vec<String>> {
        fn visit(
            groups: &BTreeMap<String, Vec<String>>,
            at: &str,
            path: &mut Vec<String>,
            done: &mut std::collections::BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(i) = path.iter().position(|p| p == at) {
                let mut cycle = path[i..].to_vec();
                cycle.push(at.to_string());
                return Some(cycle);
            }
            if done.contains(at) {
                return None;
            }
            path.push(at.to_string());
            for s in groups.get(at).into_iter().flatten() {
                if let Some(c) = visit(groups, s, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            done.insert(at.to_string());
            None
        }
        let mut done = std::collections::BTreeSet::new();
        self.groups
            .keys()
            .find_map(|g| visit(&self.groups, g, &mut Vec::new(), &mut done))
    }

    fn merge_results(&mut self, file: &Path) -> Result<(), EvalError> {
        let bytes = read_input(file, false)?;
        let doc: Value = serde_json::from_slice(&bytes)
            .map_err(|e| EvalError::new(file, "", format!("not JSON ({e})")))?;
        let results = doc
            .get("results")
            .and_then(Value::as_object)
            .ok_or_else(|| EvalError::new(file, "results", "missing or not an object"))?;
        // lm-eval records the model as given (often a path): its last component names it.
        if let Some(m) = doc.get("model_name").and_then(Value::as_str) {
            let name = m.trim_end_matches('/').rsplit('/').next().unwrap_or(m);
            if !name.is_empty() {
                self.model = name.to_string();
            }
        }
        if let Some(groups) = doc.get("group_subtasks").and_then(Value::as_object) {
            for (g, subs) in groups {
                // A list of task names (lm-eval writes [] for a task that is no group).
                let list = subs
                    .as_array()
                    .and_then(|a| {
                        a.iter()
                            .map(|s| s.as_str().map(String::from))
                            .collect::<Option<Vec<String>>>()
                    })
                    .ok_or_else(|| {
                        EvalError::new(
                            file,
                            &format!("group_subtasks.{g}"),
                            "not a list of task names",
                        )
                    })?;
                if !list.is_empty() {
                    self.groups.insert(g.clone(), list);
                }
            }
            if let Some(cycle) = self.cycle() {
                return Err(EvalError::new(
                    file,
                    "group_subtasks",
                    format!(
                        "the groups form a cycle ({}): a group cannot contain itself",
                        cycle.join(" → ")
                    ),
                ));
            }
        }
        let stamp = stamp_of(file, "results_");
        for (task, values) in results {
            let field = format!("results.{task}");
            let obj = values
                .as_object()
                .ok_or_else(|| EvalError::new(file, &field, "not an object"))?;
            let mut metrics = BTreeMap::new();
            for (k, v) in obj {
                if k.contains("_stderr") || k == "alias" || k == "name" || k == "sample_len" {
                    continue;
                }
                if let Some(x) = number(v) {
                    metrics.insert(k.clone(), x);
                }
            }
            let n_samples = doc.get("n-samples").and_then(|n| n.get(task));
            let count = |key: &str| -> Result<Option<u64>, EvalError> {
                match n_samples.and_then(|n| n.get(key)) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                        EvalError::new(
                            file,
                            &format!("n-samples.{task}.{key}"),
                            "not a whole number",
                        )
                    }),
                }
            };
            let (n, n_original) = (count("effective")?, count("original")?);
            if let (Some(e), Some(o)) = (n, n_original)
                && e > o
            {
                return Err(EvalError::new(
                    file,
                    &format!("n-samples.{task}.effective"),
                    format!("{e} documents scored of a task of {o}: impossible counts"),
                ));
            }
            let samples = match &stamp {
                Some(s) => read_samples(file, task, s)?,
                None => None,
            };
            self.tasks.insert(
                task.clone(),
                TaskResult {
                    name: task.clone(),
                    metrics,
                    n,
                    n_original,
                    version: doc
                        .get("versions")
                        .and_then(|v| v.get(task))
                        .filter(|v| !v.is_null())
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            // 1 and 1.0 are the same version.
                            other => number(other).map_or(other.to_string(), |x| format!("{x}")),
                        }),
                    n_shot: doc
                        .get("n-shot")
                        .and_then(|v| v.get(task))
                        .and_then(Value::as_u64),
                    file: file.to_path_buf(),
                    samples,
                },
            );
        }
        Ok(())
    }

    /// The task called `name`, where the run has it.
    pub fn task(&self, name: &str) -> Option<&TaskResult> {
        self.tasks.get(name)
    }
}

/// A JSON number, or a string holding one (lm-eval logs log-likelihoods as strings).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// The most a results file or a per-document log may hold, read plain or inflated from gzip
/// (lm-eval's largest logs are tens of MiB; a file beyond this is refused before it is held).
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// The bytes of `file`: only a regular file is read (a FIFO would hang, a link to /dev/zero
/// never end), at most [`MAX_INPUT_BYTES`] of it, and with `gz` every gzip member of it
/// inflated up to the same bound (a small file that inflates to gigabytes is refused, not
/// held).
pub(crate) fn read_input(file: &Path, gz: bool) -> Result<Vec<u8>, EvalError> {
    read_capped(file, gz, MAX_INPUT_BYTES)
}

/// [`read_input`] with the bound `cap`.
fn read_capped(file: &Path, gz: bool, cap: u64) -> Result<Vec<u8>, EvalError> {
    use std::io::Read;
    let meta = std::fs::metadata(file).map_err(|e| EvalError::io(file, &e))?;
    if !meta.is_file() {
        return Err(EvalError::new(
            file,
            "",
            "not a regular file (a FIFO, device or folder is not read)",
        ));
    }
    let too_big = || {
        EvalError::new(
            file,
            "",
            format!(
                "holds more than {} MiB{}: refused before it is read whole",
                cap >> 20,
                if gz { " inflated" } else { "" }
            ),
        )
    };
    if meta.len() > cap {
        return Err(too_big());
    }
    let f = std::fs::File::open(file).map_err(|e| EvalError::io(file, &e))?;
    let mut bytes = Vec::new();
    if gz {
        flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f))
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| EvalError::new(file, "", format!("not gzip ({e})")))?;
    } else {
        f.take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| EvalError::io(file, &e))?;
    }
    if bytes.len() as u64 > cap {
        return Err(too_big());
    }
    Ok(bytes)
}

/// The results files under `path`, oldest first.
fn results_files(path: &Path) -> Result<Vec<PathBuf>, EvalError> {
    if path.exists() && !path.is_dir() {
        // A file (or a FIFO or device, which `read_input` refuses by name).
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        return Err(EvalError::new(path, "", "no such file or folder"));
    }
    let mut found = Vec::new();
    let mut dirs = vec![(path.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| EvalError::io(&dir, &e))?;
        for entry in entries.flatten() {
            let p = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if p.is_dir() && depth < 2 {
                dirs.push((p, depth + 1));
            } else if name.starts_with("results") && name.ends_with(".json") {
                found.push(p);
            }
        }
    }
    if found.is_empty() {
        return Err(EvalError::new(
            path,
            "",
            "no lm-eval results (results_*.json) here or one or two folders down",
        ));
    }
    // One run is one folder: lm-eval writes each model's results into a folder of its own.
    let folders: std::collections::BTreeSet<&Path> =
        found.iter().filter_map(|p| p.parent()).collect();
    if folders.len() > 1 {
        let names: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
        return Err(EvalError::new(
            path,
            "",
            format!(
                "results in more than one folder ({}): one model's results each; name the folder of one",
                names.join(", ")
            ),
        ));
    }
    // lm-eval's names carry an ISO time: sorting the names sorts by time.
    found.sort_by_key(|p| p.file_name().map(|n| n.to_os_string()));
    Ok(found)
}

/// The time stamp of `results_<stamp>.json` / `samples_<task>_<stamp>.jsonl`.
fn stamp_of(file: &Path, prefix: &str) -> Option<String> {
    let name = file.file_name()?.to_string_lossy().into_owned();
    let rest = name.strip_prefix(prefix)?;
    Some(rest.strip_suffix(".json").unwrap_or(rest).to_string())
}

/// The per-document log of `task` written with the results file `results` (same time
/// stamp), where there is one.
fn read_samples(results: &Path, task: &str, stamp: &str) -> Result<Option<Samples>, EvalError> {
    let dir = results.parent().unwrap_or(Path::new("."));
    let plain = dir.join(format!("samples_{task}_{stamp}.jsonl"));
    let gz = dir.join(format!("samples_{task}_{stamp}.jsonl.gz"));
    // `exists` (not `is_file`): a FIFO or a link to a device of that name is refused by
    // `read_input`, not taken for a missing log.
    let (file, text) = if plain.exists() {
        let bytes = read_input(&plain, false)?;
        (plain, bytes)
    } else if gz.exists() {
        let bytes = read_input(&gz, true)?;
        (gz, bytes)
    } else {
        return Ok(None);
    };
    let text = String::from_utf8(text)
        .map_err(|e| EvalError::new(&file, "", format!("not UTF-8 ({e})")))?;
    let mut docs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |field: &str| format!("line {}{}", i + 1, field);
        let v: Value = serde_json::from_str(line)
            .map_err(|e| EvalError::new(&file, &at(""), format!("not JSON ({e})")))?;
        let doc_id = v.get("doc_id").and_then(Value::as_u64).ok_or_else(|| {
            EvalError::new(&file, &at(": doc_id"), "missing or not a whole number")
        })?;
        let filter = v
            .get("filter")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .to_string();
        if !seen.insert((filter.clone(), doc_id)) {
            return Err(EvalError::new(
                &file,
                &at(": doc_id"),
                format!("{doc_id} appears twice for filter {filter}"),
            ));
        }
        let mut metrics = BTreeMap::new();
        if let Some(names) = v.get("metrics").and_then(Value::as_array) {
            for name in names.iter().filter_map(Value::as_str) {
                if let Some(x) = v.get(name).and_then(number) {
                    metrics.insert(name.to_string(), x);
                }
            }
        }
        let doc = v.get("doc");
        let (cluster_field, cluster) = CLUSTER_FIELDS
            .iter()
            .find_map(|f| {
                doc.and_then(|d| d.get(*f)).and_then(|c| match c {
                    Value::String(s) => Some((*f, s.clone())),
                    Value::Number(n) => Some((*f, n.to_string())),
                    _ => None,
                })
            })
            .unzip();
        // Multiple choice: filtered_resps is [[loglik, is_greedy], …] per choice.
        let loglik = v
            .get("filtered_resps")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .map(|c| c.as_array().and_then(|p| p.first()).and_then(number))
                    .collect::<Option<Vec<f64>>>()
            })
            .filter(|l| l.len() >= 2);
        let target = v
            .get("target")
            .and_then(number)
            .filter(|t| *t >= 0.0 && t.fract() == 0.0)
            .map(|t| t as usize)
            .filter(|t| loglik.as_ref().is_some_and(|l| *t < l.len()));
        docs.push(Sample {
            doc_id,
            filter,
            doc_hash: v.get("doc_hash").and_then(Value::as_str).map(String::from),
            prompt_hash: v
                .get("prompt_hash")
                .and_then(Value::as_str)
                .map(String::from),
            metrics,
            cluster,
            cluster_field,
            loglik,
            target,
        });
    }
    docs.sort_by(|a, b| (a.doc_id, &a.filter).cmp(&(b.doc_id, &b.filter)));
    Ok(Some(Samples { file, docs }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hif8lab-lm-eval-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn gzip(members: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in members {
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(m).unwrap();
            out.extend(z.finish().unwrap());
        }
        out
    }

    #[test]
    fn inputs_are_capped_before_they_are_held_and_every_gzip_member_is_read() {
        let dir = scratch("cap");
        // A small file that inflates past the bound: refused, naming the file.
        let bomb = dir.join("samples_t_x.jsonl.gz");
        std::fs::write(&bomb, gzip(&[&vec![b'{'; 1 << 20]])).unwrap();
        assert!(std::fs::metadata(&bomb).unwrap().len() < 4096);
        let e = read_capped(&bomb, true, 1 << 16).unwrap_err().to_string();
        assert!(
            e.contains("samples_t_x.jsonl.gz") && e.contains("inflated"),
            "{e}"
        );
        // A plain file past the bound, refused from its size.
        let big = dir.join("results_x.json");
        std::fs::write(&big, vec![b' '; 1 << 17]).unwrap();
        let e = read_capped(&big, false, 1 << 16).unwrap_err().to_string();
        assert!(
            e.contains("results_x.json") && e.contains("more than"),
            "{e}"
        );
        // Two gzip members: both read, in order.
        let two = dir.join("two.jsonl.gz");
        std::fs::write(&two, gzip(&[b"{\"a\":1}\n", b"{\"b\":2}\n"])).unwrap();
        assert_eq!(
            read_capped(&two, true, 1 << 16).unwrap(),
            b"{\"a\":1}\n{\"b\":2}\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_device_is_refused_not_read() {
        let dir = scratch("fifo");
        let zero = dir.join("results_zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_input(&zero, false).unwrap_err().to_string();
        assert!(
            e.contains("results_zero.json") && e.contains("not a regular file"),
            "{e}"
        );
        let fifo = dir.join("results_fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Read, it would block until a writer came: refused before it is opened.
            let e = read_input(&fifo, false).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
            let e = EvalRun::open(&fifo).unwrap_err().to_string();
            assert!(e.contains("results_fifo.json"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
