//! Finding catalog entries by name or alias, and suggesting the nearest names on a miss.

use crate::error::InputError;

/// Anything the catalog looks up by name.
pub trait Named {
    fn name(&self) -> &str;
    fn aliases(&self) -> &[String];
}

macro_rules! named {
    ($ty:ty) => {
        impl Named for $ty {
            fn name(&self) -> &str {
                &self.name
            }
            fn aliases(&self) -> &[String] {
                &self.aliases
            }
        }
    };
}
named!(super::Card);
named!(super::Model);
named!(super::EngineProfile);

impl Named for super::Node {
    fn name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[String] {
        self.cloud_instance.as_slice()
    }
}

/// Folds the spellings people use for one thing: case, spaces, `_` and `-` do not matter.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The entry whose name or alias matches `wanted`.
pub fn find<'a, T: Named>(items: &'a [T], wanted: &str) -> Option<&'a T> {
    let key = normalize(wanted);
    items
        .iter()
        .find(|item| normalize(item.name()) == key)
        .or_else(|| {
            items
                .iter()
                .find(|item| item.aliases().iter().any(|alias| normalize(alias) == key))
        })
}

/// Like [`find`], but a miss is an [`InputError`] naming the nearest valid names.
pub fn lookup<'a, T: Named>(
    items: &'a [T],
    wanted: &str,
    kind: &'static str,
) -> Result<&'a T, InputError> {
    find(items, wanted).ok_or_else(|| InputError::UnknownName {
        kind,
        name: wanted.to_string(),
        hint: suggestion(items, wanted, kind),
    })
}

/// `" (nearest: A30, A40; see `capplan hardware list cards`)"`.
pub fn suggestion<T: Named>(items: &[T], wanted: &str, kind: &str) -> String {
    let key = normalize(wanted);
    let mut scored: Vec<(f64, &str)> = items
        .iter()
        .map(|item| {
            let best = std::iter::once(item.name())
                .chain(item.aliases().iter().map(String::as_str))
                .map(|candidate| strsim::jaro_winkler(&key, &normalize(candidate)))
                .fold(0.0, f64::max);
            (best, item.name())
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let near: Vec<&str> = scored
        .iter()
        .filter(|(score, _)| *score >= 0.7)
        .take(3)
        .map(|(_, name)| *name)
        .collect();
    let list = format!("capplan hardware list {kind}s");
    if near.is_empty() {
        format!(" (see `{list}` for the valid names)")
    } else {
        format!(" (nearest: {}; see `{list}`)", near.join(", "))
    }
}
