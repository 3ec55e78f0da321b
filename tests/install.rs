//! Installing the host without a Rust toolchain (`lua/handoff/install.lua`, `:HandoffInstall`):
//! release assets made by `scripts/release.sh` itself, served by a loopback HTTP server written
//! here, installed by the plugin in a real headless Neovim from a cold plugin folder (a copy of
//! this checkout's Lua, its own git history), then used for a prompt and `:Handoff` against the
//! mock model. A tampered asset, a missing one (with and without cargo), a proxy, a binary of
//! another version and a rollback each have their test; the static binary runs in a root
//! without glibc.
//!
//! The served binary is this build's host (`target/debug/handoff-nvim`, a glibc build: the
//! installer takes a release's `x86_64-unknown-linux-gnu` asset on Linux when it has no musl
//! one); the static musl binary has a test of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::nvim::{bounded, Editor, HOST_BIN, DOC};
use handoff_mock::MockReply;
use serde_json::{json, Value};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// A loopback HTTP server ------------------------------------------------------------------

/// Serves the files under a folder over HTTP/1.1 on 127.0.0.1, one connection at a time, and
/// records each request line. A request in a proxy's form (`GET http://host:port/path`) is
/// served the same way: as a proxy, it stands in for every origin.
struct FileServer {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FileServer {
    fn start(folder: &Path) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (log, folder) = (requests.clone(), folder.to_path_buf());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve_one(stream, &folder, &log);
            }
        });
        FileServer { port, requests }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve_one(stream: TcpStream, folder: &Path, log: &Mutex<Vec<String>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let request = line.trim_end().to_string();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
            break;
        }
    }
    log.lock().unwrap().push(request.clone());
    let target = request.split(' ').nth(1).unwrap_or("/");
    // A proxy's request names the whole URL: its path is what is served.
    let path = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let file = folder.join(path.trim_start_matches('/'));
    let mut out = stream;
    match (!path.contains("..")).then(|| std::fs::read(&file).ok()).flatten() {
        Some(body) => {
            write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())?;
            out.write_all(&body)?;
        }
        None => write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?,
    }
    out.flush()
}

/// A loopback port nothing listens on (bound, then closed): "no network" for curl.
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

// A cold plugin folder and its release ------------------------------------------------------

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// This build's target as `--version` states it (the name of the asset release.sh makes).
fn host_target() -> String {
    let out = Command::new(HOST_BIN).arg("--version").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().find_map(|l| l.strip_prefix("target ")).expect("--version states the target").to_string()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A plugin folder as a plugin manager clones it, without any binary: this checkout's `lua/`,
/// `plugin/` and `Cargo.toml` (the version), in a git repository of its own.
fn cold_plugin(at: &Path) -> PathBuf {
    let plugin = at.join("handoff.nvim");
    std::fs::create_dir_all(&plugin).unwrap();
    for dir in ["lua", "plugin"] {
        let ok = Command::new("cp").arg("-r").arg(root().join(dir)).arg(plugin.join(dir)).status().unwrap();
        assert!(ok.success());
    }
    // A release.lua of this checkout's own (when one is committed) is not the test's.
    let _ = std::fs::remove_file(plugin.join("lua/handoff/release.lua"));
    std::fs::copy(root().join("Cargo.toml"), plugin.join("Cargo.toml")).unwrap();
    git(&plugin, &["init", "-q"]);
    git(&plugin, &["add", "-A"]);
    git(&plugin, &["commit", "-q", "-m", "sources"]);
    plugin
}

/// Runs the real `scripts/release.sh` on `binary`: its asset and SHA256SUMS into
/// `served/v<version>/`, the pins into the plugin's `lua/handoff/release.lua` (download URL
/// `url/v{version}`), committed as a release is. Returns the asset's file name.
fn release(plugin: &Path, served: &Path, binary: &Path, url: &str) -> String {
    let out_dir = served.join(format!("v{VERSION}"));
    let out = common::clean_command(root().join("scripts/release.sh"))
        .arg("--prebuilt")
        .arg(binary)
        .arg("--out")
        .arg(&out_dir)
        .arg("--lua")
        .arg(plugin.join("lua/handoff/release.lua"))
        .arg("--url")
        .arg(format!("{url}/v{{version}}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "release.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    git(plugin, &["add", "-A"]);
    git(plugin, &["commit", "-q", "-m", "release"]);
    format!("handoff-nvim-{}", host_target())
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
}

/// Neovim with the cold plugin loaded as a plugin manager loads it, set up against the mock
/// without `bin` (the installed binary is what it finds), with `install` settings `install`.
async fn editor(plugin: &Path, install: Value) -> Editor {
    let ed = Editor::start_bare().await;
    ed.lua("vim.opt.rtp:prepend(...) vim.cmd('runtime! plugin/handoff.lua')", json!([plugin])).await;
    let mut opts = ed.default_setup();
    opts.as_object_mut().unwrap().remove("bin");
    opts["install"] = install;
    ed.lua("require('handoff').setup(...)", json!([opts])).await;
    // No proxy of the machine's in the way of the loopback servers.
    ed.lua("for _, v in ipairs({ 'http_proxy', 'https_proxy', 'HTTPS_PROXY', 'ALL_PROXY', 'all_proxy', 'no_proxy', 'NO_PROXY' }) do vim.env[v] = nil end", json!([])).await;
    ed
}

/// The installed binary's folder in the editor's data folder.
fn install_dir(ed: &Editor) -> PathBuf {
    ed.dir.path().join("data/nvim/handoff/bin")
}

/// `require('handoff.install').run(opts)` with `wait`, its result.
async fn install(ed: &Editor, opts: Value) -> Value {
    let mut opts = opts;
    opts["wait"] = json!(true);
    ed.lua("return require('handoff.install').run(...)", json!([opts])).await
}

/// The notices the editor showed, joined.
async fn notes(ed: &Editor) -> String {
    ed.eval("table.concat(vim.tbl_map(function(n) return n.msg end, T.notes), '\\n')").await.as_str().unwrap_or("").to_string()
}

/// A `cargo` that builds nothing: it records how it was called and puts this build's host where
/// `cargo build --release` would (a stand-in for a real build, which the tests cannot afford).
fn fake_cargo(at: &Path) -> (PathBuf, PathBuf) {
    let bin = at.join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = at.join("cargo.log");
    let script = format!(
        "#!/bin/sh\necho \"$PWD $*\" >> {log:?}\nmkdir -p target/release\ncp {host:?} target/release/handoff-nvim\n",
        log = log,
        host = HOST_BIN
    );
    std::fs::write(bin.join("cargo"), script).unwrap();
    std::fs::set_permissions(bin.join("cargo"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (bin, log)
}

/// PATH without cargo (curl, git and sha256sum are in /usr/bin), with `first` before it.
async fn set_path(ed: &Editor, first: Option<&Path>) {
    let path = match first {
        Some(dir) => format!("{}:/usr/bin:/bin", dir.display()),
        None => "/usr/bin:/bin".to_string(),
    };
    ed.lua("vim.env.PATH = ...", json!([path])).await;
    assert_eq!(ed.eval("vim.fn.executable('cargo')").await, json!(i32::from(first.is_some())), "PATH: {path}");
}

/// Files in the install folder other than the binary, its record and `previous/`: leftovers of
/// a download or a build.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !["handoff-nvim", "install.json", "previous"].contains(&n.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

// The tests ------------------------------------------------------------------------------

/// Before any install the plugin downloads nothing, at start-up or first use: a prompt is a
/// clear error that says how to install.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_binary_is_an_error_that_says_how_to_install_and_nothing_is_downloaded() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let server = FileServer::start(&served);
        release(&plugin, &served, Path::new(HOST_BIN), &server.url());
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        ed.lua("require('handoff').prompt('hello')", json!([])).await;
        let note = ed.wait_until("T.noted('not installed')", Duration::from_secs(5)).await;
        assert!(note["msg"].as_str().unwrap().contains(":HandoffInstall"), "{note}");
        assert_eq!(ed.eval("require('handoff.state').chan").await, Value::Null, "no host started");
        assert_eq!(server.requests(), Vec::<String>::new(), "nothing was downloaded");
        assert!(!install_dir(&ed).exists());
        ed.quit().await;
    })
    .await;
}

/// The installer fetches this platform's asset from the release the plugin pins, checks it,
/// installs it atomically (no temporary file left, its record beside it), and the plugin runs
/// a prompt and `:Handoff` with it; `:checkhealth` says where it came from. The checkout is a
/// commit past the release (a `main` between releases): it says so and installs the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installer_fetches_checks_and_installs_the_release_binary_and_the_plugin_runs_with_it() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let server = FileServer::start(&served);
        let asset = release(&plugin, &served, Path::new(HOST_BIN), &server.url());
        std::fs::write(plugin.join("NEWS.md"), "after the release\n").unwrap();
        git(&plugin, &["add", "-A"]);
        git(&plugin, &["commit", "-q", "-m", "a commit on main after the release"]);
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        let r = install(&ed, json!({})).await;
        let dir = install_dir(&ed);
        let installed = dir.join("handoff-nvim");
        assert_eq!(r["ok"], json!(true), "{r}\n{}", notes(&ed).await);
        assert_eq!(r["source"], "download");
        assert_eq!(r["version"], VERSION);
        assert_eq!(PathBuf::from(r["binary"].as_str().unwrap()), installed);
        assert_eq!(server.requests(), vec![format!("GET /v{VERSION}/{asset} HTTP/1.1")], "one request, for this platform's asset");
        assert_eq!(sha256(&installed), sha256(Path::new(HOST_BIN)));
        assert_eq!(leftovers(&dir), Vec::<String>::new(), "temporary files left");
        let record: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("install.json")).unwrap()).unwrap();
        assert_eq!(record["source"], "download");
        assert_eq!(record["sha256"], sha256(&installed));
        assert!(notes(&ed).await.contains(&format!("1 commit past release {VERSION}")), "{}", notes(&ed).await);
        // The plugin finds it and runs with it.
        assert_eq!(ed.eval("require('handoff.host').locate().source").await, json!("download"));
        ed.mock.push(MockReply::text("installed and answering"));
        ed.lua("require('handoff').prompt('hello')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        assert!(ed.eval("T.chat()").await.to_string().contains("installed and answering"));
        let pid = ed.host_pid().await;
        assert_eq!(std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(), installed, "the host runs the installed binary");
        ed.mock.push(MockReply::text(DOC));
        ed.command("Handoff").await;
        ed.wait_event("HandoffDone", 1).await;
        // :checkhealth says where it came from and that the handshake holds.
        ed.command("checkhealth handoff").await;
        let health = ed.eval("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')").await;
        let health = health.as_str().unwrap();
        assert!(health.contains(&format!("downloaded release {VERSION} for {}", host_target())), "{health}");
        assert!(health.contains("checksum verified"), "{health}");
        assert!(health.contains(&format!("handshake: version {VERSION}")), "{health}");
        ed.quit().await;
    })
    .await;
}

/// An asset replaced on the server, binary and SHA256SUMS together (one compromised pipeline),
/// is refused: the checksum the plugin's history pins is the only one trusted. The installed
/// binary stays. The control: the untampered asset installed first, the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_asset_is_refused_and_the_installed_binary_kept() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let server = FileServer::start(&served);
        let asset = release(&plugin, &served, Path::new(HOST_BIN), &server.url());
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        let first = install(&ed, json!({})).await;
        assert_eq!(first["ok"], json!(true), "the control: {first}");
        let installed = install_dir(&ed).join("handoff-nvim");
        let before = sha256(&installed);
        // The attacker's binary and a SHA256SUMS that agrees with it.
        let release_dir = served.join(format!("v{VERSION}"));
        let mut bytes = std::fs::read(release_dir.join(&asset)).unwrap();
        bytes.extend_from_slice(b"#!/bin/sh\necho pwned\n");
        std::fs::write(release_dir.join(&asset), &bytes).unwrap();
        let forged = sha256(&release_dir.join(&asset));
        std::fs::write(release_dir.join("SHA256SUMS"), format!("{forged}  {asset}\n")).unwrap();
        let r = install(&ed, json!({})).await;
        assert_eq!(r["ok"], json!(false), "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(error.contains("not the released file") && error.contains(&forged) && error.contains(&before), "{error}");
        assert_eq!(sha256(&installed), before, "the installed binary was replaced");
        assert!(!install_dir(&ed).join("previous").exists(), "nothing moved aside");
        assert_eq!(leftovers(&install_dir(&ed)), Vec::<String>::new());
        ed.quit().await;
    })
    .await;
}

/// No asset for this platform in the release, or no network, and cargo on PATH: it builds in the
/// plugin folder and installs what was built. `cargo` is a stand-in here (a script that records
/// its arguments and copies this build's host where the build puts it), not a real build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_asset_or_a_network_and_with_cargo_it_builds() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let server = FileServer::start(&served);
        release(&plugin, &served, Path::new(HOST_BIN), &server.url());
        // The release has no binary for this platform: its entry names another target.
        let lua = plugin.join("lua/handoff/release.lua");
        let text = std::fs::read_to_string(&lua).unwrap();
        std::fs::write(&lua, text.replace(&format!("[\"{}\"]", host_target()), "[\"riscv64gc-unknown-linux-musl\"]")).unwrap();
        let (fake, log) = fake_cargo(work.path());
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, Some(&fake)).await;
        let r = install(&ed, json!({})).await;
        assert_eq!(r["ok"], json!(true), "{r}\n{}", notes(&ed).await);
        assert_eq!(r["source"], "build");
        assert_eq!(server.requests(), Vec::<String>::new(), "no asset: nothing to download");
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(calls.trim(), format!("{} build --release --locked --bin handoff-nvim", plugin.display()));
        assert!(notes(&ed).await.contains("has no binary for"), "{}", notes(&ed).await);
        let record: Value = serde_json::from_str(&std::fs::read_to_string(install_dir(&ed).join("install.json")).unwrap()).unwrap();
        assert_eq!(record["source"], "build");
        assert_eq!(record["commit"], git(&plugin, &["rev-parse", "HEAD"]));
        assert_eq!(record["version"], VERSION);
        assert_eq!(sha256(&install_dir(&ed).join("handoff-nvim")), sha256(Path::new(HOST_BIN)));
        ed.mock.push(MockReply::text("built and answering"));
        ed.lua("require('handoff').prompt('hello')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        // The release has the asset, but the network is down: it builds again.
        std::fs::write(&lua, text).unwrap();
        let r = install(&ed, json!({ "url": format!("http://127.0.0.1:{}/v{{version}}", dead_port()) })).await;
        assert_eq!(r["ok"], json!(true), "{r}");
        assert_eq!(r["source"], "build");
        assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
        assert!(notes(&ed).await.contains("cannot download"), "{}", notes(&ed).await);
        ed.quit().await;
    })
    .await;
}

/// Without the network and without cargo: one message with the URL, the pinned checksum and the
/// steps by hand; with no asset for the platform, how to get one built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_network_or_cargo_the_message_names_the_url_the_checksum_and_the_steps() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let dead = format!("http://127.0.0.1:{}", dead_port());
        let asset = release(&plugin, &served, Path::new(HOST_BIN), &dead);
        let sum = sha256(&served.join(format!("v{VERSION}")).join(&asset));
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        let r = install(&ed, json!({})).await;
        assert_eq!(r["ok"], json!(false), "{r}");
        let error = r["error"].as_str().unwrap();
        let url = format!("{dead}/v{VERSION}/{asset}");
        for needle in [url.as_str(), sum.as_str(), "sha256sum -c", "curl -fLo", "cargo is not installed"] {
            assert!(error.contains(needle), "{needle:?} missing from: {error}");
        }
        assert_eq!(ed.eval("#vim.tbl_filter(function(n) return n.level == vim.log.levels.ERROR end, T.notes)").await, json!(1), "one message");
        assert!(!install_dir(&ed).join("handoff-nvim").exists());
        // No asset for this platform: no URL to give, but what to do.
        let lua = plugin.join("lua/handoff/release.lua");
        let text = std::fs::read_to_string(&lua).unwrap();
        std::fs::write(&lua, text.replace(&format!("[\"{}\"]", host_target()), "[\"riscv64gc-unknown-linux-musl\"]")).unwrap();
        let r = install(&ed, json!({})).await;
        let error = r["error"].as_str().unwrap();
        assert!(error.contains("has no binary for") && error.contains("rustup.rs") && error.contains("bin ="), "{error}");
        ed.quit().await;
    })
    .await;
}

/// A proxy variable reaches curl: the origin is a dead port, so only the loopback proxy, which
/// records the request, can answer. The control: the same install without the variable fails.
/// `install.curl_args` reaches it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_variable_and_curl_args_reach_curl() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let proxy = FileServer::start(&served);
        let origin = format!("http://127.0.0.1:{}", dead_port());
        let asset = release(&plugin, &served, Path::new(HOST_BIN), &origin);
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        let control = install(&ed, json!({})).await;
        assert_eq!(control["ok"], json!(false), "the origin is down: {control}");
        assert_eq!(proxy.requests(), Vec::<String>::new());
        ed.lua("vim.env.http_proxy = ...", json!([proxy.url()])).await;
        let r = install(&ed, json!({})).await;
        assert_eq!(r["ok"], json!(true), "{r}\n{}", notes(&ed).await);
        assert_eq!(proxy.requests(), vec![format!("GET {origin}/v{VERSION}/{asset} HTTP/1.1")]);
        ed.lua("vim.env.http_proxy = nil", json!([])).await;
        let r = install(&ed, json!({ "curl_args": ["--proxy", proxy.url()] })).await;
        assert_eq!(r["ok"], json!(true), "{r}");
        assert_eq!(proxy.requests().len(), 2);
        ed.quit().await;
    })
    .await;
}

/// A binary of another version is refused with one line that says :HandoffInstall, and never
/// run: the installed one by its record (a plugin updated past it), before anything starts it
/// (here a script that leaves a mark if it is ever run); one in the checkout by the handshake
/// as the host starts, before it is given settings or a prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_of_another_version_is_refused_and_never_run() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let server = FileServer::start(&served);
        release(&plugin, &served, Path::new(HOST_BIN), &server.url());
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        assert_eq!(install(&ed, json!({})).await["ok"], json!(true));
        // The control: it fits, the plugin takes it.
        assert_eq!(ed.eval("require('handoff.host').locate().source").await, json!("download"));
        // The installed binary becomes one that marks its running; the plugin moves on a version.
        let installed = install_dir(&ed).join("handoff-nvim");
        let mark = work.path().join("ran");
        std::fs::write(&installed, format!("#!/bin/sh\ntouch {mark:?}\n")).unwrap();
        let cargo = std::fs::read_to_string(plugin.join("Cargo.toml")).unwrap();
        std::fs::write(plugin.join("Cargo.toml"), cargo.replacen(&format!("version = \"{VERSION}\""), "version = \"9.9.9\"", 1)).unwrap();
        ed.lua("require('handoff').prompt('hello')", json!([])).await;
        let note = ed.wait_until(&format!("T.noted('is version {VERSION} but the plugin is 9.9.9')"), Duration::from_secs(5)).await;
        let msg = note["msg"].as_str().unwrap();
        assert!(msg.contains(":HandoffInstall") && !msg.contains('\n'), "one actionable line: {msg}");
        assert!(!mark.exists(), "the refused binary was run");
        assert_eq!(ed.eval("require('handoff.state').chan").await, Value::Null);
        // A binary in the checkout of another version than the plugin: started, asked, refused.
        std::fs::create_dir_all(plugin.join("target/release")).unwrap();
        std::fs::copy(HOST_BIN, plugin.join("target/release/handoff-nvim")).unwrap();
        ed.lua("T.notes = {}", json!([])).await;
        assert_eq!(ed.eval("require('handoff.host').ensure()").await, Value::Null);
        let note = ed.wait_until("T.noted('run :HandoffInstall')", Duration::from_secs(5)).await;
        assert!(note["msg"].as_str().unwrap().contains(&format!("is version {VERSION} but the plugin is 9.9.9")), "{note}");
        assert_eq!(ed.eval("require('handoff.state').chan").await, Value::Null, "the refused host was stopped");
        assert!(ed.mock.requests().is_empty(), "no request reached the model");
        ed.quit().await;
    })
    .await;
}

/// The binary an install replaces is kept; `:HandoffInstall rollback` puts it back (and again,
/// the newer one), each with its record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_restores_the_previous_binary() {
    bounded(async {
        let work = tempfile::tempdir().unwrap();
        let plugin = cold_plugin(work.path());
        let served = work.path().join("served");
        let server = FileServer::start(&served);
        release(&plugin, &served, Path::new(HOST_BIN), &server.url());
        let ed = editor(&plugin, json!({})).await;
        set_path(&ed, None).await;
        assert_eq!(install(&ed, json!({})).await["ok"], json!(true));
        let installed = install_dir(&ed).join("handoff-nvim");
        let first = sha256(&installed);
        // A second release of the same version: another binary (bytes appended to the same one).
        let second_bin = work.path().join("second/handoff-nvim");
        std::fs::create_dir_all(second_bin.parent().unwrap()).unwrap();
        let mut bytes = std::fs::read(HOST_BIN).unwrap();
        bytes.extend_from_slice(b"second release");
        std::fs::write(&second_bin, &bytes).unwrap();
        std::fs::set_permissions(&second_bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        release(&plugin, &served, &second_bin, &server.url());
        assert_eq!(install(&ed, json!({})).await["ok"], json!(true));
        let second = sha256(&installed);
        assert_ne!(first, second);
        assert_eq!(sha256(&install_dir(&ed).join("previous/handoff-nvim")), first, "the first kept");
        ed.command("HandoffInstall rollback").await;
        assert_eq!(sha256(&installed), first, "rolled back");
        let record: Value = serde_json::from_str(&std::fs::read_to_string(install_dir(&ed).join("install.json")).unwrap()).unwrap();
        assert_eq!(record["sha256"], first, "its record came back with it");
        assert_eq!(sha256(&install_dir(&ed).join("previous/handoff-nvim")), second);
        assert!(notes(&ed).await.contains("rolled back"), "{}", notes(&ed).await);
        ed.command("HandoffInstall rollback").await;
        assert_eq!(sha256(&installed), second, "and forward again");
        ed.mock.push(MockReply::text("after the rollbacks"));
        ed.lua("require('handoff').prompt('hello')", json!([])).await;
        ed.wait_event("HandoffAgentEnd", 1).await;
        ed.quit().await;
    })
    .await;
}

// The static binary ------------------------------------------------------------------------

/// This machine's static target (`x86_64-unknown-linux-musl` here).
fn static_target() -> String {
    format!("{}-unknown-linux-musl", std::env::consts::ARCH)
}

/// The static binary to check: `$HANDOFF_STATIC_BIN`; else one built here (debug, its own
/// target folder) when the musl standard library and cargo-zigbuild are installed
/// (scripts/test.sh installs both); else the one scripts/release.sh left in dist/. None: why not.
fn static_binary() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("HANDOFF_STATIC_BIN").filter(|b| !b.is_empty()) {
        return Ok(PathBuf::from(bin));
    }
    let target = static_target();
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output().ok();
    let has_std = installed.is_some_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == target));
    let zig_bin = root().join(".cache/zig-venv/bin");
    if has_std && zig_bin.join("cargo-zigbuild").is_file() {
        let target_dir = root().join("target/static-test");
        let status = Command::new("cargo")
            .current_dir(root())
            .env("PATH", format!("{}:{}", zig_bin.display(), std::env::var("PATH").unwrap_or_default()))
            .env("CARGO_TARGET_DIR", &target_dir)
            .args(["zigbuild", "--locked", "--target", &target, "--bin", "handoff-nvim"])
            .status()
            .map_err(|e| format!("cannot run cargo zigbuild: {e}"))?;
        if !status.success() {
            return Err(format!("cargo zigbuild --target {target} failed"));
        }
        return Ok(target_dir.join(&target).join("debug/handoff-nvim"));
    }
    let dist = root().join("dist").join(format!("handoff-nvim-{target}"));
    if dist.is_file() {
        return Ok(dist);
    }
    Err(format!(
        "the {target} standard library (rustup target add {target}) and cargo-zigbuild (scripts/deps.sh \
         ensure_zigbuild) are not both installed, and scripts/release.sh left no dist/handoff-nvim-{target}"
    ))
}

/// Runs `binary` as `/handoff-nvim` in a root that holds nothing else but an empty /tmp and a
/// /proc (a user, mount and pid namespace of its own: no glibc, no loader, no /etc), as a CLI
/// prompt against the mock.
fn run_in_empty_root(binary: &Path, mock_url: &str) -> std::process::Output {
    let rootfs = tempfile::tempdir().unwrap();
    for dir in ["proc", "tmp"] {
        std::fs::create_dir_all(rootfs.path().join(dir)).unwrap();
    }
    std::fs::copy(binary, rootfs.path().join("handoff-nvim")).unwrap();
    std::fs::set_permissions(rootfs.path().join("handoff-nvim"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    common::clean_command("unshare")
        .args(["--user", "--map-root-user", "--mount", "--pid", "--fork", "sh", "-c"])
        .arg("mount -t proc proc \"$1/proc\" && exec chroot \"$1\" /handoff-nvim --session-dir /tmp/sessions prompt --new --cwd /tmp 'say hi'")
        .arg("sh")
        .arg(rootfs.path())
        .env("HANDOFF_BASE_URL", mock_url)
        .env("HANDOFF_MODEL", "mock-model")
        .env("HOME", "/tmp")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap()
}

/// The release's Linux binary is static: `file` and `ldd` say so, and it answers a prompt in a
/// root without glibc. The control: this build's glibc binary cannot even start there.
#[test]
fn the_static_binary_runs_in_a_root_without_glibc() {
    let bin = match static_binary() {
        Ok(bin) => bin,
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED the_static_binary_runs_in_a_root_without_glibc: {why}");
            return;
        }
    };
    let file = Command::new("file").arg("-L").arg(&bin).output().unwrap();
    let file = String::from_utf8_lossy(&file.stdout).to_string();
    assert!(file.contains("statically linked") || file.contains("static-pie linked"), "file: {file}");
    let ldd = Command::new("ldd").arg(&bin).output().unwrap();
    let ldd = format!("{}{}", String::from_utf8_lossy(&ldd.stdout), String::from_utf8_lossy(&ldd.stderr));
    assert!(ldd.contains("not a dynamic executable") || ldd.contains("statically linked"), "ldd: {ldd}");
    let said = Command::new(&bin).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&said.stdout).contains(&format!("target {}", static_target())));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mock = runtime.block_on(handoff_mock::MockServer::start()).unwrap();
    mock.push(MockReply::text("hello from a root without glibc"));
    let out = run_in_empty_root(&bin, &mock.openai_base_url());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("hello from a root without glibc"),
        "status {:?}\n--- stdout:\n{stdout}\n--- stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The control: the glibc build in the same kind of root.
    let control = run_in_empty_root(Path::new(HOST_BIN), &mock.openai_base_url());
    assert!(!control.status.success(), "the glibc binary ran without glibc: the root is not empty enough");
}

/// The README's lazy.nvim spec as written (its `build` function), pointed at a cold plugin
/// folder: lazy.nvim's build installs the release's binary from the loopback server, and the
/// plugin answers a prompt with it. Run with lazy.nvim itself (`common::lazy_nvim`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_lazy_spec_builds_by_installing_from_the_local_server() {
    let lazy = common::lazy_nvim();
    let work = tempfile::tempdir().unwrap();
    let plugin = cold_plugin(work.path());
    let served = work.path().join("served");
    let server = FileServer::start(&served);
    let asset = release(&plugin, &served, Path::new(HOST_BIN), &server.url());
    let mock = handoff_mock::MockServer::start().await.unwrap();
    mock.push(MockReply::text("lazy-installed and answering"));
    let result = work.path().join("result.json");
    let init = format!(
        "vim.opt.rtp:prepend({lazy:?})\n\
         local spec = (function() return {spec} end)()\n\
         spec[1] = nil\n\
         spec.dir = {plugin:?}\n\
         spec.opts = {{ install = {{ url = {url:?} }},\n\
           provider = {{ api = 'openai', base_url = {base:?}, model = 'mock-model', max_retries = 0 }} }}\n\
         require('lazy').setup({{ spec = {{ spec }}, root = {plugins:?}, lockfile = {lockfile:?},\n\
           install = {{ missing = false }}, checker = {{ enabled = false }},\n\
           change_detection = {{ enabled = false }}, rocks = {{ enabled = false }} }})\n",
        lazy = lazy.display().to_string(),
        spec = common::readme_lazy_spec(),
        plugin = plugin.display().to_string(),
        url = format!("{}/v{{version}}", server.url()),
        base = mock.openai_base_url(),
        plugins = work.path().join("lazy").display().to_string(),
        lockfile = work.path().join("lazy-lock.json").display().to_string(),
    );
    let init_file = work.path().join("init.lua");
    std::fs::write(&init_file, init).unwrap();
    let probe = format!(
        "lua require('lazy').build({{ plugins = {{ 'handoff.nvim' }}, wait = true, show = false }}) \
         local done = false \
         vim.api.nvim_create_autocmd('User', {{ pattern = 'HandoffAgentEnd', callback = function() done = true end }}) \
         require('handoff').prompt('hello') \
         vim.wait(20000, function() return done end, 20) \
         vim.fn.writefile({{ vim.json.encode({{ done = done, source = (require('handoff.host').locate() or {{}}).source }}) }}, {result:?})"
    );
    let mut cmd = common::clean_command(common::nvim::nvim_bin());
    for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("XDG_CACHE_HOME", "cache")] {
        std::fs::create_dir_all(work.path().join(sub)).unwrap();
        cmd.env(var, work.path().join(sub));
    }
    let status = tokio::process::Command::from(cmd)
        .current_dir(work.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove("OPENAI_API_KEY")
        .args(["--headless", "-n", "-i", "NONE", "-u"])
        .arg(&init_file)
        .args(["-c", &probe, "-c", "qa!"])
        .stdin(std::process::Stdio::null())
        .status();
    let status = tokio::time::timeout(Duration::from_secs(60), status).await.expect("lazy.nvim's build hung").unwrap();
    assert!(status.success());
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&result).expect("the probe ran")).unwrap();
    assert_eq!(r, json!({ "done": true, "source": "download" }));
    assert_eq!(server.requests(), vec![format!("GET /v{VERSION}/{asset} HTTP/1.1")]);
    assert_eq!(sha256(&work.path().join("data/nvim/handoff/bin/handoff-nvim")), sha256(Path::new(HOST_BIN)));
}
