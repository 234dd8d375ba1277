//! Finding heads by name: `full` is the model's own output layer; every other head is trained
//! into `MODEL_DIR/heads/NAME/` by `fastsoftmax train-head`.

use std::path::Path;

use crate::error::{Error, Result};
use crate::head::SoftmaxHead;
use crate::lm::LanguageModel;

/// Head names this engine can load, in the order `bench` reports them.
pub const KNOWN: &[&str] = &["full"];

/// Names of the heads available for the model in `model_dir`: `full` plus trained ones.
pub fn available(model_dir: &Path) -> Vec<String> {
    let mut names = vec!["full".to_string()];
    if let Ok(entries) = std::fs::read_dir(model_dir.join("heads")) {
        let mut trained: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| KNOWN.contains(&n.as_str()))
            .collect();
        trained.sort();
        names.extend(trained);
    }
    names
}

/// Loads head `name` for `lm` (whose artifact lives in `model_dir`).
pub fn load<'a>(
    name: &str,
    model_dir: &Path,
    lm: &'a LanguageModel,
) -> Result<Box<dyn SoftmaxHead + 'a>> {
    match name {
        "full" => Ok(Box::new(lm.full_head().clone())),
        other => {
            let dir = model_dir.join("heads").join(other);
            Err(Error::Invalid(format!(
                "no head named {other:?} for this model: {} {}; available: {}",
                dir.display(),
                if dir.exists() {
                    "is of a kind this engine does not know"
                } else {
                    "does not exist (train it with `fastsoftmax train-head`)"
                },
                available(model_dir).join(", ")
            )))
        }
    }
}
