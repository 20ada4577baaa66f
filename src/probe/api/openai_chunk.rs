//! One streamed OpenAI chunk, read straight into borrowed fields instead of a JSON tree.
//!
//! A probe reads tens of thousands of these per second; building a `serde_json::Value` for each
//! (a map allocation per object, a string per field) was the largest share of the client's CPU.
//! Text borrows from the event where it has no escapes, and `choices` is folded into the
//! event's meaning as each choice is read (no list per event). Anything this shape does not
//! describe — and any chunk carrying an `error` — goes to the general reader instead.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::EventMeaning;

#[derive(Debug, Deserialize)]
pub struct Chunk {
    #[serde(default)]
    pub choices: Option<Choices>,
    #[serde(default)]
    pub usage: Option<UsageBody>,
    #[serde(default)]
    pub error: Option<IgnoredAny>,
    #[serde(default)]
    pub timings: Option<TimingsBody>,
}

/// llama.cpp's per-request `timings` (milliseconds).
#[derive(Debug, Deserialize)]
pub struct TimingsBody {
    #[serde(default)]
    pub prompt_n: Option<u64>,
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    #[serde(default)]
    pub predicted_n: Option<u64>,
    #[serde(default)]
    pub predicted_ms: Option<f64>,
}

impl TimingsBody {
    pub fn seconds(&self) -> super::ServerTimings {
        super::ServerTimings {
            prompt_tokens: self.prompt_n.map(|n| n as u32),
            prefill_s: self.prompt_ms.map(|ms| ms / 1e3),
            decode_tokens: self.predicted_n.map(|n| n as u32),
            decode_s: self.predicted_ms.map(|ms| ms / 1e3),
            ..super::ServerTimings::default()
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct Choice<'a> {
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    pub message: Option<Delta<'a>>,
    #[serde(default, borrow)]
    pub text: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Delta<'a> {
    #[serde(default, borrow)]
    pub content: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub reasoning_content: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub reasoning: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub reasoning_details: Option<Text<'a>>,
    #[serde(default)]
    pub tool_calls: Option<Vec<IgnoredAny>>,
}

/// A chunk's `choices`, already folded into what they mean: generated and visible text, its
/// characters, the finish reason.
#[derive(Debug, Default)]
pub struct Choices(pub EventMeaning);

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ChoicesVisitor)
    }
}

struct ChoicesVisitor;

impl<'de> Visitor<'de> for ChoicesVisitor {
    type Value = Choices;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of choices")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut meaning = EventMeaning::default();
        while let Some(choice) = seq.next_element::<Choice<'de>>()? {
            choice.fold_into(&mut meaning);
        }
        Ok(Choices(meaning))
    }
}

impl Choice<'_> {
    /// Adds this choice's text (reasoning, then content), its characters and its finish
    /// reason to `meaning`.
    fn fold_into(&self, meaning: &mut EventMeaning) {
        let add = |text: &Option<Text>, visible: bool, meaning: &mut EventMeaning| {
            if let Some(text) = text {
                let chars = text.chars();
                if chars > 0 {
                    meaning.text.push_str(&text.0);
                    meaning.text_chars += chars;
                    meaning.generated = true;
                    meaning.visible |= visible;
                }
            }
        };
        if let Some(delta) = self.delta.as_ref().or(self.message.as_ref()) {
            let Delta {
                content,
                reasoning_content,
                reasoning,
                reasoning_details,
                tool_calls,
            } = delta;
            add(reasoning_content, false, meaning);
            add(reasoning, false, meaning);
            add(reasoning_details, false, meaning);
            add(content, true, meaning);
            meaning.generated |= tool_calls.as_ref().is_some_and(|c| !c.is_empty());
        }
        add(&self.text, true, meaning);
        if let Some(reason) = &self.finish_reason {
            meaning.finish_reason = Some(reason.to_string());
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct UsageBody {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// Text in any of the forms servers send: a string, a list of parts, or a part object with
/// `text` or `content`.
#[derive(Debug, Default, PartialEq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("text, a list of text parts, or a part with text")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text.to_string())))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Text::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut joined = String::new();
        while let Some(part) = seq.next_element::<Text<'de>>()? {
            joined.push_str(&part.0);
        }
        Ok(Text(Cow::Owned(joined)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = Text::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if (key == "text" || key == "content") && found.0.is_empty() {
                found = map.next_value::<Text<'de>>()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

impl Text<'_> {
    pub fn chars(&self) -> usize {
        self.0.chars().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_text_form_and_borrows_plain_strings() {
        let choice: Choice = serde_json::from_str(
            r#"{"index":0,"delta":{"role":"assistant","content":"hi",
               "reasoning_details":[{"type":"reasoning.text","text":"a"},{"text":"b"}]},
               "finish_reason":null}"#,
        )
        .unwrap();
        let delta = choice.delta.as_ref().unwrap();
        let content = delta.content.as_ref().unwrap();
        assert_eq!(content.0, "hi");
        assert!(matches!(content.0, Cow::Borrowed(_)));
        assert_eq!(delta.reasoning_details.as_ref().unwrap().0, "ab");

        let escaped: Choice = serde_json::from_str(r#"{"delta":{"content":"a\"b é"}}"#).unwrap();
        let text = &escaped.delta.as_ref().unwrap().content;
        assert_eq!(text.as_ref().unwrap().0, "a\"b é");
        assert_eq!(text.as_ref().unwrap().chars(), 5);
    }

    #[test]
    fn choices_fold_into_one_meaning() {
        let chunk: Chunk = serde_json::from_str(
            r#"{"id":"x","choices":[
                 {"index":0,"delta":{"role":"assistant","reasoning_content":"th","content":"hi"}},
                 {"index":1,"text":"é!","finish_reason":"length"}],"usage":null}"#,
        )
        .unwrap();
        assert!(chunk.usage.is_none() && chunk.error.is_none());
        let meaning = chunk.choices.unwrap().0;
        assert_eq!(meaning.text, "thhié!");
        assert_eq!(meaning.text_chars, 6);
        assert!(meaning.generated && meaning.visible);
        assert_eq!(meaning.finish_reason.as_deref(), Some("length"));

        let role_only: Chunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#)
                .unwrap();
        let meaning = role_only.choices.unwrap().0;
        assert!(!meaning.generated && !meaning.visible && meaning.text_chars == 0);

        let reasoning_only: Chunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#).unwrap();
        let meaning = reasoning_only.choices.unwrap().0;
        assert!(meaning.generated && !meaning.visible);
    }
}
