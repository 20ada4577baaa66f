//! Measured operator timings: GEMMs, attention and all-reduce, per card system and serving
//! engine, as NVIDIA AIConfigurator collected them on real GPUs and capplan reduced them
//! (`hardware/operators/`, rebuilt by `capplan hardware import-operators`).
//!
//! The tables are compiled into the binary, and a `--hardware DIR` holding
//! `operators/<system>/<engine>.csv` replaces or adds tables one system × engine at a time.

pub mod attention_module;
pub mod convert;
pub mod expert_exchange;
pub mod grid;
pub mod linear_attention;
pub mod native_chain;
pub mod tables;
mod wide_ep;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

pub use convert::{convert_aiconfigurator, ConvertSummary, ModelShapes};
pub use tables::{MoePhase, OperatorTables};

use crate::error::InputError;

/// The shipped tables: (file, text).
const SHIPPED: [(&str, &str); 27] = [
    (
        "a100_sxm/vllm.csv",
        include_str!("../../../hardware/operators/a100_sxm/vllm.csv"),
    ),
    (
        "a100_sxm/sglang.csv",
        include_str!("../../../hardware/operators/a100_sxm/sglang.csv"),
    ),
    (
        "a100_sxm/trtllm.csv",
        include_str!("../../../hardware/operators/a100_sxm/trtllm.csv"),
    ),
    (
        "h100_sxm/vllm.csv",
        include_str!("../../../hardware/operators/h100_sxm/vllm.csv"),
    ),
    (
        "h100_sxm/sglang.csv",
        include_str!("../../../hardware/operators/h100_sxm/sglang.csv"),
    ),
    (
        "h100_sxm/trtllm.csv",
        include_str!("../../../hardware/operators/h100_sxm/trtllm.csv"),
    ),
    (
        "h200_sxm/vllm.csv",
        include_str!("../../../hardware/operators/h200_sxm/vllm.csv"),
    ),
    (
        "h200_sxm/sglang.csv",
        include_str!("../../../hardware/operators/h200_sxm/sglang.csv"),
    ),
    (
        "h200_sxm/trtllm.csv",
        include_str!("../../../hardware/operators/h200_sxm/trtllm.csv"),
    ),
    (
        "b200_sxm/vllm.csv",
        include_str!("../../../hardware/operators/b200_sxm/vllm.csv"),
    ),
    (
        "b200_sxm/sglang.csv",
        include_str!("../../../hardware/operators/b200_sxm/sglang.csv"),
    ),
    (
        "b200_sxm/trtllm.csv",
        include_str!("../../../hardware/operators/b200_sxm/trtllm.csv"),
    ),
    (
        "b300_sxm/vllm.csv",
        include_str!("../../../hardware/operators/b300_sxm/vllm.csv"),
    ),
    (
        "b300_sxm/sglang.csv",
        include_str!("../../../hardware/operators/b300_sxm/sglang.csv"),
    ),
    (
        "b300_sxm/trtllm.csv",
        include_str!("../../../hardware/operators/b300_sxm/trtllm.csv"),
    ),
    (
        "gb200/vllm.csv",
        include_str!("../../../hardware/operators/gb200/vllm.csv"),
    ),
    (
        "gb200/sglang.csv",
        include_str!("../../../hardware/operators/gb200/sglang.csv"),
    ),
    (
        "gb200/trtllm.csv",
        include_str!("../../../hardware/operators/gb200/trtllm.csv"),
    ),
    (
        "gb300/vllm.csv",
        include_str!("../../../hardware/operators/gb300/vllm.csv"),
    ),
    (
        "gb300/sglang.csv",
        include_str!("../../../hardware/operators/gb300/sglang.csv"),
    ),
    (
        "gb300/trtllm.csv",
        include_str!("../../../hardware/operators/gb300/trtllm.csv"),
    ),
    (
        "l40s/vllm.csv",
        include_str!("../../../hardware/operators/l40s/vllm.csv"),
    ),
    (
        "l40s/sglang.csv",
        include_str!("../../../hardware/operators/l40s/sglang.csv"),
    ),
    (
        "l40s/trtllm.csv",
        include_str!("../../../hardware/operators/l40s/trtllm.csv"),
    ),
    (
        "rtx_pro_6000_server/vllm.csv",
        include_str!("../../../hardware/operators/rtx_pro_6000_server/vllm.csv"),
    ),
    (
        "rtx_pro_6000_server/sglang.csv",
        include_str!("../../../hardware/operators/rtx_pro_6000_server/sglang.csv"),
    ),
    (
        "rtx_pro_6000_server/trtllm.csv",
        include_str!("../../../hardware/operators/rtx_pro_6000_server/trtllm.csv"),
    ),
];

/// Every system × engine's tables.
///
/// The shipped tables are parsed when a prediction first asks for them, not when the catalog
/// loads: 3.8 MB of text take tens of milliseconds to read, which a `solve` from capacity
/// points or a prediction on one card would pay for all 27. Tables from a `--hardware` folder
/// are parsed at once, so a malformed one is reported before anything runs.
#[derive(Debug, Clone, Default)]
pub struct OperatorLibrary {
    sets: BTreeMap<(String, String), Entry>,
}

/// One system × engine: parsed, or shipped text waiting to be.
#[derive(Debug, Clone)]
struct Entry {
    /// The built-in file (`h100_sxm/vllm.csv`) and its text, when shipped.
    shipped: Option<(&'static str, &'static str)>,
    /// Shared: every prediction's step model holds its card's tables (a few hundred KB).
    parsed: OnceLock<Option<Arc<OperatorTables>>>,
}

impl OperatorLibrary {
    /// The tables compiled into the binary, by the system and engine their file names.
    pub fn shipped() -> OperatorLibrary {
        let mut library = OperatorLibrary::default();
        for (file, text) in SHIPPED {
            let (system, engine) = shipped_key(file);
            library.sets.insert(
                (system.to_string(), engine.to_string()),
                Entry {
                    shipped: Some((file, text)),
                    parsed: OnceLock::new(),
                },
            );
        }
        library
    }

    /// The shipped tables, with `<dir>/operators/<system>/<engine>.csv` replacing or adding.
    pub fn load(hardware_dir: Option<&Path>) -> Result<OperatorLibrary, InputError> {
        let mut library = OperatorLibrary::shipped();
        let Some(dir) = hardware_dir else {
            return Ok(library);
        };
        let root = dir.join("operators");
        let Ok(systems) = std::fs::read_dir(&root) else {
            return Ok(library);
        };
        let mut files = Vec::new();
        for system in systems.filter_map(Result::ok) {
            let Ok(entries) = std::fs::read_dir(system.path()) else {
                continue;
            };
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "csv") {
                    files.push(path);
                }
            }
        }
        files.sort();
        for path in files {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(&path)
                .map_err(|err| InputError::file(&origin, format!("cannot read: {err}")))?;
            let tables = OperatorTables::parse(&text, &origin)?;
            library.sets.insert(
                (tables.system.clone(), tables.engine.clone()),
                Entry {
                    shipped: None,
                    parsed: OnceLock::from(Some(Arc::new(tables))),
                },
            );
        }
        Ok(library)
    }

    /// The tables of `system` (as a card's `operators` names it) under `engine`.
    pub fn get(&self, system: &str, engine: &str) -> Option<&Arc<OperatorTables>> {
        let entry = self.sets.get(&(system.to_string(), engine.to_string()))?;
        entry
            .parsed
            .get_or_init(|| {
                // Built-in text; `the_shipped_tables_load_and_answer` parses every file.
                let (file, text) = entry.shipped?;
                let origin = format!("hardware/operators/{file} (built in)");
                OperatorTables::parse(text, &origin).ok().map(Arc::new)
            })
            .as_ref()
    }

    /// Every (system, engine) with tables.
    pub fn systems(&self) -> Vec<(&str, &str)> {
        self.sets
            .keys()
            .map(|(s, e)| (s.as_str(), e.as_str()))
            .collect()
    }
}

/// The system and engine a shipped file's path names (`h100_sxm/vllm.csv`).
fn shipped_key(file: &'static str) -> (&'static str, &'static str) {
    let (system, name) = file.split_once('/').unwrap_or(("", file));
    (system, name.trim_end_matches(".csv"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_tables_load_and_answer() {
        let library = OperatorLibrary::shipped();
        assert_eq!(library.systems().len(), SHIPPED.len());
        // Every built-in file parses, and names the system and engine its path does.
        for (file, text) in SHIPPED {
            let parsed = OperatorTables::parse(text, file).unwrap();
            assert_eq!(
                (parsed.system.as_str(), parsed.engine.as_str()),
                shipped_key(file),
                "{file}"
            );
        }
        let h100 = library.get("h100_sxm", "vllm").unwrap();
        assert!(h100.device.contains("H100"));
        for dtype in ["bf16", "fp8"] {
            assert!(h100.gemm_dtypes().contains(&dtype), "{dtype}");
        }
        // A 4096² GEMM of 4096 tokens is 137 GFLOP: at the H100's 989 TFLOP/s dense bf16
        // peak that is 139 µs; measured kernels reach well over half of it.
        let t = h100.gemm_us("bf16", 4096.0, 4096.0, 4096.0).unwrap();
        assert!((139.0..280.0).contains(&t), "{t} µs");
        // Decode attention grows with the KV read; prefill attention with the prompt.
        let short = h100
            .generation_attention_us(128, "kv_bf16", 64.0, 1024.0)
            .unwrap();
        let long = h100
            .generation_attention_us(128, "kv_bf16", 64.0, 8192.0)
            .unwrap();
        assert!(long > 2.0 * short, "{short} → {long}");
        assert!(h100.all_reduce_us("nccl", 8, 1e6).is_some());
    }

    #[test]
    fn a_hardware_folder_adds_and_replaces_tables() {
        let scratch = crate::scratch::scratch_dir();
        let dir = scratch.path();
        let system = dir.join("operators").join("test_gpu");
        std::fs::create_dir_all(&system).unwrap();
        std::fs::write(
            system.join("vllm.csv"),
            "meta,system,test_gpu\nmeta,engine,vllm\naxis,gemm,m,1 2\naxis,gemm,n,512\naxis,gemm,k,512\ngemm,bf16,512,512,1 2\n",
        )
        .unwrap();
        let library = OperatorLibrary::load(Some(dir)).unwrap();
        assert!(library.get("test_gpu", "vllm").is_some());
        assert!(
            library.get("h100_sxm", "vllm").is_some(),
            "shipped ones stay"
        );
        std::fs::write(
            system.join("vllm.csv"),
            "meta,system,test_gpu\nbogus,line\n",
        )
        .unwrap();
        let err = OperatorLibrary::load(Some(dir)).unwrap_err().to_string();
        assert!(err.contains("vllm.csv:2"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
