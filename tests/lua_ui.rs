//! The Lua side's fast UI tests (tests/lua/*_spec.lua) against a fake host: no binary, no
//! model, a headless Neovim running `tests/lua/run.lua`. The end-to-end tests beside this one
//! drive the real host.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[test]
fn lua_ui_specs_pass_against_the_fake_host() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::nvim::nvim_bin())
        .args(["--clean", "--headless", "-l"])
        .arg(format!("{root}/tests/lua/run.lua"))
        .current_dir(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .expect("run Neovim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "Lua UI specs failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("\n0 passed"), "no spec ran:\n{stdout}");
}
