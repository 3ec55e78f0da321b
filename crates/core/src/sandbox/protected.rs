//! What no tool reaches silently, sandbox or not: the project's files that make *other*
//! programs run code (git hooks and config, the editor's project-local config, MCP server
//! lists), the user's credentials, and anything whose real location is outside the project.
//!
//! One owner for these lists: the sandbox helper makes them read-only (or hides them) for
//! commands, and the host tools (`read`, `edit`, `write`) ask before touching them under every
//! policy. See `:help handoff-sandbox`.

use std::path::{Component, Path, PathBuf};

use super::paths::{home, real_path};

/// Paths relative to the project root that other programs run code from, with why. Read-only
/// to sandboxed commands (where they exist; see [`PLANTED_CODE_NAMES`] for host tools). The
/// git folders are not listed: commands see them through an allowlist (`sandbox::git`).
pub const PLANTED_CODE: [(&str, &str); 5] = [
    (".gitmodules", "git submodule commands follow it"),
    (".mcp.json", "MCP clients start the servers it lists"),
    (".nvim.lua", "Neovim runs it ('exrc')"),
    (".exrc", "Neovim and Vim run it ('exrc')"),
    (".lazy.lua", "lazy.nvim runs it"),
];

/// File names that run code wherever they are in the project, for the host tools (Neovim's
/// 'exrc' also looks in parent folders; `.nvimrc` is its other name).
const PLANTED_CODE_NAMES: [(&str, &str); 6] = [
    (".gitmodules", "git submodule commands follow it"),
    (".mcp.json", "MCP clients start the servers it lists"),
    (".nvim.lua", "Neovim runs it ('exrc')"),
    (".nvimrc", "Neovim runs it ('exrc')"),
    (".exrc", "Neovim and Vim run it ('exrc')"),
    (".lazy.lua", "lazy.nvim runs it"),
];

/// Credential folders and files under the home folder (`~/…`). Hidden from sandboxed commands;
/// `read` asks for them under every policy.
pub const CREDENTIALS_IN_HOME: [&str; 25] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    ".pi/agent/auth.json",
    // pi's custom providers, with their `apiKey` values.
    ".pi/agent/models.json",
    // Other coding agents' logins.
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    // git's `credential.helper store` reads `~/.git-credentials` and then
    // `$XDG_CONFIG_HOME/git/credentials` (`~/.config/git/credentials` when it is not set).
    ".config/git/credentials",
    ".config/gh",
    ".config/github-copilot",
    ".config/gcloud",
    ".config/hub",
    ".config/op",
];

/// Credential folders and files under `$XDG_CONFIG_HOME` when it is not `~/.config`.
const CREDENTIALS_IN_CONFIG: [&str; 6] = ["gh", "github-copilot", "gcloud", "hub", "op", "git/credentials"];

/// Credential files in folders a variable moves (each tool's own variable, as it reads it):
/// the variable, and the files in the folder it names.
const CREDENTIALS_IN_MOVED_FOLDERS: [(&str, &[&str]); 2] =
    [("CODEX_HOME", &["auth.json"]), ("CLAUDE_CONFIG_DIR", &[".credentials.json"])];

/// Files the user's own provider settings name as holding a key (an `api_key_cmd` that reads
/// one: `cat ~/.config/llm/key`), added as the settings are read ([`remember_credential_files`]).
/// Only ever grows: once named a key file, a file stays protected for the process.
static NAMED_CREDENTIAL_FILES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Protects these files as credentials from now on (see [`NAMED_CREDENTIAL_FILES`]): hidden from
/// sandboxed commands, `read` asks. Only absolute paths are kept.
pub fn remember_credential_files(files: impl IntoIterator<Item = PathBuf>) {
    let mut named = crate::sync::lock(&NAMED_CREDENTIAL_FILES);
    for file in files.into_iter().filter(|f| f.is_absolute()) {
        if !named.contains(&file) {
            named.push(file);
        }
    }
}


/// Every credential location of this user, as absolute paths (existing or not): the home
/// folder's ([`CREDENTIALS_IN_HOME`]), `$XDG_CONFIG_HOME`'s, those of folders a variable moves
/// (pi's `$PI_CODING_AGENT_DIR`, `$CODEX_HOME`, `$CLAUDE_CONFIG_DIR`), and the files the
/// provider settings name ([`remember_credential_files`]).
pub fn credential_paths() -> Vec<PathBuf> {
    let env = |var: &str| std::env::var(var).ok();
    let mut out = credential_paths_for(home().as_deref(), std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).as_deref(), &env);
    for file in crate::sync::lock(&NAMED_CREDENTIAL_FILES).iter() {
        if !out.contains(file) {
            out.push(file.clone());
        }
    }
    out
}

fn credential_paths_for(home: Option<&Path>, xdg_config: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match home {
        Some(home) => CREDENTIALS_IN_HOME.iter().map(|p| home.join(p)).collect(),
        None => Vec::new(),
    };
    let mut add = |path: PathBuf| {
        if path.is_absolute() && !out.contains(&path) {
            out.push(path);
        }
    };
    if let Some(config) = xdg_config {
        for name in CREDENTIALS_IN_CONFIG {
            add(config.join(name));
        }
    }
    // pi's folder as pi finds it.
    let pi_env = |var: &str| match (var, home) {
        ("HOME", Some(home)) => Some(home.to_string_lossy().into_owned()),
        ("HOME", None) => None,
        _ => env(var),
    };
    if let Some(pi) = crate::session::paths::pi_agent_dir(&pi_env) {
        add(pi.join("auth.json"));
        add(pi.join("models.json"));
    }
    for (var, files) in CREDENTIALS_IN_MOVED_FOLDERS {
        if let Some(dir) = env(var).filter(|d| !d.trim().is_empty()) {
            for file in files {
                add(Path::new(&dir).join(file));
            }
        }
    }
    out
}

/// Why a host tool must ask before touching a path, whatever the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protected {
    /// Its real location is outside the project (shown: it may differ from the path asked).
    Outside { real: PathBuf },
    /// Inside the project, a file other programs run code from (the reason says which).
    PlantedCode { real: PathBuf, why: &'static str },
    /// One of the user's credential files or folders.
    Credential { real: PathBuf },
    /// A write in the `read-only` sandbox, where commands cannot write the project either.
    ReadOnlySandbox { real: PathBuf },
    /// A file with other hard links (`links` in all): writing it changes the file every link
    /// shares, wherever they are (`others`: those found in the project; the rest are elsewhere,
    /// such as uv's or pnpm's cache; `partial`: the project was too big to be indexed whole).
    HardLinked { real: PathBuf, links: u64, others: Vec<PathBuf>, partial: bool },
}

impl Protected {
    /// Where the call really lands.
    pub fn real(&self) -> &Path {
        match self {
            Protected::Outside { real }
            | Protected::PlantedCode { real, .. }
            | Protected::Credential { real }
            | Protected::ReadOnlySandbox { real }
            | Protected::HardLinked { real, .. } => real,
        }
    }

    /// One sentence for the approval and for a refusal: what and why.
    pub fn describe(&self) -> String {
        match self {
            Protected::Outside { real } => format!("{} is outside the project", real.display()),
            Protected::PlantedCode { real, why } => format!("{} runs code outside the sandbox: {why}", real.display()),
            Protected::Credential { real } => format!("{} holds credentials", real.display()),
            Protected::ReadOnlySandbox { real } => {
                format!("{}: the sandbox is read-only (commands cannot write there either)", real.display())
            }
            Protected::HardLinked { real, links, others, partial } => {
                let named: Vec<String> = others.iter().map(|p| p.display().to_string()).collect();
                let elsewhere = links.saturating_sub(1 + others.len() as u64);
                format!(
                    "{} has {links} hard links: writing it changes the same file under its other names ({})",
                    real.display(),
                    super::links::where_the_others_are(&named, elsewhere, *partial)
                )
            }
        }
    }
}

/// What the project folder is for these checks: its real location.
pub fn real_project(project: &Path) -> PathBuf {
    real_path(project)
}

/// Whether a host tool that *reads* `path` (absolute) must ask first: a credential location
/// (reading elsewhere is what a sandboxed command may do too).
pub fn check_read(path: &Path) -> Option<Protected> {
    read_protection(real_path(path))
}

/// Whether a host tool that *writes* `path` (absolute) in a session whose project is `project`
/// must ask first: outside the project (real locations compared), a credential, or code other
/// programs run.
pub fn check_write(path: &Path, project: &Path) -> Option<Protected> {
    write_protection(real_path(path), project)
}

/// [`check_read`] of a path already made real ([`real_path`]): a caller that acts on `real`
/// afterwards checks exactly what it acts on (resolving twice could see a link swapped in
/// between).
pub fn read_protection(real: PathBuf) -> Option<Protected> {
    is_credential(&real).then_some(Protected::Credential { real })
}

/// [`check_write`] of a path already made real ([`real_path`]), as [`read_protection`].
pub fn write_protection(real: PathBuf, project: &Path) -> Option<Protected> {
    if is_credential(&real) {
        return Some(Protected::Credential { real });
    }
    let project = real_project(project);
    let Ok(inside) = real.strip_prefix(&project) else { return Some(Protected::Outside { real }) };
    if let Some(why) = planted_code_reason(inside) {
        return Some(Protected::PlantedCode { real, why });
    }
    let git = super::git::layout(&project);
    if git.planted.iter().map(|(p, _)| p).chain(&git.pointers).chain(&git.absent).any(|p| real.starts_with(p)) {
        let why = "git runs code from it (its settings name it: the hooks folder, an included config file, a script a setting or a hook runs, a .git pointer)";
        return Some(Protected::PlantedCode { real, why });
    }
    hard_linked(real, &project)
}

/// [`Protected::HardLinked`] when `real` is a regular file with more than one link; its other
/// names are looked for in `project`'s index of linked files (`links`).
fn hard_linked(real: PathBuf, project: &Path) -> Option<Protected> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(&real).ok().filter(|m| m.is_file() && m.nlink() > 1)?;
    let (others, partial) = super::links::other_links(project, &real, meta.dev(), meta.ino());
    Some(Protected::HardLinked { links: meta.nlink(), others, partial, real })
}

/// Why `relative` (a path inside the project) runs code elsewhere: anything in a `.git` folder
/// (or the `.git` file of a worktree), or one of [`PLANTED_CODE_NAMES`] at any depth.
pub fn planted_code_reason(relative: &Path) -> Option<&'static str> {
    let mut parts = relative.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name),
        _ => None,
    });
    if parts.any(|p| p == ".git") {
        return Some("git reads what is in .git (hooks and config run commands)");
    }
    let name = relative.file_name()?;
    PLANTED_CODE_NAMES.iter().find(|(n, _)| name == *n).map(|(_, why)| *why)
}

/// Whether `real` (a real path) is one of the credential locations or inside one.
pub fn is_credential(real: &Path) -> bool {
    in_credentials(real, &credential_locations())
}

/// Every credential location as named ([`credential_paths`]) and where it really is, for a
/// check made many times (a walk over a folder) without resolving them each time.
pub fn credential_locations() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for named in credential_paths() {
        let real = real_path(&named);
        if real != named {
            out.push(real);
        }
        out.push(named);
    }
    out
}

/// Whether `path` is one of `locations` ([`credential_locations`]) or inside one.
pub fn in_credentials(path: &Path, locations: &[PathBuf]) -> bool {
    locations.iter().any(|c| path.starts_with(c))
}

/// What a sandboxed command's mount namespace changes, worked out by the host for one command
/// (the helper only carries it out): each list holds real, existing paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxMounts {
    /// Git folders the command sees through an overlay: (the real folder, the view's state
    /// folder with its `upper/` and `work/`), see `sandbox::git`. A mount point cannot be
    /// renamed or removed, so each stays the folder git reads (no `mv .git x && mkdir .git`).
    pub git_views: Vec<(PathBuf, PathBuf)>,
    /// Read-only inside a writable folder: the project's planted-code paths, the files of the
    /// tree git runs code from and its `.git` pointer files.
    pub read_only: Vec<PathBuf>,
    /// Hidden: an empty read-only folder over a credential folder, `/dev/null` over a file or
    /// socket (credentials, the editor's RPC socket).
    pub hidden: Vec<PathBuf>,
}

impl SandboxMounts {
    pub fn is_empty(&self) -> bool {
        self.git_views.is_empty() && self.read_only.is_empty() && self.hidden.is_empty()
    }
}

/// Variables that name the editor's RPC socket (Neovim sets `NVIM` for its jobs).
pub const EDITOR_SOCKET_VARS: [&str; 2] = ["NVIM", "NVIM_LISTEN_ADDRESS"];

/// The mounts for a command run in `project`; `git`: git's answer for it
/// (`sandbox::git::layout`), `Some` when the project is writable (`workspace-write`), which the
/// caller has asked once for the command. Only what exists is listed. The git views are the
/// caller's to add (each command gets its own, `sandbox::git::views_for`).
pub fn sandbox_mounts(project: &Path, git: Option<&super::git::GitLayout>) -> SandboxMounts {
    let mut mounts = SandboxMounts::default();
    let project = real_path(project);
    if let Some(git) = git {
        for (relative, _) in PLANTED_CODE {
            push_existing(&mut mounts.read_only, &project.join(relative));
        }
        for path in git.planted.iter().map(|(p, _)| p).chain(&git.pointers) {
            push_existing(&mut mounts.read_only, path);
        }
        // The answers the next process trusts (`kept`), where the project holds their folder
        // (a session in the home folder): made now, so that it is there to be read-only.
        if let Some(kept) = super::kept::dir().map(|d| real_path(&d)).filter(|d| d.starts_with(&project)) {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&kept);
            push_existing(&mut mounts.read_only, &kept);
        }
    }
    for credential in credential_paths() {
        push_existing(&mut mounts.hidden, &credential);
    }
    for var in EDITOR_SOCKET_VARS {
        if let Some(socket) = std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute()) {
            push_existing(&mut mounts.hidden, &socket);
        }
    }
    mounts
}

/// The planted-code paths ([`PLANTED_CODE`]) that do not exist in `project`: a sandboxed
/// command can create one (nothing is there to mount over), which [`created_planted_code`]
/// then reports.
pub fn absent_planted_code(project: &Path) -> Vec<&'static str> {
    PLANTED_CODE.iter().map(|(p, _)| *p).filter(|p| std::fs::symlink_metadata(project.join(p)).is_err()).collect()
}

/// Which of `absent` (from [`absent_planted_code`]) now exist in `project`, with why each
/// matters: one sentence for the command's result, or `None`.
pub fn created_planted_code(project: &Path, absent: &[&'static str]) -> Option<String> {
    let created: Vec<String> = PLANTED_CODE
        .iter()
        .filter(|(p, _)| absent.contains(p) && std::fs::symlink_metadata(project.join(p)).is_ok())
        .map(|(p, why)| format!("{p} ({why})"))
        .collect();
    (!created.is_empty()).then(|| {
        format!(
            "This command created {}: the sandbox cannot make a file read-only before it exists, so programs outside it may run what it holds; the user should review it.",
            created.join(", ")
        )
    })
}

/// Adds `path`'s real location if something is there and it is not listed yet.
fn push_existing(list: &mut Vec<PathBuf>, path: &Path) {
    if std::fs::symlink_metadata(path).is_err() {
        return;
    }
    let real = real_path(path);
    if real.exists() && !list.contains(&real) {
        list.push(real);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_path_follows_links_and_appends_what_does_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let project = root.join("p");
        let outside = root.join("outside");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, project.join("link")).unwrap();
        assert_eq!(real_path(&project.join("link/new/file")), outside.join("new/file"));
        assert_eq!(real_path(&project.join("a/../b")), project.join("b"));
        // `..` after a link is taken from where the link lands, as the kernel does.
        assert_eq!(real_path(&project.join("link/../x")), root.join("x"));
        // A dangling link: the write would create its target.
        std::os::unix::fs::symlink(outside.join("target.txt"), project.join("dangling")).unwrap();
        assert_eq!(real_path(&project.join("dangling")), outside.join("target.txt"));
        assert_eq!(check_write(&project.join("link/f"), &project), Some(Protected::Outside { real: outside.join("f") }));
        assert_eq!(check_write(&project.join("src/f.rs"), &project), None);
    }

    #[test]
    fn planted_code_is_anything_in_git_and_the_editor_and_mcp_files() {
        assert!(planted_code_reason(Path::new(".git/hooks/pre-commit")).is_some());
        assert!(planted_code_reason(Path::new(".git/config")).is_some());
        assert!(planted_code_reason(Path::new("sub/.git/config")).is_some());
        assert!(planted_code_reason(Path::new(".nvim.lua")).is_some());
        assert!(planted_code_reason(Path::new("deep/dir/.exrc")).is_some());
        assert!(planted_code_reason(Path::new(".mcp.json")).is_some());
        assert!(planted_code_reason(Path::new("src/main.rs")).is_none());
        assert!(planted_code_reason(Path::new(".github/workflows/ci.yml")).is_none());
        assert!(planted_code_reason(Path::new(".gitignore")).is_none());
    }

    #[test]
    fn protections_of_a_real_path_are_those_of_the_checks() {
        let dir = tempfile::tempdir().unwrap();
        let project = std::fs::canonicalize(dir.path()).unwrap();
        let hook = project.join(".git/hooks/pre-commit");
        assert!(matches!(write_protection(hook.clone(), &project), Some(Protected::PlantedCode { .. })));
        assert_eq!(write_protection(hook.clone(), &project), check_write(&hook, &project));
        assert_eq!(write_protection(project.join("src/a.rs"), &project), None);
        assert_eq!(read_protection(project.join("src/a.rs")), None);
        let locations = [PathBuf::from("/home/u/.ssh"), PathBuf::from("/data/u/.ssh")];
        assert!(in_credentials(Path::new("/data/u/.ssh/id_ed25519"), &locations));
        assert!(in_credentials(Path::new("/home/u/.ssh"), &locations));
        assert!(!in_credentials(Path::new("/home/u/.sshx/key"), &locations), "components, not text");
    }

    #[test]
    fn credentials_are_found_in_home_and_in_the_config_folder() {
        let none = |_: &str| None;
        let paths = credential_paths_for(Some(Path::new("/home/u")), Some(Path::new("/cfg")), &none);
        for p in ["/home/u/.ssh", "/home/u/.pi/agent/auth.json", "/home/u/.pi/agent/models.json", "/home/u/.config/git/credentials"] {
            assert!(paths.contains(&PathBuf::from(p)), "{p}");
        }
        for p in ["/home/u/.claude/.credentials.json", "/home/u/.codex/auth.json", "/home/u/.gemini/oauth_creds.json"] {
            assert!(paths.contains(&PathBuf::from(p)), "{p}");
        }
        assert!(paths.contains(&PathBuf::from("/cfg/github-copilot")));
        assert!(paths.contains(&PathBuf::from("/cfg/git/credentials")));
        assert!(credential_paths_for(None, Some(Path::new("relative")), &none).is_empty());
        let moved = |var: &str| match var {
            "PI_CODING_AGENT_DIR" => Some("/pi".to_string()),
            "CODEX_HOME" => Some("/codex".to_string()),
            "CLAUDE_CONFIG_DIR" => Some("/claude".to_string()),
            _ => None,
        };
        let paths = credential_paths_for(Some(Path::new("/home/u")), None, &moved);
        for p in ["/pi/auth.json", "/pi/models.json", "/codex/auth.json", "/claude/.credentials.json"] {
            assert!(paths.contains(&PathBuf::from(p)), "{p}: {paths:?}");
        }
    }

    #[test]
    fn the_mounts_make_planted_code_and_what_git_names_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let project = std::fs::canonicalize(dir.path()).unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git").args(args).current_dir(&project).env("HOME", &project).status().unwrap().success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["config", "core.hooksPath", ".husky/_"]);
        std::fs::create_dir_all(project.join(".husky/_")).unwrap();
        std::fs::write(project.join(".nvim.lua"), "").unwrap();
        let m = sandbox_mounts(&project, Some(&super::super::git::layout(&project)));
        assert!(m.git_views.is_empty(), "each command adds its own");
        for p in [".nvim.lua", ".husky/_"] {
            assert!(m.read_only.contains(&project.join(p)), "{p}: {m:?}");
        }
        assert!(!m.read_only.contains(&project.join(".mcp.json")), "only what exists");
        assert_eq!(absent_planted_code(&project), [".gitmodules", ".mcp.json", ".exrc", ".lazy.lua"]);
        let absent = absent_planted_code(&project);
        assert_eq!(created_planted_code(&project, &absent), None);
        std::fs::write(project.join(".exrc"), "").unwrap();
        assert!(created_planted_code(&project, &absent).unwrap().contains(".exrc (Neovim and Vim run it ('exrc'))"));
        let ro = sandbox_mounts(&project, None);
        assert!(ro.read_only.is_empty(), "a read-only project needs no holes");
    }
}
