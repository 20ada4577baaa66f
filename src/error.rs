//! Errors that are the user's to fix.
//!
//! Everything a user typed or a file they gave us can be wrong in a way we can explain: the
//! binary turns an [`InputError`] anywhere in an error chain into exit code 2 and one message
//! that names the file, line or value and what would be valid. Any other error is a runtime
//! failure (exit code 1).

use thiserror::Error;

#[derive(Debug, Error)]
pub enum InputError {
    /// A value given on the command line (or in a scenario) that cannot be used.
    #[error("{0}")]
    Value(String),

    /// A name that is not in the catalog; `hint` lists the nearest valid names.
    #[error("unknown {kind} '{name}'{hint}")]
    UnknownName {
        kind: &'static str,
        name: String,
        hint: String,
    },

    /// A file that cannot be read or parsed; `location` is `path` or `path:line`.
    #[error("{location}: {message}")]
    File { location: String, message: String },
}

impl InputError {
    pub fn value(message: impl Into<String>) -> Self {
        InputError::Value(message.into())
    }

    pub fn file(location: impl Into<String>, message: impl Into<String>) -> Self {
        InputError::File {
            location: location.into(),
            message: message.into(),
        }
    }
}

/// True when `err` (or anything it wraps) is the user's input being wrong.
pub fn is_input_error(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|cause| cause.downcast_ref::<InputError>().is_some())
}
