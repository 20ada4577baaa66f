//! Counting tokens with a local `tokenizer.json` (`--tokenizer`) when the server reports no
//! usage. The server's own count is always preferred; this is the second choice, and the record
//! says which one a figure came from. Generated text is never re-tokenized silently: without a
//! tokenizer the probe counts chunks and marks the figure as an estimate.

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A word-level tokenizer small enough to write by hand, in the file format real ones use.
    const WORD_LEVEL: &str = include_str!("../../tests/fixtures/word-level-tokenizer.json");

    #[test]
    fn counts_with_a_tokenizer_file_and_names_a_bad_one() {
        let dir = std::env::temp_dir().join(format!("capplan-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        let _ = std::fs::remove_dir_all(&dir);
    }
}
