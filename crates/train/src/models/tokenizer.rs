//! Tokenizers: the byte tokenizer (id = UTF-8 byte, vocabulary 256; the presets' default) and,
//! natively, any Hugging Face `tokenizer.json` through the `tokenizers` crate (BPE and the
//! rest). The browser build has the byte tokenizer only: a `tokenizer.json` that is the byte
//! tokenizer (what `export hf` writes for byte-level runs) is recognized and used as such;
//! any other is refused there with a message.
//!
//! The byte tokenizer, written as a Hugging Face `tokenizer.json`, is a byte-level BPE without
//! merges: byte b is the token spelled by GPT-2's byte-to-character map, with id b.

use std::path::Path;

use crate::config::BYTE_TOKENIZER as BYTES;

/// A tokenizer that cannot be read or cannot encode a text: what (a file, `data.tokenizer`,
/// `tokenizer`) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct TokenizerError {
    /// The file, the setting or `tokenizer` (encoding).
    pub source_name: String,
    /// What is wrong.
    pub message: String,
}

impl TokenizerError {
    fn new(source_name: impl Into<String>, message: impl Into<String>) -> Self {
        TokenizerError {
            source_name: source_name.into(),
            message: message.into(),
        }
    }
}

/// A tokenizer.
#[derive(Clone)]
pub enum Tokenizer {
    /// UTF-8 bytes.
    Bytes,
    /// A Hugging Face `tokenizer.json` (native builds).
    #[cfg(not(target_arch = "wasm32"))]
    Hf(Box<tokenizers::Tokenizer>),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tokenizer::Bytes => f.write_str("Tokenizer::Bytes"),
            #[cfg(not(target_arch = "wasm32"))]
            Tokenizer::Hf(t) => write!(f, "Tokenizer::Hf({} tokens)", t.get_vocab_size(true)),
        }
    }
}

impl Tokenizer {
    /// The tokenizer a run's `data.tokenizer` names: `bytes`, or a `tokenizer.json` path.
    pub fn for_setting(setting: &str) -> Result<Self, TokenizerError> {
        if setting == BYTES {
            return Ok(Tokenizer::Bytes);
        }
        Self::read(Path::new(setting))
            .map(|(t, _)| t)
            .map_err(|e| TokenizerError::new("data.tokenizer", e.to_string()))
    }

    /// Reads a `tokenizer.json` file: the tokenizer and the file's text (errors name the
    /// file).
    pub fn read(path: &Path) -> Result<(Self, String), TokenizerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TokenizerError::new(path.display().to_string(), e.to_string()))?;
        let t = Self::from_json(&path.display().to_string(), &text)?;
        Ok((t, text))
    }

    /// The `data.tokenizer` value for this tokenizer read from `path`: `bytes` for the byte
    /// tokenizer, else the file's absolute path.
    pub fn setting(&self, path: &Path) -> String {
        let _ = path; // (the browser build has only the byte tokenizer)
        match self {
            Tokenizer::Bytes => BYTES.into(),
            #[cfg(not(target_arch = "wasm32"))]
            Tokenizer::Hf(_) => std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.to_owned())
                .display()
                .to_string(),
        }
    }

    /// A tokenizer from `tokenizer.json` text; `source` names it in errors.
    pub fn from_json(source: &str, text: &str) -> Result<Self, TokenizerError> {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
            return Err(TokenizerError::new(source, format!("not JSON: {e}")));
        }
        if is_byte_tokenizer(text) {
            return Ok(Tokenizer::Bytes);
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            // The tokenizers crate panics on some malformed files instead of returning an
            // error; such a panic is caught and reported like an error.
            let parsed =
                std::panic::catch_unwind(|| tokenizers::Tokenizer::from_bytes(text.as_bytes()));
            match parsed {
                Ok(Ok(t)) => Ok(Tokenizer::Hf(Box::new(t))),
                Ok(Err(e)) => Err(TokenizerError::new(
                    source,
                    format!("not a tokenizer.json the tokenizers crate reads: {e}"),
                )),
                Err(_) => Err(TokenizerError::new(
                    source,
                    "not a tokenizer.json the tokenizers crate reads (it failed on this file)",
                )),
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            Err(TokenizerError::new(
                source,
                "the browser build reads only the byte tokenizer; this model's tokenizer needs \
                 the desktop app or the command line",
            ))
        }
    }

    /// The token ids of `text` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        self.encode_with(text, false)
    }

    /// The token ids of `text`, with the tokenizer's special tokens (its post-processor: BOS
    /// where it adds one) when `add_special_tokens`, as `tokenizer(text)` does by default.
    pub fn encode_with(
        &self,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let _ = add_special_tokens; // (the byte tokenizer has no special tokens)
        match self {
            Tokenizer::Bytes => Ok(text.bytes().map(u32::from).collect()),
            #[cfg(not(target_arch = "wasm32"))]
            Tokenizer::Hf(t) => {
                let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    t.encode_fast(text, add_special_tokens)
                }));
                match encoded {
                    Ok(Ok(e)) => Ok(e.get_ids().to_vec()),
                    Ok(Err(e)) => Err(TokenizerError::new("tokenizer", e.to_string())),
                    Err(_) => Err(TokenizerError::new("tokenizer", "failed on this text")),
                }
            }
        }
    }

    /// [`Tokenizer::encode_with`] of a long text in pieces of about `piece` bytes, calling
    /// `progress(bytes done)` after each, with the same ids as one call. Pieces end at a
    /// newline between a non-space and a letter or digit (where a byte-level pre-tokenizer
    /// starts a new word whatever came before); the first two pieces are encoded joined and
    /// apart, and unless both give the same ids (a tokenizer whose pre-tokenizer looks across
    /// lines, or prefixes each text), the text is encoded in one call. The special tokens the
    /// post-processor adds (BOS) are taken from the first piece and placed around the whole.
    pub fn encode_in_pieces(
        &self,
        text: &str,
        add_special_tokens: bool,
        piece: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<u32>, TokenizerError> {
        let whole = |progress: &mut dyn FnMut(usize)| {
            let ids = self.encode_with(text, add_special_tokens)?;
            progress(text.len());
            Ok(ids)
        };
        let cuts = piece_ends(text, piece.max(1));
        if matches!(self, Tokenizer::Bytes) || cuts.len() < 3 {
            return whole(progress);
        }
        let (a, b) = (&text[..cuts[0]], &text[cuts[0]..cuts[1]]);
        let plain_a = self.encode_with(a, false)?;
        let mut apart = plain_a.clone();
        apart.extend(self.encode_with(b, false)?);
        if self.encode_with(&text[..cuts[1]], false)? != apart {
            return whole(progress);
        }
        let special_a = self.encode_with(a, add_special_tokens)?;
        let Some(at) = (0..=special_a.len().saturating_sub(plain_a.len()))
            .find(|k| special_a[*k..].starts_with(&plain_a))
        else {
            return whole(progress);
        };
        let (prefix, suffix) = (&special_a[..at], &special_a[at + plain_a.len()..]);
        let mut ids = prefix.to_vec();
        let mut start = 0;
        for end in cuts {
            ids.extend(self.encode_with(&text[start..end], false)?);
            progress(end);
            start = end;
        }
        ids.extend_from_slice(suffix);
        Ok(ids)
    }

    /// The text of `ids` (invalid UTF-8 from partial byte sequences shown as U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            Tokenizer::Bytes => {
                let bytes: Vec<u8> = ids.iter().map(|i| (*i).min(255) as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            #[cfg(not(target_arch = "wasm32"))]
            Tokenizer::Hf(t) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                t.decode(ids, false).unwrap_or_default()
            }))
            .unwrap_or_default(),
        }
    }

    /// The vocabulary size (special tokens included).
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Bytes => 256,
            #[cfg(not(target_arch = "wasm32"))]
            Tokenizer::Hf(t) => t.get_vocab_size(true),
        }
    }
}

/// Where the pieces of `text` end for [`Tokenizer::encode_in_pieces`]: at the first newline
/// after every `piece` bytes that has a non-space before it and an ASCII letter or digit
/// after it; the last piece ends at the text's end.
fn piece_ends(text: &str, piece: usize) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut ends = Vec::new();
    let mut from = piece;
    while from < bytes.len() {
        let cut = bytes[from..]
            .windows(3)
            .position(|w| {
                !w[0].is_ascii_whitespace() && w[1] == b'\n' && w[2].is_ascii_alphanumeric()
            })
            .map(|i| from + i + 2);
        match cut {
            Some(c) => {
                ends.push(c);
                from = c + piece;
            }
            None => break,
        }
    }
    ends.push(bytes.len());
    ends
}

/// GPT-2's byte → printable character map (the ByteLevel alphabet).
pub fn byte_to_char() -> [char; 256] {
    let mut out = ['\0'; 256];
    let printable = |b: u32| {
        (u32::from('!')..=u32::from('~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut next = 256u32;
    for b in 0..256u32 {
        let c = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        out[b as usize] = char::from_u32(c).unwrap_or('\u{FFFD}');
    }
    out
}

/// The byte tokenizer as a Hugging Face `tokenizer.json` (a byte-level BPE without merges,
/// in the form `transformers` saves it).
pub fn byte_tokenizer_json() -> serde_json::Value {
    let chars = byte_to_char();
    let mut vocab = serde_json::Map::new();
    for (b, c) in chars.iter().enumerate() {
        vocab.insert(c.to_string(), serde_json::json!(b));
    }
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {}
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE",
            "dropout": null,
            "unk_token": null,
            "continuing_subword_prefix": null,
            "end_of_word_suffix": null,
            "fuse_unk": false,
            "byte_fallback": false,
            "ignore_merges": false,
            "vocab": vocab,
            "merges": []
        }
    })
}

/// Whether `tokenizer.json` text is the byte tokenizer: a BPE without merges or added
/// tokens whose vocabulary is exactly the 256 byte characters with id = byte, behind a
/// ByteLevel pre-tokenizer without a prefix space, and no normalizer.
pub fn is_byte_tokenizer(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return false;
    };
    let model = &v["model"];
    let pre = &v["pre_tokenizer"];
    let chars = byte_to_char();
    let vocab_is_bytes = model["vocab"].as_object().is_some_and(|m| {
        m.len() == 256
            && chars
                .iter()
                .enumerate()
                .all(|(b, c)| m.get(&c.to_string()).and_then(|i| i.as_u64()) == Some(b as u64))
    });
    model["type"] == "BPE"
        && model["merges"].as_array().is_some_and(Vec::is_empty)
        && v["added_tokens"].as_array().is_none_or(Vec::is_empty)
        && v["normalizer"].is_null()
        && pre["type"] == "ByteLevel"
        && pre["add_prefix_space"] == false
        && vocab_is_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokenizer_json_is_recognized_and_encodes_bytes() {
        let text = byte_tokenizer_json().to_string();
        assert!(is_byte_tokenizer(&text));
        let chars = byte_to_char();
        assert_eq!(chars[b'A' as usize], 'A');
        assert_eq!(chars[0], '\u{100}');
        assert_eq!(chars[b' ' as usize], '\u{120}');
        let mut other: serde_json::Value = serde_json::from_str(&text).unwrap();
        other["model"]["vocab"]["A"] = serde_json::json!(66);
        assert!(!is_byte_tokenizer(&other.to_string()));
        let t = Tokenizer::Bytes;
        assert_eq!(t.encode("é").unwrap(), vec![0xC3, 0xA9]);
        assert_eq!(t.decode(&[0xC3, 0xA9]), "é");
    }

    /// The fixture BPE tokenizer, its JSON changed by `edit`.
    fn bpe(edit: impl FnOnce(&mut serde_json::Value)) -> Tokenizer {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/hf/bpe-tokenizer/tokenizer.json"
        );
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        edit(&mut json);
        Tokenizer::from_json("bpe", &json.to_string()).unwrap()
    }

    #[test]
    fn a_text_encoded_in_pieces_gets_the_ids_of_one_call() {
        let text: String = (0..60)
            .map(|i| format!("Line {i} of the text,\n\nwith  spaces\nand 12345 digits.\n"))
            .collect();
        let with_bos = bpe(|j| {
            j["post_processor"]["single"] = serde_json::json!([
                {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}}
            ]);
            j["post_processor"]["special_tokens"] = serde_json::json!({
                "<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]}
            });
        });
        // A pre-tokenizer that prefixes every text with a space: pieces would differ, so the
        // joined check sends the text through one call.
        let prefixing = bpe(|j| j["pre_tokenizer"]["add_prefix_space"] = true.into());
        for (t, special) in [(&with_bos, true), (&with_bos, false), (&prefixing, false)] {
            let whole = t.encode_with(&text, special).unwrap();
            let mut done = Vec::new();
            let pieces = t
                .encode_in_pieces(&text, special, 100, &mut |n| done.push(n))
                .unwrap();
            assert_eq!(pieces, whole, "special tokens {special}");
            assert_eq!(done.last(), Some(&text.len()));
            assert!(done.windows(2).all(|w| w[0] < w[1]));
        }
        assert_eq!(
            with_bos.encode_with(&text, true).unwrap()[0],
            0,
            "BOS added"
        );
        let mut calls = 0;
        with_bos
            .encode_in_pieces(&text, true, 100, &mut |_| calls += 1)
            .unwrap();
        assert!(
            calls > 10,
            "{calls} progress calls for {} bytes",
            text.len()
        );
        let mut calls = 0;
        prefixing
            .encode_in_pieces(&text, false, 100, &mut |_| calls += 1)
            .unwrap();
        assert_eq!(calls, 1, "one call when pieces disagree");
    }
}
