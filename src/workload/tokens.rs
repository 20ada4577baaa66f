//! Counting tokens of text: with a local `tokenizer.json` (`--tokenizer`), or estimated.
//!
//! The probe prefers the server's own `usage`; a tokenizer is its second choice, and every
//! record says which one a figure came from. Generated text is never re-tokenized silently:
//! without a tokenizer the probe counts chunks and marks the figure as an estimate. Dataset
//! lengths for `predict` use the tokenizer when given, else [`estimate_tokens`].

use std::path::Path;

use crate::error::InputError;

/// A Hugging Face `tokenizer.json`, loaded once per run.
pub struct LocalTokenizer {
    inner: tokenizers::Tokenizer,
}

impl LocalTokenizer {
    pub fn load(path: &Path) -> Result<LocalTokenizer, InputError> {
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|err| {
            InputError::file(
                path.display().to_string(),
                format!("not a usable tokenizer.json ({err}); give the tokenizer.json of the served model"),
            )
        })?;
        Ok(LocalTokenizer { inner })
    }

    /// Tokens in `text`, without special tokens (a chat template adds a few the server counts
    /// in its prompt usage; generated text has none).
    pub fn count(&self, text: &str) -> Option<u32> {
        let encoding = self.inner.encode(text, false).ok()?;
        u32::try_from(encoding.len()).ok()
    }
}

/// Tokens in `text` without a tokenizer, by the usual rules of thumb of BPE vocabularies: about
/// four ASCII characters per token in English and code, about one token per character for CJK
/// and other non-ASCII scripts. Good to ±30 % on ordinary prose; `--tokenizer` is exact.
pub fn estimate_tokens(text: &str) -> u32 {
    let (ascii, other) = text.chars().fold((0u64, 0u64), |(a, o), c| {
        if c.is_ascii() {
            (a + 1, o)
        } else {
            (a, o + 1)
        }
    });
    (ascii as f64 / 4.0 + other as f64).ceil() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word-level tokenizer small enough to write by hand, in the file format real ones use.
    const WORD_LEVEL: &str = include_str!("../../tests/fixtures/word-level-tokenizer.json");

    #[test]
    fn counts_with_a_tokenizer_file_and_names_a_bad_one() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let good = dir.join("tokenizer.json");
        std::fs::write(&good, WORD_LEVEL).unwrap();
        let tokenizer = LocalTokenizer::load(&good).unwrap();
        // "hello", ",", "world", "!", "again" (unknown, still one token)
        assert_eq!(tokenizer.count("hello, world! again"), Some(5));
        assert_eq!(tokenizer.count(""), Some(0));

        let bad = dir.join("broken.json");
        std::fs::write(&bad, "{\"model\": 3}").unwrap();
        let err = LocalTokenizer::load(&bad)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("broken.json") && err.contains("tokenizer.json"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn estimates_follow_the_rules_of_thumb() {
        // 44 ASCII characters: 11 tokens.
        assert_eq!(
            estimate_tokens("The quick brown fox jumps over the lazy dog."),
            11
        );
        // Four CJK characters: four tokens.
        assert_eq!(estimate_tokens("你好世界"), 4);
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("a"), 1);
    }
}
