//! The layers are crates (crates/, doc/design.md's layout), so the compiler holds most of them:
//! a file of the engine cannot name a front end's crate, nor a front end another's, unless its
//! manifest lists it. What is checked here:
//! - the manifests, as Cargo reads them (`cargo metadata`): the engine, `handoff-core`, lists no
//!   crate of the workspace and none of the front ends' own (nvim-rs, msgpack, clap, the ACP
//!   schema); each of those belongs to one front end; no front end lists another, not even
//!   through a crate in between, and the crates they share (the ACP client, the ACP wire
//!   names, the default folders) reach none; the sandbox helper's entry lists only the engine;
//! - inside the engine's crate, what Cargo cannot see: no layer imports one above it (`agent`
//!   knows nothing of `handoff` or the `controller`), no modules import each other in a circle,
//!   and what starts a run or holds the agent's state stays the engine's (not `pub`). What a
//!   file names is read with `syn`, as Rust: every `use` tree expanded (`use a::{b, c}` names
//!   `a::b` and `a::c`) and every path of its code (`super::store::f()`), each resolved to where
//!   it points (`crate::`, `super::`, `self::`, a child module); a text scan sees only the first
//!   of a group.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The engine's sources.
fn engine_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src")
}

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

/// The engine's crate.
const ENGINE: &str = "handoff-core";
/// One crate per front end.
const FRONT_ENDS: &[&str] = &["handoff-nvim-host", "handoff-acp", "handoff-cli"];
/// Crates that belong to one front end, each with its owner.
const FRONT_END_OWN: &[(&str, &str)] = &[
    ("nvim-rs", "handoff-nvim-host"),
    ("rmpv", "handoff-nvim-host"),
    ("rmp-serde", "handoff-nvim-host"),
    ("clap", "handoff-cli"),
    ("agent-client-protocol-schema", "handoff-acp-wire"),
];
/// Crates the front ends share, over the engine: the ACP client (the Neovim host's and the
/// CLI's), the ACP wire names (the agent's and the client's), the front ends' default folders.
/// None of them may reach a front end.
const SHARED: &[&str] = &["handoff-agents", "handoff-acp-wire", "handoff-frontend-paths"];
/// The package that builds the executables (it picks the front end a command names, so it
/// lists them all) and the mock model server (never shipped): not layers.
const NOT_LAYERS: &[&str] = &["handoff-nvim", "handoff-mock"];

/// Each workspace crate and what its manifest lists (name, kind: "normal", "dev", "build"), as
/// `cargo metadata` reads them (`workspace = true` resolved).
fn manifests() -> BTreeMap<String, Vec<(String, String)>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--no-deps", "--offline", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| (d["name"].as_str().unwrap().to_string(), d["kind"].as_str().unwrap_or("normal").to_string()))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

#[test]
fn the_manifests_keep_the_layers() {
    let crates = manifests();
    for name in FRONT_ENDS.iter().chain(SHARED).chain([&ENGINE, &"handoff-sandbox"]) {
        assert!(crates.contains_key(*name), "no crate {name} in the workspace: {:?}", crates.keys());
    }
    let ours = |d: &str| crates.contains_key(d);
    // What a crate reaches through the workspace's crates, dev-dependencies left out.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_string()];
        while let Some(c) = stack.pop() {
            for (d, kind) in &crates[&c] {
                if kind != "dev" && ours(d) && seen.insert(d.clone()) {
                    stack.push(d.clone());
                }
            }
        }
        seen
    };
    let mut hits = Vec::new();
    for (krate, deps) in crates.iter().filter(|(k, _)| !NOT_LAYERS.contains(&k.as_str())) {
        for (dep, kind) in deps {
            if let Some((_, owner)) = FRONT_END_OWN.iter().find(|(d, _)| d == dep) {
                if krate != owner {
                    hits.push(format!("{krate} lists {dep} ({kind}), which belongs to {owner}"));
                }
            }
            // Dev-dependencies count too: Cargo lets a crate's tests depend on a crate above it.
            if krate == ENGINE && ours(dep) && dep != ENGINE {
                hits.push(format!("the engine lists the workspace's {dep} ({kind})"));
            }
            if krate == "handoff-sandbox" && ours(dep) && dep != ENGINE {
                hits.push(format!("the sandbox helper's entry lists {dep} ({kind}): it links the engine only"));
            }
            if FRONT_ENDS.contains(&krate.as_str()) && FRONT_ENDS.contains(&dep.as_str()) {
                hits.push(format!("the front end {krate} lists the front end {dep} ({kind})"));
            }
        }
        if SHARED.contains(&krate.as_str()) {
            for other in reach(krate).iter().filter(|d| FRONT_ENDS.contains(&d.as_str()) || NOT_LAYERS.contains(&d.as_str())) {
                hits.push(format!("{krate}, shared by the front ends, reaches {other}"));
            }
        }
        if FRONT_ENDS.contains(&krate.as_str()) {
            for other in reach(krate).iter().filter(|d| FRONT_ENDS.contains(&d.as_str()) || NOT_LAYERS.contains(&d.as_str())) {
                hits.push(format!("the front end {krate} reaches {other}"));
            }
        }
    }
    assert!(hits.is_empty(), "the crates' manifests break the layers:\n{}", hits.join("\n"));
}

/// Layers of the engine a lower one must not name, bottom up (see crates/core/src/lib.rs).
const ABOVE: &[(&str, &[&str])] = &[("agent", &["handoff", "controller"]), ("handoff", &["controller"])];

#[test]
fn no_layer_of_the_engine_imports_one_above_it() {
    let graph = Graph::read(&engine_src());
    let mut hits = Vec::new();
    for (file, module, path) in graph.named() {
        let in_engine = path.len() > 1 && path[0] == "crate";
        for (layer, above) in ABOVE {
            if module.first() == Some(&layer.to_string()) && in_engine && above.contains(&path[1].as_str()) {
                hits.push(format!("{}: `{}` above {layer}", file.display(), path.join("::")));
            }
        }
    }
    assert!(hits.is_empty(), "the engine imports upward:\n{}", hits.join("\n"));
}

/// The module of the engine a path in it names (`mcp/hub.rs` → `["mcp", "hub"]`, `mcp/mod.rs`
/// → `["mcp"]`, `lib.rs` → `[]`).
fn module_of(core: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(core).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] {
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
    /// Each file, its module (below the crate's root) and the paths it names, resolved from the
    /// crate's root (`["crate", "session", "store"]`) or an outside crate's name.
    files: Vec<(PathBuf, Vec<String>, Vec<Vec<String>>)>,
    modules: std::collections::BTreeSet<Vec<String>>,
}

impl Graph {
    fn read(core: &Path) -> Graph {
        let mut files = Vec::new();
        source_files(core, &mut files);
        files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
        assert!(files.len() > 2, "{} has only {} source files: wrong folder?", core.display(), files.len());
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

    /// The module of the engine a resolved path points into (the longest it starts with).
    fn module_named(&self, path: &[String]) -> Option<Vec<String>> {
        if path.len() < 2 || path[0] != "crate" {
            return None;
        }
        let inside = &path[1..];
        (1..=inside.len()).rev().map(|n| inside[..n].to_vec()).find(|p| self.modules.contains(p))
    }
}

/// `path` as written in `module` (of the engine), from the crate's root: `crate::…` as it is,
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
    Some(["crate".to_string()].into_iter().chain(at).chain(rest.iter().cloned()).collect())
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

/// No import circle inside a crate (the engine, and each front end): between its top modules
/// (`provider` ↔ `failure`), nor between the files of one module (`mcp`'s client, hub and tool).
/// Between crates Cargo forbids them. A module's own `mod.rs` (`lib.rs`) and its files may name
/// each other (that is what a module is); siblings may not go round. None is left in the engine:
/// the last ones (the MCP client, hub and tool; the settings, which every layer read back; the
/// provider's request types beside the model catalogue and Copilot's) were broken one by one.
/// `KNOWN` lists those still to break (`crate: a → b`): ACP's split by job left its session
/// opening, listing and methods naming each other (found when this check reached the front ends).
#[test]
fn no_import_circle_inside_a_crate() {
    use std::collections::{BTreeMap, BTreeSet};
    const KNOWN: &[&str] = &["acp: listing → server → sessions", "acp: listing → sessions", "acp: server → sessions"];
    let mut found: Vec<String> = Vec::new();
    for krate in ["core", "nvim", "acp", "cli"] {
        let graph = Graph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("crates").join(krate).join("src"));
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
        found.extend(cycles(&top).into_iter().chain(cycles(&siblings)).map(|c| format!("{krate}: {}", c.join(" → "))));
    }
    found.sort();
    let new: Vec<&String> = found.iter().filter(|c| !KNOWN.contains(&c.as_str())).collect();
    let gone: Vec<&&str> = KNOWN.iter().filter(|k| !found.iter().any(|c| c == *k)).collect();
    assert!(new.is_empty(), "import circles inside a crate:\n{}", new.iter().map(|c| c.as_str()).collect::<Vec<_>>().join("\n"));
    assert!(gone.is_empty(), "circles broken since: take them out of KNOWN: {gone:?}");
}

/// The core's sentences name no editor command (`:Handoff!`, `:HandoffModel`, …): the CLI and
/// the ACP front end print them too. A front end words its own commands (`FrontEndTexts`, or the
/// editor's Lua beside the host's words). The settings schema is the plugin's help, and exempt.
#[test]
fn the_core_s_sentences_name_no_editor_command() {
    let core = engine_src();
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
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut hits = Vec::new();
    for front_end in ["cli", "acp", "nvim"] {
        let mut files = Vec::new();
        source_files(&crates.join(front_end).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            if text.contains("McpHub::attach") || text.contains("controller::open_session") {
                hits.push(file.display().to_string());
            }
        }
    }
    assert!(hits.is_empty(), "front ends opening sessions their own way: {hits:?}");
}

/// What starts a run, switches the agent's session or holds its state is the engine's, so that
/// only the controller's lifecycle decides what runs (issue 40: "only the controller can start a
/// run"): none of it is `pub` (`AgentState` not even by name), so the compiler keeps every front
/// end (another crate) from it.
/// `Hold`, the proof a caller holds the agent, is made and handed out only inside the engine.
#[test]
fn the_prompt_api_and_agent_state_stay_inside_the_engine() {
    /// Methods of `AgentSession` a front end must not call.
    const RUN_API: &[&str] =
        &["prompt", "prompt_message", "claim_run", "run_claimed", "run_claimed_message", "switch_to", "new_session", "state"];
    let names_hold = |ty: &syn::Type| type_names(ty).iter().any(|n| n == "Hold");
    let mut seen = BTreeSet::new();
    let mut hits = Vec::new();
    let mut files = Vec::new();
    source_files(&engine_src(), &mut files);
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "rs")) {
        let parsed = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap();
        let rel = file.strip_prefix(engine_src()).unwrap().display().to_string();
        for item in &parsed.items {
            match item {
                syn::Item::Impl(imp) => {
                    let ty = type_names(&imp.self_ty).first().cloned().unwrap_or_default();
                    for f in imp.items.iter().filter_map(|i| if let syn::ImplItem::Fn(f) = i { Some(f) } else { None }) {
                        let name = f.sig.ident.to_string();
                        let public = matches!(f.vis, syn::Visibility::Public(_));
                        if ty == "AgentSession" && RUN_API.contains(&name.as_str()) {
                            seen.insert(name.clone());
                            if public {
                                hits.push(format!("{rel}: AgentSession::{name} is pub"));
                            }
                        }
                        if ty == "Hold" && public {
                            hits.push(format!("{rel}: Hold::{name} is pub (only the engine makes one)"));
                        }
                        if let syn::ReturnType::Type(_, out) = &f.sig.output {
                            if public && names_hold(out) {
                                hits.push(format!("{rel}: {ty}::{name} is pub and hands out a Hold"));
                            }
                        }
                    }
                }
                syn::Item::Struct(st) if st.ident == "AgentState" => {
                    seen.insert("AgentState".into());
                    for field in &st.fields {
                        if matches!(field.vis, syn::Visibility::Public(_)) {
                            hits.push(format!("{rel}: AgentState's field {} is pub", field.ident.as_ref().unwrap()));
                        }
                    }
                }
                // The type itself: not re-exported (`pub use`), its module not public.
                syn::Item::Use(u) if matches!(u.vis, syn::Visibility::Public(_)) => {
                    let mut leaves = Paths::default();
                    leaves.use_tree(&mut Vec::new(), &u.tree);
                    if leaves.0.iter().any(|p| p.last().is_some_and(|n| n == "AgentState")) {
                        hits.push(format!("{rel}: AgentState re-exported by a pub use"));
                    }
                }
                syn::Item::Mod(m) if rel == "agent/mod.rs" && m.ident == "state" && !matches!(m.vis, syn::Visibility::Inherited) => {
                    hits.push(format!("{rel}: the module of AgentState is not private"));
                }
                syn::Item::Struct(st) if st.ident == "Hold" => {
                    seen.insert("Hold".into());
                    if st.fields.iter().any(|f| matches!(f.vis, syn::Visibility::Public(_))) {
                        hits.push(format!("{rel}: Hold has a pub field (anyone could make one)"));
                    }
                }
                _ => {}
            }
        }
    }
    let missing: Vec<&str> =
        RUN_API.iter().copied().chain(["AgentState", "Hold"]).filter(|n| !seen.contains(*n)).collect();
    assert!(missing.is_empty(), "not found in the engine (renamed? update this test): {missing:?}");
    assert!(hits.is_empty(), "the run API reachable from outside the engine:\n{}", hits.join("\n"));
}

/// The names of the types a type is made of (`&Hold` → `["Hold"]`, `MutexGuard<'_, AgentState>`
/// → `["MutexGuard", "AgentState"]`), outermost first.
fn type_names(ty: &syn::Type) -> Vec<String> {
    #[derive(Default)]
    struct Names(Vec<String>);
    impl<'ast> syn::visit::Visit<'ast> for Names {
        fn visit_path_segment(&mut self, seg: &'ast syn::PathSegment) {
            self.0.push(seg.ident.to_string());
            syn::visit::visit_path_segment(self, seg);
        }
    }
    let mut names = Names::default();
    syn::visit::Visit::visit_type(&mut names, ty);
    names.0
}
