//! The help cannot drift from the code: every user command, `User` event and highlight group
//! the Lua defines is documented in doc/handoff.txt (and nothing documented there is gone), every
//! `|link|` there resolves to a `*tag*` (its own, or Neovim's), and every `:help` the code and the
//! README name exists. Options are checked by the settings schema's own test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn help() -> String {
    read("doc/handoff.txt")
}

/// Every `.lua` file under `rel`, with its text.
fn lua_files(rel: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "lua") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(rel), &mut out);
    out
}

/// The word of identifier characters at the start of `s`.
fn word(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// Each `after` in `text` followed by a `Handoff…` name: the names.
fn names_after(text: &str, after: &str) -> BTreeSet<String> {
    text.match_indices(after)
        .map(|(i, _)| word(&text[i + after.len()..]))
        .filter(|w| w.starts_with("Handoff"))
        .map(str::to_string)
        .collect()
}

/// Help tags (`*tag*`) and links (`|tag|`) as Vim's help syntax reads them: no blank inside;
/// a tag stands between blanks (or the line's ends).
fn tags_and_links(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut tags, mut links) = (BTreeSet::new(), BTreeSet::new());
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let delim = chars[i];
            if delim != '*' && delim != '|' {
                i += 1;
                continue;
            }
            let len = chars[i + 1..].iter().take_while(|c| **c != delim && !c.is_whitespace()).count();
            let close = i + 1 + len;
            if len == 0 || chars.get(close) != Some(&delim) {
                i += 1;
                continue;
            }
            let inner: String = chars[i + 1..close].iter().collect();
            if delim == '|' {
                links.insert(inner);
            } else if (i == 0 || chars[i - 1].is_whitespace()) && chars.get(close + 1).is_none_or(|c| c.is_whitespace()) {
                tags.insert(inner);
            }
            i = close + 1;
        }
    }
    (tags, links)
}

/// The tags of Neovim's own help (`$VIMRUNTIME/doc/tags` of the Neovim the tests run).
fn neovim_tags() -> BTreeSet<String> {
    let bin = common::nvim::nvim_bin();
    let bin = bin.canonicalize().unwrap_or(bin);
    let tags = bin.parent().unwrap().join("../share/nvim/runtime/doc/tags");
    let text = std::fs::read_to_string(&tags).unwrap_or_else(|e| panic!("{}: {e}", tags.display()));
    text.lines().filter_map(|l| l.split('\t').next()).map(str::to_string).collect()
}

/// The text of the help's section that starts at the line holding `*tag*`, to the next rule.
fn section(help: &str, tag: &str) -> String {
    let marker = format!("*{tag}*");
    let start = help.find(&marker).unwrap_or_else(|| panic!("no {marker} in doc/handoff.txt"));
    let rest = &help[start..];
    rest[..rest.find("\n=====").unwrap_or(rest.len())].to_string()
}

fn assert_same(what: &str, code: &BTreeSet<String>, code_where: &str, doc: &BTreeSet<String>, doc_where: &str) {
    let undocumented: Vec<_> = code.difference(doc).collect();
    let gone: Vec<_> = doc.difference(code).collect();
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "{what}: in {code_where} but not in {doc_where}: {undocumented:?}; in {doc_where} but not in {code_where}: {gone:?}"
    );
}

fn plugin_commands() -> BTreeSet<String> {
    let names = names_after(&read("plugin/handoff.lua"), "nvim_create_user_command(\"");
    assert!(names.len() >= 10, "commands found: {names:?}");
    names
}

#[test]
fn every_command_has_its_help_tag_and_every_command_tag_a_command() {
    let (tags, _) = tags_and_links(&help());
    let documented: BTreeSet<String> =
        tags.iter().filter_map(|t| t.strip_prefix(':')).filter(|t| t.starts_with("Handoff")).map(str::to_string).collect();
    assert_same("commands", &plugin_commands(), "plugin/handoff.lua", &documented, "doc/handoff.txt's *:Handoff…* tags");
}

#[test]
fn the_readme_names_every_command() {
    let readme = read("README.md");
    let missing: Vec<_> = plugin_commands().into_iter().filter(|c| !readme.contains(&format!(":{c}"))).collect();
    assert!(missing.is_empty(), "commands the README does not name: {missing:?}");
}

/// The `User` events the Lua fires: `events.fire("Handoff…")`, `pattern = "Handoff…"` given to
/// `nvim_exec_autocmds`, and `doautocmd User Handoff…`.
fn fired_events() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (_, text) in lua_files("lua").into_iter().chain(lua_files("plugin")) {
        let found: BTreeSet<String> = ["fire(\"", "doautocmd User ", "User Handoff"]
            .iter()
            .flat_map(|p| names_after(&text, p))
            .chain(
                text.lines()
                    .filter(|l| l.contains("nvim_exec_autocmds"))
                    .flat_map(|l| names_after(l, "pattern = \"")),
            )
            .collect();
        names.extend(found);
    }
    // The generic `pattern = name` of events.fire is not a name; "Handoff" alone is no event.
    names.remove("Handoff");
    assert!(names.len() >= 10, "events found: {names:?}");
    names
}

#[test]
fn every_user_event_is_in_the_events_section_and_nothing_else_is() {
    let events = section(&help(), "handoff-events");
    let documented: BTreeSet<String> = events
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| l.starts_with("Handoff"))
        .map(|l| word(l).to_string())
        .collect();
    assert_same("User events", &fired_events(), "lua/", &documented, "doc/handoff.txt's EVENTS section");
}

#[test]
fn the_readme_lists_every_user_event() {
    let readme = read("README.md");
    let para = &readme[readme.find("`User` autocmds").expect("the README's User autocmds list")..];
    let para = &para[..para.find("\n\n").unwrap_or(para.len())];
    let listed = names_after(para, "`");
    assert_same("User events", &fired_events(), "lua/", &listed, "the README's list");
}

#[test]
fn every_highlight_group_has_its_hl_tag_and_every_hl_tag_a_group() {
    let source = read("lua/handoff/highlights.lua");
    let table = &source[source.find("local groups = {").expect("the groups table")..];
    let table = &table[..table.find("\n}").unwrap()];
    let groups: BTreeSet<String> =
        table.lines().map(str::trim_start).filter(|l| l.starts_with("Handoff")).map(|l| word(l).to_string()).collect();
    assert!(groups.len() >= 5, "groups found: {groups:?}");
    let (tags, _) = tags_and_links(&help());
    let documented: BTreeSet<String> = tags.iter().filter_map(|t| t.strip_prefix("hl-")).map(str::to_string).collect();
    assert_same("highlight groups", &groups, "lua/handoff/highlights.lua", &documented, "doc/handoff.txt's *hl-…* tags");
}

#[test]
fn every_help_link_resolves_to_a_tag() {
    let (tags, links) = tags_and_links(&help());
    let neovim = neovim_tags();
    let broken: Vec<_> = links.iter().filter(|l| !tags.contains(*l) && !neovim.contains(*l)).collect();
    assert!(broken.is_empty(), "doc/handoff.txt links to tags that exist neither there nor in Neovim's help: {broken:?}");
    let mut seen = BTreeSet::new();
    let twice: Vec<_> = help()
        .lines()
        .flat_map(|l| tags_and_links(l).0)
        .filter(|t| !seen.insert(t.clone()))
        .collect();
    assert!(twice.is_empty(), "tags defined twice: {twice:?}");
}

/// `:help X` / `:h X` named in the Lua, the host's texts or the README is a tag of the help.
#[test]
fn every_help_topic_the_code_names_exists() {
    let (tags, _) = tags_and_links(&help());
    let mut sources: Vec<(PathBuf, String)> = lua_files("lua");
    sources.extend(lua_files("plugin"));
    sources.push((root().join("README.md"), read("README.md")));
    fn walk_rs(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk_rs(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    walk_rs(&root().join("src"), &mut sources);
    walk_rs(&root().join("crates"), &mut sources);
    let mut named = 0;
    let mut missing = Vec::new();
    for (path, text) in &sources {
        for marker in [":help ", ":h "] {
            for (i, _) in text.match_indices(marker) {
                let topic: String =
                    text[i + marker.len()..].chars().take_while(|c| !c.is_whitespace() && !"`'\")],".contains(*c)).collect();
                if topic.starts_with("handoff") {
                    named += 1;
                    if !tags.contains(&topic) && !tags.contains(&format!("{topic}.txt")) {
                        missing.push(format!("{}: :help {topic}", path.strip_prefix(root()).unwrap_or(path).display()));
                    }
                }
            }
        }
    }
    assert!(named >= 1, "no `:help handoff…` found: the scan is broken");
    assert!(missing.is_empty(), "help topics that are not tags of doc/handoff.txt: {missing:?}");
}

/// Issue 31: the help said Anthropic's thinking cap was 64k where the code gave 128k (a table
/// of model names in the wire format's code). The limits the help states are the catalogue's
/// (`provider/models`): what is assumed of a model nothing knows, and the built-in table's caps.
#[test]
fn the_model_limits_the_help_states_are_the_catalogues() {
    use handoff_nvim::core::provider::{models, Api, ModelTable};
    let flat = |text: String| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let help = help();
    let (limits, thinking) = (flat(section(&help, "handoff-models")), flat(section(&help, "handoff-thinking")));
    let window = format!(
        "else {} tokens ({} for Anthropic)",
        models::assumed_window(Api::Openai),
        models::assumed_window(Api::Anthropic)
    );
    assert!(limits.contains(&window), "the help's window defaults: wanted {window:?}");
    let assumed = models::assumed_max_output(Api::Anthropic).expect("Anthropic's assumed reply limit");
    assert_eq!(models::assumed_max_output(Api::Openai), None, "the help says none for the others");
    let reply = format!("a reply limit of {assumed} for Anthropic");
    assert!(limits.contains(&reply), "the help's reply-limit default: wanted {reply:?}");
    let table = ModelTable::new("anthropic", &Default::default(), Vec::new());
    let cap = |ids: &[&str]| {
        let caps: BTreeSet<u32> = ids.iter().map(|id| table.facts(id, None).and_then(|m| m.max_output).unwrap()).collect();
        assert_eq!(caps.len(), 1, "{ids:?} have different caps: {caps:?}");
        caps.into_iter().next().unwrap() / 1000
    };
    let said = format!(
        "the built-in table says {}k for Opus 4 and 4.1, {}k for Sonnet and Haiku 4.5; {assumed} for a model nothing knows",
        cap(&["claude-opus-4-0", "claude-opus-4-20250514", "claude-opus-4-1"]),
        cap(&["claude-sonnet-4-5", "claude-haiku-4-5"]),
    );
    assert!(thinking.contains(&said), "the thinking section's caps: wanted {said:?}");
}

/// The review's default keys (`keymaps.review.*` in the settings schema).
fn review_default_keys() -> Vec<(String, String)> {
    let schema = read("lua/handoff/schema.lua");
    let mut out = Vec::new();
    for (i, _) in schema.match_indices("key = \"keymaps.review.") {
        let rest = &schema[i + "key = \"keymaps.review.".len()..];
        let name = word(rest).to_string();
        let default = rest.split("default = \"").nth(1).and_then(|d| d.split('"').next()).unwrap().to_string();
        out.push((name, default));
    }
    out
}

/// "none shadows a built-in" (`:help handoff-hunks`): no default review key is a command of
/// Neovim's own help (`]h`, or a default mapping's `]h-default`), and a clean Neovim maps
/// nothing that one of them is, starts or extends (`mapcheck()`, Normal and Visual mode).
#[test]
fn the_review_keys_shadow_no_neovim_built_in() {
    let keys = review_default_keys();
    let names: BTreeSet<&str> = keys.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["next", "prev", "keep", "reject", "keep_all", "reject_all"]), "{keys:?}");
    let tags = neovim_tags();
    for (name, key) in &keys {
        for tag in [key.clone(), format!("{key}-default")] {
            assert!(!tags.contains(&tag), "keymaps.review.{name} = {key:?} is Neovim's own `{tag}`");
        }
    }
    let list = keys.iter().map(|(_, k)| format!("{k:?}")).collect::<Vec<_>>().join(",");
    let lua = format!(
        "local out = {{}} for _, k in ipairs({{{list}}}) do for _, m in ipairs({{'n', 'x'}}) do local c = vim.fn.mapcheck(k, m) if c ~= '' then out[#out + 1] = m .. ' ' .. k .. ' -> ' .. c end end end io.stdout:write(vim.json.encode(out))"
    );
    let out = std::process::Command::new(common::nvim::nvim_bin())
        .args(["--clean", "--headless", "-c", &format!("lua {lua}"), "-c", "qa!"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let clashes: Vec<String> = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?} {}", String::from_utf8_lossy(&out.stderr)));
    assert!(clashes.is_empty(), "default review keys that clash with a clean Neovim's mappings: {clashes:?}");
}
