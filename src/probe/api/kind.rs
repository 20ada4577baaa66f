//! The API kinds `--api` names, and the [`Api`] each one builds.

use std::sync::Arc;

use super::djl::DjlJson;
use super::template::ApiTemplate;
use super::tgi::TgiGenerate;
use super::triton::{KServeInfer, TritonGenerate};
use super::{Api, OpenAiChat, OpenAiCompletions};
use crate::error::InputError;

/// What `--api` accepts.
pub struct ApiKind;

impl ApiKind {
    pub const NAMES: [&'static str; 7] = [
        "chat",
        "completions",
        "tgi",
        "triton",
        "kserve",
        "djl",
        "template",
    ];

    /// The API called `name`; `template` needs the template.
    pub fn build(name: &str, template: Option<&ApiTemplate>) -> Result<Arc<dyn Api>, InputError> {
        Ok(match name {
            "chat" => Arc::new(OpenAiChat),
            "completions" => Arc::new(OpenAiCompletions),
            "tgi" => Arc::new(TgiGenerate),
            "triton" => Arc::new(TritonGenerate),
            "kserve" => Arc::new(KServeInfer),
            "djl" => Arc::new(DjlJson),
            "template" => Arc::new(template.cloned().ok_or_else(|| {
                InputError::value("--api template needs --api-template FILE.toml")
            })?),
            other => {
                return Err(InputError::value(format!(
                    "unknown API '{other}': use one of {}",
                    Self::NAMES.join(", ")
                )))
            }
        })
    }
}
