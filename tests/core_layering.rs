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
    ("agent_client_protocol_schema", "the ACP wire types belong to src/acp/wire.rs"),
    ("crate::acp", "the engine cannot call the ACP agent"),
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

/// The module of `src/core` a path in it names (`src/core/mcp/hub.rs` → `["mcp", "hub"]`,
/// `src/core/mcp/mod.rs` → `["mcp"]`).
fn module_of(core: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(core).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The modules of `src/core` a file's code names (`crate::core::a::b`, `super::b`), test
/// modules and comments left out, each as a path of module names.
fn named_modules(module: &[String], text: &str) -> Vec<Vec<String>> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::core::") {
            let path: Vec<String> = line[at + "crate::core::".len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default()
                .split("::")
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect();
            out.push(path);
        }
        for (at, _) in line.match_indices("super::") {
            if at > 0 && line[..at].ends_with("::") {
                continue;
            }
            // `super` of a file is its folder's module; of a mod.rs, its folder's parent (the
            // module path of a mod.rs is its folder's, so one pop serves both).
            let mut base: Vec<String> = module.to_vec();
            base.pop();
            let rest: Vec<String> = line[at + "super::".len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or_default()
                .split("::")
                .filter(|p| !p.is_empty() && *p != "super")
                .map(str::to_string)
                .collect();
            base.extend(rest);
            out.push(base);
        }
    }
    out
}

/// The cycles of a directed graph (each reported once, as the list of its nodes).
fn cycles(edges: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    use std::collections::BTreeSet;
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for start in edges.keys() {
        // Depth-first from `start`, back to it through nodes greater than it (each cycle once).
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        while let Some((node, path)) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if next == start {
                    found.insert(path.clone());
                } else if next > start && !path.contains(next) && path.len() < 8 {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    found.into_iter().collect()
}

/// No import circle inside `src/core`: between its top modules (`provider` ↔ `failure`), nor
/// between the files of one module (`mcp`'s client, hub and tool). A module's own `mod.rs` and
/// its files may name each other (that is what a module is); siblings may not go round.
/// None is left: the last ones (the MCP client, hub and tool; the settings, which every layer
/// read back; the provider's request types beside the model catalogue and Copilot's) were broken
/// one by one, and `KNOWN`, the list of those still to break, is empty for good.
#[test]
fn no_import_circle_inside_core() {
    use std::collections::{BTreeMap, BTreeSet};
    const KNOWN: &[&str] = &[];
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    source_files(&core, &mut files);
    files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&core, f)).collect();
    // Each named path cut to the longest module it starts with.
    let resolve = |path: &[String]| -> Option<Vec<String>> {
        (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p))
    };
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut siblings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&core, file);
        if from.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for named in named_modules(&from, &text) {
            let Some(to) = resolve(&named) else { continue };
            if to.is_empty() {
                continue;
            }
            if from[0] != to[0] {
                top.entry(from[0].clone()).or_default().insert(to[0].clone());
            } else {
                // Within one top module: the first level below where the two paths part, between
                // two files of the same folder (a mod.rs and its own files are one thing).
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common < from.len() && common < to.len() {
                    let parent = from[..common].join("::");
                    let a = format!("{parent}::{}", from[common]);
                    let b = format!("{parent}::{}", to[common]);
                    siblings.entry(a).or_default().insert(b);
                }
            }
        }
    }
    let mut found: Vec<String> = cycles(&top).into_iter().chain(cycles(&siblings)).map(|c| c.join(" → ")).collect();
    found.sort();
    let new: Vec<&String> = found.iter().filter(|c| !KNOWN.contains(&c.as_str())).collect();
    let gone: Vec<&&str> = KNOWN.iter().filter(|k| !found.iter().any(|c| c == *k)).collect();
    assert!(new.is_empty(), "import circles inside src/core:\n{}", new.iter().map(|c| c.as_str()).collect::<Vec<_>>().join("\n"));
    assert!(gone.is_empty(), "circles broken since: take them out of KNOWN: {gone:?}");
}

/// The core's sentences name no editor command (`:Handoff!`, `:HandoffModel`, …): the CLI and
/// the ACP front end print them too. A front end words its own commands (`FrontEndTexts`, or the
/// editor's Lua beside the host's words). The settings schema is the plugin's help, and exempt.
#[test]
fn the_core_s_sentences_name_no_editor_command() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    source_files(&core, &mut files);
    let mut found = Vec::new();
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "rs") && !f.ends_with("config/schema.rs")) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let bytes = line.as_bytes();
            let named = line.match_indices(":Handoff").any(|(i, _)| i == 0 || bytes[i - 1] != b':');
            if named {
                found.push(format!("{}:{}: {}", file.strip_prefix(&core).unwrap().display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "editor commands in the core's texts:\n{}", found.join("\n"));
}
