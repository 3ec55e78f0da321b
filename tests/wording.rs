//! Every refusal and outcome is worded once, in the controller (`core::controller::text`): a
//! front end shows what it is told and words only what names its own keys. A text scan of the
//! sources for the sentences that used to be written in several places.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// Fragments of user-facing refusals; each may appear in a string literal only in the controller.
const REFUSALS: &[&str] =
    &["response is in progress", "stop it first", "Queued:", "still loading", "no session open", "waiting for review"];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "lua") {
            out.push(path);
        }
    }
}

#[test]
fn refusals_are_worded_once_in_the_controller() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let owner = root.join("crates/core/src/controller/mod.rs");
    let mut all = Vec::new();
    files(&root.join("src"), &mut all);
    files(&root.join("crates"), &mut all);
    files(&root.join("lua"), &mut all);
    let mut hits = Vec::new();
    for file in all.iter().filter(|f| **f != owner) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with("--") || !line.contains('"') {
                continue;
            }
            for words in REFUSALS {
                if line.contains(words) {
                    hits.push(format!("{}:{}: {}", file.strip_prefix(root).unwrap().display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(hits.is_empty(), "refusals worded outside the controller:\n{}", hits.join("\n"));
}
