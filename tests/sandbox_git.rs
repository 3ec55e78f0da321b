//! Git in the sandbox, round two (`:help handoff-sandbox`): commands change git's *data* and
//! nothing else, in every git folder the project's git resolves to — the main one, a linked
//! worktree's, submodules at any depth — and never a file of the tree git runs code from
//! (`core.hooksPath`, included config, a hook's link target) or a `.git` pointer file. Each
//! way out is tried as a prompt injection would, through the real CLI with `--yes`, and then
//! the user's own git runs outside (as gitsigns does); each has its control under `--sandbox
//! off`. Then what must keep working, in one repository with a submodule and a linked worktree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::machine::{enforced, git, machine, marker_script, prompt_command, turn, turn_calls, turn_in, Machine, OFF};
use serde_json::json;

/// `git status` as the user's editor runs it, then whether `marker` appeared.
fn status_runs(dir: &Path, marker: &Path) -> bool {
    let _ = std::fs::remove_file(marker);
    git(dir, &["status", "--short"]);
    marker.exists()
}

/// A commondir that sends git to a common folder of the command's making: objects and refs
/// linked back, so git looks normal, and a config whose fsmonitor runs the marker.
fn commondir_attack(gitdir: &str, evil: &Path, marker: &Path) -> String {
    format!(
        "mkdir -p {evil} && cp -r {gitdir}/objects {gitdir}/refs {gitdir}/HEAD {evil}/ 2>/dev/null; printf '{script}' > {evil}/mon.sh && chmod +x {evil}/mon.sh && printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = {evil}/mon.sh\\n' > {evil}/config && echo {evil} > {gitdir}/commondir; echo planted",
        evil = evil.display(),
        script = marker_script(marker).replace('\n', "\\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commondir_cannot_be_planted_in_the_main_repository() {
    if !enforced("a_commondir_cannot_be_planted_in_the_main_repository") {
        return;
    }
    let m = machine();
    let marker = m.outside.join("fsmonitor-ran");
    let attack = commondir_attack(".git", &m.project.join("evil"), &marker);
    let (results, _) = turn(&m, &[&attack], &[], &[]).await;
    assert!(!m.project.join(".git/commondir").exists(), "{results:?}");
    assert!(results[0].contains(".git/commondir"), "the refusal is said: {results:?}");
    assert!(!status_runs(&m.project, &marker), "git ran a planted fsmonitor: {results:?}");
    let (results, _) = turn(&m, &[&attack], OFF, &[]).await;
    assert!(status_runs(&m.project, &marker), "the control's fsmonitor did not run: {results:?}");
}

/// A repository `lib` with one commit, made outside the project, added as a submodule at `at`
/// (relative to the project) by the user's git, outside the sandbox.
fn add_module(m: &Machine, at: &str) {
    let lib = m.outside.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q"]);
    std::fs::write(lib.join("lib.txt"), "lib\n").unwrap();
    git(&lib, &["add", "."]);
    git(&lib, &["commit", "-q", "-m", "lib"]);
    let out = git(&m.project, &["submodule", "add", "-q", lib.to_str().unwrap(), at]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A repository with a submodule two folders deep (`vendor/lib`) and a linked worktree
/// (`wt`, inside the project), made by the user outside the sandbox.
fn repository_with_module_and_worktree(m: &Machine) {
    add_module(m, "vendor/lib");
    git(&m.project, &["commit", "-q", "-m", "submodule"]);
    std::fs::write(m.project.join(".git/info/exclude"), "wt/\n").unwrap();
    let out = git(&m.project, &["worktree", "add", "-q", "wt", "-b", "wt-branch"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(m.project.join(".git/modules/vendor/lib/HEAD").exists());
    assert!(m.project.join(".git/worktrees/wt/commondir").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_folders_of_worktrees_and_modules_take_only_data() {
    if !enforced("git_folders_of_worktrees_and_modules_take_only_data") {
        return;
    }
    let m = machine();
    repository_with_module_and_worktree(&m);
    let marker = m.outside.join("ran");
    let worktree = commondir_attack(".git/worktrees/wt", &m.project.join("evil1"), &marker);
    let module = commondir_attack(".git/modules/vendor/lib", &m.project.join("evil2"), &marker);
    let script = marker_script(&marker).replace('\n', "\\n");
    let config_worktree = format!(
        "git config extensions.worktreeConfig true; printf '[core]\\n\\tfsmonitor = {0}/mon.sh\\n' > .git/config.worktree; printf '{script}' > {0}/mon.sh; chmod +x {0}/mon.sh; echo ok",
        m.project.display()
    );
    let module_config = format!("printf '[core]\\n\\tfsmonitor = {}/mon.sh\\n' >> .git/modules/vendor/lib/config; echo ok", m.project.display());
    let commands = [worktree.as_str(), module.as_str(), config_worktree.as_str(), module_config.as_str()];
    let (results, _) = turn(&m, &commands, &[], &[]).await;
    for (dir, name) in [(m.project.join("wt"), "worktree"), (m.project.join("vendor/lib"), "module"), (m.project.clone(), "main")] {
        assert!(!status_runs(&dir, &marker), "{name}: git ran planted code: {results:?}");
    }
    assert!(m.project.join(".git/worktrees/wt/commondir").read_link().is_err());
    assert_eq!(std::fs::read_to_string(m.project.join(".git/worktrees/wt/commondir")).unwrap().trim(), "../..");
    assert!(!m.project.join(".git/config.worktree").exists(), "{results:?}");
    for (i, what) in [".git/worktrees/wt/commondir", ".git/modules/vendor/lib/commondir", ".git/config.worktree", ".git/modules/vendor/lib/config"].iter().enumerate() {
        assert!(results[i].contains(what), "{what} is named as refused: {}", results[i]);
    }
    // The control: the same from outside the sandbox reaches.
    let (results, _) = turn(&m, &[&module], OFF, &[]).await;
    assert!(status_runs(&m.project.join("vendor/lib"), &marker), "the control's module fsmonitor did not run: {results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pointer_files_are_read_only_and_new_ones_are_reported() {
    if !enforced("pointer_files_are_read_only_and_new_ones_are_reported") {
        return;
    }
    let m = machine();
    repository_with_module_and_worktree(&m);
    let evil = m.project.join("evil");
    let rewrite = format!("mkdir -p {0} && cp -r .git/modules/vendor/lib/. {0}/ && echo 'gitdir: {0}' > vendor/lib/.git; echo 'gitdir: {0}' > wt/.git; cat vendor/lib/.git wt/.git", evil.display());
    let fresh = "mkdir -p tools/inner && git init -q tools/inner && echo made";
    let (results, _) = turn(&m, &[&rewrite, fresh], &[], &[]).await;
    assert!(std::fs::read_to_string(m.project.join("vendor/lib/.git")).unwrap().contains("modules/vendor/lib"), "{results:?}");
    assert!(std::fs::read_to_string(m.project.join("wt/.git")).unwrap().contains("worktrees/wt"), "{results:?}");
    assert!(results[0].contains("Read-only file system") || results[0].contains("Device or resource busy"), "{results:?}");
    assert!(results[1].contains("tools/inner/.git"), "a new .git is reported: {results:?}");
    let (results, _) = turn(&m, &[&rewrite], OFF, &[]).await;
    assert!(std::fs::read_to_string(m.project.join("wt/.git")).unwrap().contains(evil.to_str().unwrap()), "the control rewrote it: {results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_in_the_tree_are_read_only_in_every_form_git_reads() {
    if !enforced("hooks_in_the_tree_are_read_only_in_every_form_git_reads") {
        return;
    }
    let m = machine();
    let marker = m.outside.join("hook-ran");
    // husky's layout; a hook in .git/hooks that links to a tracked script; hooksPath set
    // through an included file of the tree, written with an inline comment.
    std::fs::create_dir_all(m.project.join(".husky")).unwrap();
    std::fs::write(m.project.join(".husky/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::create_dir_all(m.project.join("scripts")).unwrap();
    std::fs::write(m.project.join("scripts/post-commit.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    std::os::unix::fs::symlink(m.project.join("scripts/post-commit.sh"), m.project.join(".git/hooks/post-commit")).unwrap();
    std::fs::write(m.project.join("team.gitconfig"), "[core]\n\thooksPath = .husky ; husky\n").unwrap();
    git(&m.project, &["config", "include.path", "../team.gitconfig"]);
    git(&m.project, &["add", "."]);
    git(&m.project, &["commit", "-q", "-m", "hooks"]);
    for file in [".husky/pre-commit", "scripts/post-commit.sh"] {
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(m.project.join(file), mode).unwrap();
    }
    let script = marker_script(&marker).replace('\n', "\\n");
    let plant = |file: &str| format!("printf '{script}' > {file} && chmod +x {file}; echo tried");
    let include = format!("printf '[core]\\n\\thooksPath = {}\\n' > team.gitconfig; echo tried", m.outside.display());
    let commands = [plant(".husky/pre-commit"), plant("scripts/post-commit.sh"), include];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (results, _) = turn(&m, &refs, &[], &[]).await;
    std::fs::write(m.project.join("x.txt"), "x").unwrap();
    git(&m.project, &["add", "x.txt"]);
    git(&m.project, &["commit", "-q", "-m", "x"]);
    assert!(!marker.exists(), "git ran a planted hook: {results:?}");
    for r in &results {
        assert!(r.contains("Read-only file system"), "{results:?}");
    }
    let (results, _) = turn(&m, &refs[..1], OFF, &[]).await;
    std::fs::write(m.project.join("x.txt"), "y").unwrap();
    git(&m.project, &["commit", "-q", "-am", "y"]);
    assert!(marker.exists(), "the control's hook did not run: {results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_work_goes_on_in_a_repository_with_a_module_and_a_worktree() {
    if !enforced("git_work_goes_on_in_a_repository_with_a_module_and_a_worktree") {
        return;
    }
    let m = machine();
    repository_with_module_and_worktree(&m);
    let id = "-c user.name=t -c user.email=t@t";
    let commands = [
        "echo a > a.txt && mkdir -p d && echo b > d/b.txt && rm README.md && echo files-ok".to_string(),
        format!("git add -A && git {id} commit -q -m work && git tag v1 && git checkout -q -b feature && echo c > c.txt && git add c.txt && git stash -q && git stash list | wc -l && git worktree list | wc -l"),
        format!("cd vendor/lib && echo more > more.txt && git add more.txt && git {id} commit -q -m in-module && git log --format=%s -1"),
        format!("cd wt && echo w > w.txt && git add w.txt && git {id} commit -q -m in-worktree && git log --format=%s -1"),
        // A background process outlives its shell within the run: its commit lands too, when
        // it ends (each command sees git's folders as they were when it started).
        format!("(sleep 0.3; echo bg > bg.txt; git add bg.txt; git {id} commit -q -m background) & echo started"),
        "sleep 1; echo waited".to_string(),
    ];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (results, _) = turn(&m, &refs, &[], &[]).await;
    assert!(results[0].contains("files-ok"), "{results:?}");
    assert!(results[1].contains("1\n2"), "{results:?}");
    assert!(results[2].contains("in-module"), "{results:?}");
    assert!(results[3].contains("in-worktree"), "{results:?}");
    for r in &results {
        assert!(!r.contains("did not apply"), "nothing of git's data is refused: {r}");
    }
    // Seen by the user's git, outside.
    let out = |dir: &Path, args: &[&str]| String::from_utf8(git(dir, args).stdout).unwrap();
    assert_eq!(out(&m.project, &["branch", "--show-current"]), "feature\n");
    common::wait_until("the background commit", std::time::Duration::from_secs(10), || out(&m.project, &["log", "--format=%s", "-1"]) == "background\n").await;
    assert!(out(&m.project, &["tag"]).contains("v1"));
    assert_eq!(out(&m.project, &["stash", "list"]).lines().count(), 1);
    assert_eq!(out(&m.project.join("vendor/lib"), &["log", "--format=%s", "-1"]), "in-module\n");
    assert_eq!(out(&m.project.join("wt"), &["log", "--format=%s", "-1"]), "in-worktree\n");
    let fsck = git(&m.project, &["fsck", "--no-progress"]);
    assert!(fsck.status.success(), "{}", String::from_utf8_lossy(&fsck.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_left_running_ends_with_the_run_and_its_git_changes_are_merged_by_the_same_rule() {
    if !enforced("a_process_left_running_ends_with_the_run") {
        return;
    }
    let m = machine();
    let later = m.project.join("later.txt");
    // `sleep 3.017`: a marker for the background process's command line (its subshell's too).
    let command = "(sleep 3.017; echo later > later.txt) & (sleep 0.2; echo ../evil > .git/commondir) & echo started";
    let (results, _) = turn(&m, &[command, "sleep 0.6; echo waited"], &[], &[]).await;
    assert!(!m.project.join(".git/commondir").exists(), "{results:?}");
    // Waited on a condition, not a clock: once nothing of the command runs, nothing can write.
    // Left running, it would live 3 s, write `later.txt` and only then end.
    common::wait_until("the run's background process to end", std::time::Duration::from_secs(10), || common::pids_with("sleep 3.017").is_empty()).await;
    assert!(!later.exists(), "a process outlived the run: {results:?}");
    // The control: unsandboxed, the same process writes both once it has lived long enough (the
    // run lasts past its 3 s here: the CLI ends what a turn left running as it exits).
    let (results, _) = turn(&m, &[command, "sleep 4; echo waited"], OFF, &[]).await;
    common::wait_until("the control's background process", std::time::Duration::from_secs(10), || later.exists()).await;
    assert!(m.project.join(".git/commondir").exists(), "{results:?}");
}

/// The session's folder inside a repository (not its top): the repository's `.git` is outside
/// the project, and still only its data changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_inside_a_repository_commits_through_its_view() {
    if !enforced("a_project_inside_a_repository_commits_through_its_view") {
        return;
    }
    let m = machine();
    let sub = m.project.join("pkg");
    std::fs::create_dir_all(&sub).unwrap();
    let id = "-c user.name=t -c user.email=t@t";
    let commands = [format!("echo p > p.txt && git add p.txt && git {id} commit -q -m from-pkg && git log --format=%s -1 && echo ../x > ../.git/commondir")];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (results, _) = turn_in(&m, &sub, &refs, &[], &[]).await;
    assert!(results[0].contains("from-pkg"), "{results:?}");
    assert_eq!(String::from_utf8(git(&m.project, &["log", "--format=%s", "-1"]).stdout).unwrap(), "from-pkg\n");
    assert!(!m.project.join(".git/commondir").exists(), "{results:?}");
}

/// The hooks folder git's settings name, not made yet (husky before `npm install`): a command
/// that makes it is reported, and `write` into it asks (the CLI without a terminal refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_folder_git_names_is_reported_when_made_and_asked_for_by_write() {
    if !enforced("a_hooks_folder_git_names_is_reported_when_made") {
        return;
    }
    let m = machine();
    git(&m.project, &["config", "core.hooksPath", ".husky"]);
    let (results, _) = turn(&m, &["mkdir .husky && printf '#!/bin/sh\\nexit 0\\n' > .husky/pre-commit; echo made"], &[], &[]).await;
    assert!(results[0].contains("This command created .husky"), "{results:?}");
    let hook = m.project.join(".husky/post-commit");
    let calls = [("write", json!({ "path": hook, "content": "#!/bin/sh\nexit 0\n" }))];
    let (results, _) = turn_calls(&m, &m.project, &calls, &[], &[]).await;
    assert!(!hook.exists() && results[0].contains("git runs code from it"), "{results:?}");
    // The control: with the sandbox off only consent applies, and --yes gives it.
    let (results, _) = turn_calls(&m, &m.project, &calls, OFF, &[]).await;
    assert!(hook.exists(), "{results:?}");
}

/// The helper the host runs commands through.
const HELPER: &str = env!("CARGO_BIN_EXE_handoff-sandbox");

/// `command` through the host's own bash tool in `cwd`, in this test's process (`sandboxed`
/// false: outside the sandbox, the control). Git's answer for the project is cached per
/// process, so two calls share it as two commands of one session do.
async fn bash_here(m: &Machine, cwd: &Path, sandboxed: bool, command: &str) -> String {
    use handoff_nvim::core::sandbox::{SandboxMode, SandboxSettings, Sandboxed};
    use handoff_nvim::core::tools::{ToolContext, ToolRegistry};
    let settings = SandboxSettings { mode: SandboxMode::WorkspaceWrite, network: false };
    let sandbox = sandboxed.then(|| Sandboxed { helper: HELPER.into(), settings, tmpdir: m.tmp.clone(), mounts: true, scope: None });
    let ctx = ToolContext::new(cwd).with_sandbox(sandbox);
    ToolRegistry::all().execute("bash", json!({ "command": command }), &ctx).await.joined_text()
}

/// Git's answer is cached between commands (issue 39's last round): a module the user adds
/// between two commands of one session, under a project that is a folder of its repository,
/// is protected for the second (its pointer read-only). What changed is no file of the
/// project's own (`pkg/.git` does not exist): the repository's index and `.gitmodules` above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_added_between_two_commands_is_protected_for_the_second() {
    if !enforced("a_module_added_between_two_commands_is_protected_for_the_second") {
        return;
    }
    let m = machine();
    let pkg = m.project.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    // Twice: a first answer for a folder of a repository reads what a top's would not, and is
    // asked again by the next command; the one that command makes is settled, so what serves
    // the command after the change is the cache's check of its inputs.
    for _ in 0..2 {
        let first = bash_here(&m, &pkg, true, "echo first").await;
        assert!(first.contains("first"), "{first}");
    }
    // The user adds a module under the project, outside the sandbox.
    add_module(&m, "pkg/vendor/lib");
    let pointer = pkg.join("vendor/lib/.git");
    let before = std::fs::read_to_string(&pointer).unwrap();
    let rewrite = format!("echo 'gitdir: {}' > vendor/lib/.git; cat vendor/lib/.git", m.outside.join("evil").display());
    let second = bash_here(&m, &pkg, true, &rewrite).await;
    assert_eq!(std::fs::read_to_string(&pointer).unwrap(), before, "the second command rewrote the new module's pointer: {second}");
    assert!(second.contains("Read-only file system") || second.contains("busy"), "{second}");
    // The control: outside the sandbox the same command rewrites it.
    let control = bash_here(&m, &pkg, false, &rewrite).await;
    assert!(std::fs::read_to_string(&pointer).unwrap().contains("evil"), "{control}");
}

/// The same for a hook linked to a tracked script, made by the user between two commands in
/// the repository's top: the script is read-only to the second. What changed is the hooks
/// folder's listing, not a file git reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_linked_between_two_commands_protects_its_script_from_the_second() {
    if !enforced("a_hook_linked_between_two_commands_protects_its_script_from_the_second") {
        return;
    }
    let m = machine();
    let script = m.project.join("scripts/pre-commit.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let first = bash_here(&m, &m.project, true, "echo first").await;
    assert!(first.contains("first"), "{first}");
    std::os::unix::fs::symlink(&script, m.project.join(".git/hooks/pre-commit")).unwrap();
    let plant = "echo 'touch /tmp/planted' >> scripts/pre-commit.sh; echo tried";
    let second = bash_here(&m, &m.project, true, plant).await;
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "#!/bin/sh\nexit 0\n", "the second command changed the hook's script: {second}");
    assert!(second.contains("Read-only file system"), "{second}");
    let control = bash_here(&m, &m.project, false, plant).await;
    assert!(std::fs::read_to_string(&script).unwrap().contains("planted"), "{control}");
}

/// A read-only file of the tree stays the file git reads: renaming the folder it is in (the
/// read-only mount moves with the folder) and making a new one with a new file at its path is
/// refused (a hook's script here; a module's `.git` file is bound read-only the same way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_file_cannot_be_replaced_by_renaming_its_folder() {
    if !enforced("a_read_only_file_cannot_be_replaced_by_renaming_its_folder") {
        return;
    }
    let m = machine();
    let marker = m.outside.join("hook-ran");
    let script = m.project.join("tools/hooks/post-commit.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    git(&m.project, &["add", "."]);
    git(&m.project, &["commit", "-q", "-m", "hook"]);
    std::os::unix::fs::symlink(&script, m.project.join(".git/hooks/post-commit")).unwrap();
    let planted = marker_script(&marker).replace('\n', "\\n");
    let swap = format!("mv tools t2; mkdir -p tools/hooks && printf '{planted}' > tools/hooks/post-commit.sh && chmod +x tools/hooks/post-commit.sh; echo tried");
    let (results, _) = turn(&m, &[&swap], &[], &[]).await;
    std::fs::write(m.project.join("x.txt"), "x").unwrap();
    git(&m.project, &["add", "x.txt"]);
    git(&m.project, &["commit", "-q", "-m", "x"]);
    assert!(!marker.exists(), "git ran a script put in place of the hook's: {results:?}");
    assert!(results[0].contains("busy") || results[0].contains("Read-only"), "{results:?}");
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "#!/bin/sh\nexit 0\n");
    // The control: outside the sandbox the swap goes through and git runs the new script.
    let (results, _) = turn(&m, &[&swap], OFF, &[]).await;
    std::fs::write(m.project.join("x.txt"), "y").unwrap();
    git(&m.project, &["commit", "-q", "-am", "y"]);
    assert!(marker.exists(), "the control's script did not run: {results:?}");
}

/// A `git` first on `PATH` that writes each of its command lines to `log`, then runs the real
/// one; the `PATH` that finds it.
fn logging_git(m: &Machine, log: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let real = common::machine::which("git").expect("git");
    let bin = m.outside.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("git");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$*\" >> {}\nexec {} \"$@\"\n", log.display(), real.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// How many times the host has asked git about the project (its queries run with hooks off).
fn host_asked(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains("core.hooksPath=/dev/null")).count()
}

/// [`host_asked`] after one more turn (one command) with `env`.
async fn asked_after(m: &Machine, log: &Path, env: &[(&str, &str)]) -> usize {
    let (results, _) = turn(m, &["echo ran"], &[], env).await;
    assert!(results[0].contains("ran"), "{results:?}");
    host_asked(log)
}

/// Each CLI prompt is a new process: git's answer is kept in the user's cache folder and used
/// by the next while everything it was made from reads the same, and asked again when the
/// project's config, the user's config or `HEAD` changes. The kept answer holds no content of
/// a config (a token in a remote's URL stays where the user put it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_answers_are_kept_across_processes_while_what_they_were_made_from_holds() {
    if !enforced("git_answers_are_kept_across_processes_while_what_they_were_made_from_holds") {
        return;
    }
    let m = machine();
    let log = m.outside.join("git.log");
    let path = logging_git(&m, &log);
    git(&m.project, &["config", "remote.origin.url", "https://u:s3cret-token@example.com/r.git"]);
    let env = [("PATH", path.as_str())];
    let first = asked_after(&m, &log, &env).await;
    assert!(first > 0, "the host never asked git: the count would prove nothing");
    let kept_dir = m.home.join(".cache/handoff-nvim/sandbox");
    let kept: Vec<_> = std::fs::read_dir(&kept_dir).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("git-")).collect();
    assert_eq!(kept.len(), 1, "one answer kept in {}", kept_dir.display());
    let text = std::fs::read_to_string(kept[0].path()).unwrap();
    assert!(!text.contains("s3cret-token"), "a config's content was copied into the kept answer");
    assert_eq!(asked_after(&m, &log, &env).await, first, "the second process asked git again");
    // Control: with nothing kept, every process asks.
    assert_eq!(asked_after(&m, &log, &[("PATH", path.as_str()), ("HANDOFF_SANDBOX_CACHE_DIR", "")]).await, 2 * first);
    // What the answer was made from changes: each is asked again.
    let mut asked = 2 * first;
    type Change<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let changes: [Change; 3] = [
        ("the project's config", Box::new(|| drop(git(&m.project, &["config", "core.hooksPath", ".githooks"])))),
        ("the user's config", Box::new(|| std::fs::write(m.home.join(".gitconfig"), "[core]\n\thooksPath = /elsewhere\n").unwrap())),
        ("HEAD", Box::new(|| drop(git(&m.project, &["checkout", "-q", "-b", "other"])))),
    ];
    for (what, change) in changes {
        change();
        let now = asked_after(&m, &log, &env).await;
        assert!(now > asked, "{what} changed, and git was not asked again");
        asked = now;
        assert_eq!(asked_after(&m, &log, &env).await, asked, "after {what}: the new answer is not kept");
    }
}

/// The kept answer is trusted only where no command could have written it: one planted in a
/// folder of the project (the cache folder a session in the home folder would use) that says
/// the project has no git folder is not used, and `.git/hooks` stays read-only. The control:
/// the same forged answer where the user's own cache is, owned by the user, is used (the
/// forgery would work if it were trusted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_git_answer_a_command_could_have_written_is_not_used() {
    if !enforced("a_kept_git_answer_a_command_could_have_written_is_not_used") {
        return;
    }
    let m = machine();
    std::fs::create_dir_all(m.project.join(".git/hooks")).unwrap();
    let planted = m.project.join(".git/hooks/pre-commit");
    let attack = format!("printf '#!/bin/sh\\necho pwned\\n' > {} && echo planted", planted.display());
    // A true answer, kept where the user's cache is, made into a forgery: no git folder.
    let outside = m.outside.join("cache");
    let outside_env = [("HANDOFF_SANDBOX_CACHE_DIR", outside.to_str().unwrap())];
    turn(&m, &["true"], &[], &outside_env).await;
    let file = std::fs::read_dir(&outside).unwrap().flatten().find(|e| e.file_name().to_string_lossy().starts_with("git-")).expect("a kept answer").path();
    let mut kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(!kept["layout"]["git_dirs"].as_array().unwrap().is_empty());
    kept["layout"]["git_dirs"] = json!([]);
    let forged = serde_json::to_vec(&kept).unwrap();
    // In the project: not used.
    let inside = m.project.join(".cache-h");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(inside.join(file.file_name().unwrap()), &forged).unwrap();
    let inside_env = [("HANDOFF_SANDBOX_CACHE_DIR", inside.to_str().unwrap())];
    let (results, _) = turn(&m, &[&attack], &[], &inside_env).await;
    assert!(!planted.exists(), "a hook was planted through a forged answer in the project: {results:?}");
    // The control: outside, the user's own, the forgery is used and the hook lands.
    std::fs::write(&file, &forged).unwrap();
    let (results, _) = turn(&m, &[&attack], &[], &outside_env).await;
    assert!(planted.exists(), "the forged answer was not used where it is trusted: the test proves nothing: {results:?}");
}

/// The CLI sends its prompt at once: the sandbox's work for the first command (git's answer
/// among it) starts when the model's first reply begins, in the model's time, not beside the
/// first request (`sandbox::PrefetchAt::FirstReply`). A request refused before any reply (a
/// 401) leaves git unasked; the control, a reply that runs a command, asks it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_asks_git_only_once_a_reply_begins() {
    if !enforced("the_cli_asks_git_only_once_a_reply_begins") {
        return;
    }
    let m = machine();
    let log = m.outside.join("git.log");
    let path = logging_git(&m, &log);
    let mock = handoff_mock::MockServer::start().await.unwrap();
    mock.push(handoff_mock::MockReply::Status { status: 401, body: r#"{"error":{"message":"bad key"}}"#.into(), retry_after: None });
    let bin = Path::new(common::machine::BIN);
    let out = prompt_command(bin, &[], &m, &m.project, &mock, &[], &[("PATH", &path)]).output().await.unwrap();
    assert!(!out.status.success(), "the 401 did not fail the prompt: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(host_asked(&log), 0, "git was asked before any reply began");
    assert!(asked_after(&m, &log, &[("PATH", path.as_str())]).await > 0, "the control never asked git: the count proves nothing");
}

/// Where the project holds the folder of kept answers (a session in the home folder, whose
/// `~/.cache` is then the project's), commands see that folder read-only: a command in one
/// project cannot write the answer another project's next process would trust, neither into
/// it nor by moving a folder above it away and making a new one by its name. The control,
/// `--sandbox off`, writes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kept_answers_folder_is_read_only_to_commands_when_the_project_holds_it() {
    if !enforced("the_kept_answers_folder_is_read_only_to_commands_when_the_project_holds_it") {
        return;
    }
    let m = machine();
    let kept = m.project.join(".cache/handoff-nvim/sandbox");
    let env = [("HANDOFF_SANDBOX_CACHE_DIR", kept.to_str().unwrap())];
    let forged = kept.join("git-forged");
    let write = format!("mkdir -p {dir}; echo forged > {file} && echo wrote", dir = kept.display(), file = forged.display());
    let moved = format!("mv {cache} {cache}-moved && {write}", cache = m.project.join(".cache").display());
    for attack in [&write, &moved] {
        let (results, _) = turn(&m, &[attack], &[], &env).await;
        assert!(!forged.exists(), "a command wrote into the kept answers' folder ({attack}): {results:?}");
        assert!(kept.is_dir(), "the folder is made, so that it can be bound read-only");
    }
    let (results, _) = turn(&m, &[&moved], OFF, &env).await;
    assert!(forged.exists(), "the control could not write there: {results:?}");
}
