//! Probe sets from files: the shipped general-knowledge set and tab-separated files of one's
//! own (`hif8lab probe --set`).

use super::probes::McItem;
use crate::rng::Rng;

/// The general-knowledge probe set shipped with hif8lab (`assets/probes/general-knowledge.tsv`:
/// 609 items over 209 clusters — countries and chemical elements), for real pretrained models.
pub const GENERAL_KNOWLEDGE: &str = include_str!("../../../../assets/probes/general-knowledge.tsv");

/// The most choices (answer and distractors) an item of a probe file may have.
pub const MAX_CHOICES: usize = 26;

/// A probe file that cannot be read: the file, and the line (1-based) and field (`-` for the
/// line as a whole) that refuse it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProbeFileError {
    /// A line is not an item.
    #[error("{source_name}:{line}: {field}: {message}")]
    Line {
        /// The file.
        source_name: String,
        /// The line, from 1.
        line: usize,
        /// `field N`, or `-` for the line.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The file holds no item.
    #[error("{source_name}: no items")]
    NoItems {
        /// The file.
        source_name: String,
    },
}

/// Multiple-choice items from a probe file: one item per line, tab-separated `cluster`,
/// `context`, `answer` and three or more distractors (`#` lines and blank lines skipped). Each
/// choice is the continuation `" " + choice`; the choices are put in a fixed pseudo-random
/// order per item (so that ties never favour the answer's position). Items of one cluster
/// share an id ([`McItem::group`]). Errors name `source`, the line and the field.
pub fn items_from_tsv(source: &str, text: &str) -> Result<Vec<McItem>, ProbeFileError> {
    let mut clusters: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let mut items = Vec::new();
    let mut rng = Rng::new(0x7E57_9B0B);
    // A byte-order mark (as some editors save UTF-8) is not part of the first field.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |field: &str, message: String| ProbeFileError::Line {
            source_name: source.to_owned(),
            line: i + 1,
            field: field.to_owned(),
            message,
        };
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < 6 {
            return Err(at(
                "-",
                format!(
                    "{} tab-separated fields; expected cluster, context, answer and at least three distractors",
                    fields.len()
                ),
            ));
        }
        for (k, f) in fields.iter().enumerate() {
            if f.trim().is_empty() {
                return Err(at(&format!("field {}", k + 1), "empty".into()));
            }
        }
        if fields.len() - 2 > MAX_CHOICES {
            return Err(at(
                "-",
                format!(
                    "{} choices (the answer and {} distractors); at most {MAX_CHOICES}",
                    fields.len() - 2,
                    fields.len() - 3
                ),
            ));
        }
        let next = clusters.len() as u32;
        let group = *clusters.entry(fields[0].to_owned()).or_insert(next);
        let mut choices: Vec<String> = fields[2..].iter().map(|c| format!(" {c}")).collect();
        if let Some(dup) = (1..choices.len()).find(|k| choices[..*k].contains(&choices[*k])) {
            return Err(at(
                &format!("field {}", dup + 3),
                format!("'{}' repeats a choice", fields[dup + 2]),
            ));
        }
        let mut answer = 0;
        for k in (1..choices.len()).rev() {
            let j = rng.below(k + 1);
            choices.swap(k, j);
            if answer == k {
                answer = j;
            } else if answer == j {
                answer = k;
            }
        }
        items.push(McItem {
            context: fields[1].to_owned(),
            choices,
            answer,
            group,
        });
    }
    if items.is_empty() {
        return Err(ProbeFileError::NoItems {
            source_name: source.to_owned(),
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_general_knowledge_set_parses_with_its_clusters_and_mixed_answer_positions() {
        let items = items_from_tsv("general-knowledge.tsv", GENERAL_KNOWLEDGE).unwrap();
        assert_eq!(items.len(), 609);
        let clusters: std::collections::BTreeSet<u32> = items.iter().map(|i| i.group).collect();
        assert_eq!(clusters.len(), 209);
        assert!(items.iter().all(|i| i.choices.len() == 4));
        let paris = items
            .iter()
            .find(|i| i.context == "The capital of France is")
            .unwrap();
        assert_eq!(paris.choices[paris.answer], " Paris");
        // The answer is not always first: ties cannot favour it.
        let mut at = [0usize; 4];
        for i in &items {
            at[i.answer] += 1;
        }
        assert!(at.iter().all(|n| *n > 100), "{at:?}");
    }

    #[test]
    fn probe_files_with_errors_are_refused_naming_line_and_field() {
        let ok = "# comment\nc1\tThe sky is\tblue\tgreen\tred\tpink\n\nc1\tGrass is\tgreen\tblue\tred\tpink\n";
        let items = items_from_tsv("p.tsv", ok).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].group, items[1].group);
        for (text, words) in [
            (
                "c\tctx\tans\td1\td2\n",
                "p.tsv:1: -: 5 tab-separated fields",
            ),
            ("c\tctx\tans\td1\t\td3\n", "p.tsv:1: field 5: empty"),
            (
                "c\tctx\tans\td1\tans\td3\n",
                "p.tsv:1: field 5: 'ans' repeats a choice",
            ),
            ("# only a comment\n", "p.tsv: no items"),
        ] {
            let e = items_from_tsv("p.tsv", text).unwrap_err().to_string();
            assert!(e.starts_with(words), "{e}");
        }
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_cluster_and_choices_are_counted_once() {
        let line = "c\tThe capital of France is\tParis\tRome\tOslo\tBern\n";
        let plain = items_from_tsv("p.tsv", &line.repeat(2)).unwrap();
        let bom = items_from_tsv("p.tsv", &format!("\u{feff}{}", line.repeat(2))).unwrap();
        assert_eq!(plain, bom);
        assert_eq!(bom[0].group, bom[1].group, "one cluster, not two");
        let many = |n: usize| {
            let distractors: Vec<String> = (0..n).map(|k| format!("d{k}")).collect();
            format!("c\tctx\tans\t{}\n", distractors.join("\t"))
        };
        assert!(items_from_tsv("p.tsv", &many(MAX_CHOICES - 1)).is_ok());
        let e = items_from_tsv("p.tsv", &many(MAX_CHOICES))
            .unwrap_err()
            .to_string();
        assert!(e.contains("27 choices") && e.contains("at most 26"), "{e}");
    }
}
