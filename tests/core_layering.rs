//! `src/core` is the engine and must stay free of every front end: no Neovim RPC crates, no
//! msgpack, no command-line parser, no `use` of the front-end modules; and inside it no layer
//! imports one above it (`agent` knows nothing of `handoff` or the `controller`). A plain text
//! scan is enough, and it also catches a `use` hidden behind a `cfg`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// Names that belong to a front end, each with the reason it does not belong in the engine.
const FORBIDDEN: &[(&str, &str)] = &[
    ("nvim_rs", "the Neovim RPC crate belongs to src/nvim"),
    ("rmpv", "msgpack values belong to src/nvim"),
    ("rmp_serde", "msgpack encoding belongs to src/nvim"),
    ("clap", "command-line parsing belongs to src/cli"),
    ("crate::nvim", "the engine cannot call the Neovim host"),
    ("crate::cli", "the engine cannot call the CLI"),
    ("crate::frontend_paths", "the front ends pass the session folder in"),
];

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
            out.push(path);
        }
    }
}

#[test]
fn core_names_no_front_end() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    source_files(&core, &mut files);
    assert!(files.len() > 10, "src/core has only {} source files: wrong folder?", files.len());
    let mut hits = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (name, why) in FORBIDDEN {
                if line.contains(name) {
                    hits.push(format!("{}:{}: `{name}` ({why}): {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(hits.is_empty(), "src/core mentions front-end code:\n{}", hits.join("\n"));
}

/// Layers of `src/core` a lower one must not name, bottom up (see `src/core/mod.rs`).
const ABOVE: &[(&str, &[&str])] = &[
    ("agent", &["crate::core::handoff", "crate::core::controller", "super::handoff", "super::controller"]),
    ("handoff", &["crate::core::controller", "super::controller"]),
];

#[test]
fn no_layer_of_core_imports_one_above_it() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut hits = Vec::new();
    for (layer, forbidden) in ABOVE {
        let mut files = Vec::new();
        source_files(&core.join(layer), &mut files);
        assert!(!files.is_empty(), "src/core/{layer} has no source files");
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (n, line) in text.lines().enumerate() {
                // Doc comments may point upward (`see the controller`); code may not.
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for name in *forbidden {
                    if line.contains(name) {
                        hits.push(format!("{}:{}: `{name}` above {layer}: {}", file.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(hits.is_empty(), "a layer of src/core imports upward:\n{}", hits.join("\n"));
}
