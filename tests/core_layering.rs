//! `src/core` is the engine and must stay free of every front end: no Neovim RPC crates, no
//! msgpack, no command-line parser, no `use` of the front-end modules; and inside it no layer
//! imports one above it (`agent` knows nothing of `handoff` or the `controller`), and no modules
//! import each other in a circle. What a file names is read with `syn`, as Rust: every `use`
//! tree expanded (`use a::{b, c}` names `a::b` and `a::c`) and every path of its code
//! (`super::store::f()`), each resolved to where it points (`crate::`, `super::`, `self::`, a
//! child module); a text scan sees only the first of a group. A plain text scan still looks for
//! the front ends' crate names anywhere (a `cfg`'d line, the prompts' markdown).
#![allow(clippy::unwrap_used)]

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
const ABOVE: &[(&str, &[&str])] = &[("agent", &["handoff", "controller"]), ("handoff", &["controller"])];

/// Modules of the crate the engine must not name (the front ends), and crates it must not use.
const FRONT_ENDS: &[&str] = &["nvim", "cli", "acp", "frontend_paths"];
const FRONT_END_CRATES: &[&str] = &["nvim_rs", "rmpv", "rmp_serde", "clap", "agent_client_protocol_schema"];

#[test]
fn no_layer_of_core_imports_one_above_it_or_a_front_end() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let graph = Graph::read(&core);
    let mut hits = Vec::new();
    for (file, module, path) in graph.named() {
        let in_core = path.len() > 2 && path[0] == "crate" && path[1] == "core";
        if path.len() > 1 && path[0] == "crate" && FRONT_ENDS.contains(&path[1].as_str()) {
            hits.push(format!("{}: names the front end `{}`", file.display(), path.join("::")));
        }
        if FRONT_END_CRATES.contains(&path[0].as_str()) {
            hits.push(format!("{}: uses the front end's crate `{}`", file.display(), path.join("::")));
        }
        for (layer, above) in ABOVE {
            if module.first() == Some(&layer.to_string()) && in_core && above.contains(&path[2].as_str()) {
                hits.push(format!("{}: `{}` above {layer}", file.display(), path.join("::")));
            }
        }
    }
    assert!(hits.is_empty(), "src/core imports upward or a front end:\n{}", hits.join("\n"));
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

/// Whether an item is compiled only for the unit tests (`#[cfg(test)]`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Every path a file names, as written: each `use` tree expanded to its leaves, each path of
/// its code; items compiled only for unit tests left out.
#[derive(Default)]
struct Paths(Vec<Vec<String>>);

impl Paths {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.0.push(prefix.iter().cloned().chain([n.ident.to_string()]).collect()),
            syn::UseTree::Rename(r) => self.0.push(prefix.iter().cloned().chain([r.ident.to_string()]).collect()),
            // `use a::*` names `a` itself.
            syn::UseTree::Glob(_) => self.0.push(prefix.clone()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Paths {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if !is_test(&item.attrs) {
            self.use_tree(&mut Vec::new(), &item.tree);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_test(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.0.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }
}

/// The engine's files, what each names (resolved), and its modules.
struct Graph {
    /// Each file, its module (below `crate::core`) and the paths it names, resolved from the
    /// crate's root (`["crate", "core", "session", "store"]`) or an outside crate's name.
    files: Vec<(PathBuf, Vec<String>, Vec<Vec<String>>)>,
    modules: std::collections::BTreeSet<Vec<String>>,
}

impl Graph {
    fn read(core: &Path) -> Graph {
        let mut files = Vec::new();
        source_files(core, &mut files);
        files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
        assert!(files.len() > 10, "src/core has only {} source files: wrong folder?", files.len());
        let modules: std::collections::BTreeSet<Vec<String>> = files.iter().map(|f| module_of(core, f)).collect();
        let files = files
            .into_iter()
            .map(|file| {
                let module = module_of(core, &file);
                let text = std::fs::read_to_string(&file).unwrap();
                let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                let mut paths = Paths::default();
                syn::visit::Visit::visit_file(&mut paths, &parsed);
                let resolved = paths.0.iter().filter_map(|p| resolve(&modules, &module, p)).collect();
                (file, module, resolved)
            })
            .collect();
        Graph { files, modules }
    }

    /// Every (file, its module, a path it names).
    fn named(&self) -> impl Iterator<Item = (&Path, &Vec<String>, &Vec<String>)> {
        self.files.iter().flat_map(|(file, module, paths)| paths.iter().map(move |p| (file.as_path(), module, p)))
    }

    /// The module of `src/core` a resolved path points into (the longest it starts with).
    fn module_named(&self, path: &[String]) -> Option<Vec<String>> {
        if path.len() < 2 || path[0] != "crate" || path[1] != "core" {
            return None;
        }
        let inside = &path[2..];
        (1..=inside.len()).rev().map(|n| inside[..n].to_vec()).find(|p| self.modules.contains(p))
    }
}

/// `path` as written in `module` (of `src/core`), from the crate's root: `crate::…` as it is,
/// `super::`/`self::` from the module, a child module's name from the module; anything else
/// (an outside crate, a name in scope) as written. `None` for an empty path.
fn resolve(modules: &std::collections::BTreeSet<Vec<String>>, module: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut at: Vec<String> = module.to_vec();
    let rest = match first.as_str() {
        "crate" => return Some(path.to_vec()),
        "self" => &path[1..],
        "super" => {
            let supers = path.iter().take_while(|p| *p == "super").count();
            for _ in 0..supers {
                at.pop();
            }
            &path[supers..]
        }
        _ if modules.contains(&module.iter().chain([first]).cloned().collect::<Vec<_>>()) => path,
        _ => return Some(path.to_vec()),
    };
    Some(["crate".to_string(), "core".to_string()].into_iter().chain(at).chain(rest.iter().cloned()).collect())
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
    let graph = Graph::read(&core);
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut siblings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, from, named) in graph.named() {
        if from.is_empty() {
            continue;
        }
        let Some(to) = graph.module_named(named) else { continue };
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

/// Every front end opens its session the one way, `controller::open_for` (the settings, the
/// instruction folder, the MCP servers, the session): none attaches MCP servers itself.
#[test]
fn front_ends_open_sessions_only_through_open_for() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut hits = Vec::new();
    for front_end in ["cli", "acp", "nvim"] {
        let mut files = Vec::new();
        source_files(&src.join(front_end), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains("McpHub::attach") || text.contains("controller::open_session") {
                hits.push(file.display().to_string());
            }
        }
    }
    assert!(hits.is_empty(), "front ends opening sessions their own way: {hits:?}");
}
