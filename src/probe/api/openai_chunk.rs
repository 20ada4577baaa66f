//! One streamed OpenAI chunk, read straight into borrowed fields instead of a JSON tree.
//!
//! A probe reads tens of thousands of these per second; building a `serde_json::Value` for each
//! (a map allocation per object, a string per field) was the largest share of the client's CPU.
//! Text borrows from the event where it has no escapes. Anything this shape does not describe
//! — and any chunk carrying an `error` — goes to the general reader instead.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Deserialize)]
pub struct Chunk<'a> {
    #[serde(default, borrow)]
    pub choices: Option<Vec<Choice<'a>>>,
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
        let chunk: Chunk = serde_json::from_str(
            r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"hi",
               "reasoning_details":[{"type":"reasoning.text","text":"a"},{"text":"b"}]},
               "finish_reason":null}],"usage":null}"#,
        )
        .unwrap();
        let choices = chunk.choices.unwrap();
        let delta = choices[0].delta.as_ref().unwrap();
        let content = delta.content.as_ref().unwrap();
        assert_eq!(content.0, "hi");
        assert!(matches!(content.0, Cow::Borrowed(_)));
        assert_eq!(delta.reasoning_details.as_ref().unwrap().0, "ab");
        assert!(chunk.usage.is_none() && chunk.error.is_none());

        let escaped: Chunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"content":"a\"b é"}}]}"#).unwrap();
        let choices = escaped.choices.unwrap();
        let text = &choices[0].delta.as_ref().unwrap().content;
        assert_eq!(text.as_ref().unwrap().0, "a\"b é");
        assert_eq!(text.as_ref().unwrap().chars(), 5);
    }
}
