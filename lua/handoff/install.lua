--- Installing the host binary without a Rust toolchain (`:HandoffInstall`, and every plugin
--- manager's build hook): the release's prebuilt binary for this OS and architecture, checked
--- against the SHA-256 that the plugin's own git history pins (`lua/handoff/release.lua`, written
--- by `scripts/release.sh` and committed with the release), never against a checksum fetched
--- beside the binary. Downloaded with curl into a temporary file, checked, run once
--- (`--version`: it must be the release's version, settings and target), fsynced and renamed
--- over the installed one, whose copy is kept for `rollback`. Without a network or an asset for
--- this platform, and with cargo, it builds from the checkout instead; otherwise one message
--- names the URL, the checksum and the steps by hand.
---
--- Install time only: nothing here runs when Neovim starts or the host is first used (the
--- host's lookup, `handoff.host.locate`, only reads the installed binary's manifest).
local M = {}

--- The module's state, private (mini.nvim's `H`).
local H = {}

local uv = vim.uv or vim.loop

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = "handoff.nvim" })
end

--- The executable's name on this system.
function M.exe_name()
  return vim.fn.has("win32") == 1 and "handoff-nvim.exe" or "handoff-nvim"
end

--- The folder the installed binary lives in (outside the plugin's checkout, so that a plugin
--- manager's clean reinstall or a read-only checkout does not lose it).
function M.dir()
  return vim.fn.stdpath("data") .. "/handoff/bin"
end

--- The installed binary, its manifest, and the previous one's (kept for `rollback`).
local function paths(dir)
  dir = dir or M.dir()
  return {
    dir = dir,
    bin = dir .. "/" .. M.exe_name(),
    manifest = dir .. "/install.json",
    prev_dir = dir .. "/previous",
    prev_bin = dir .. "/previous/" .. M.exe_name(),
    prev_manifest = dir .. "/previous/install.json",
  }
end

local function read_json(path)
  local ok, lines = pcall(vim.fn.readfile, path)
  if not ok or #lines == 0 then
    return nil
  end
  local ok2, value = pcall(vim.json.decode, table.concat(lines, "\n"))
  return ok2 and type(value) == "table" and value or nil
end

---@class handoff.InstallManifest
---@field version string
---@field schema_digest string
---@field target string
---@field sha256 string
---@field source "download"|"build"
---@field url? string where it was downloaded from
---@field commit? string the checkout's commit it was built at
---@field installed_at string

--- `bin` and its manifest when it is an executable, else nil: read, never run.
---@return { path: string, manifest: handoff.InstallManifest }?
local function binary_at(bin, manifest)
  if vim.fn.executable(bin) ~= 1 then
    return nil
  end
  return { path = bin, manifest = read_json(manifest) or {} }
end

--- The installed binary and its manifest (nil when none is installed).
function M.installed()
  local p = paths()
  return binary_at(p.bin, p.manifest)
end

--- The previous installed binary, kept for `rollback`, or nil.
function M.previous()
  local p = paths()
  return binary_at(p.prev_bin, p.prev_manifest)
end

--- The release targets that run on this OS and architecture, best first (on Linux the static
--- musl build, then a glibc one should a release carry it), or nil and why not.
---@return string[]?, string?
function M.targets()
  local u = uv.os_uname()
  local machine = (u.machine or ""):lower()
  local arch = ({ x86_64 = "x86_64", amd64 = "x86_64", x64 = "x86_64", aarch64 = "aarch64", arm64 = "aarch64" })[machine]
  local os = u.sysname or "?"
  if not arch then
    return nil, ("no release binary for the %s architecture"):format(u.machine or "?")
  end
  if os == "Linux" then
    return { arch .. "-unknown-linux-musl", arch .. "-unknown-linux-gnu" }
  elseif os == "Darwin" then
    return { arch .. "-apple-darwin" }
  elseif os:match("^Windows") and arch == "x86_64" then
    return { arch .. "-pc-windows-msvc" }
  end
  return nil, ("no release binary for %s on %s"):format(os, u.machine or "?")
end

--- The `install` settings (`install.url`, `install.curl_args`).
local function settings()
  return require("handoff.config").options.install
end

--- The release this checkout pins (`lua/handoff/release.lua`, read afresh: a plugin update
--- changes it while the editor runs), or nil and why not.
---@return table?, string?
function M.release()
  local file = require("handoff.host").root() .. "/lua/handoff/release.lua"
  if vim.fn.filereadable(file) ~= 1 then
    return nil, "this checkout pins no release (no lua/handoff/release.lua)"
  end
  local ok, release = pcall(dofile, file)
  if not ok or type(release) ~= "table" or type(release.version) ~= "string" or type(release.assets) ~= "table" then
    return nil, ("lua/handoff/release.lua cannot be read: %s"):format(ok and "no version or assets" or tostring(release))
  end
  return release
end

--- The URL of `asset` of `release`: `install.url` (or the release's own), `{version}` replaced,
--- the asset's file name appended.
function M.asset_url(release, asset, base)
  base = base or settings().url or release.url
  if type(base) ~= "string" or base == "" then
    return nil
  end
  base = base:gsub("{version}", release.version):gsub("/+$", "")
  return base .. "/" .. asset.file
end

--- Runs the installer's steps in a coroutine of its own; `exec` resumes it when a process ends.
local function exec(cmd, opts)
  local co = coroutine.running()
  local ok, err = pcall(vim.system, cmd, opts or { text = true }, function(res)
    vim.schedule(function()
      local resumed, why = coroutine.resume(co, res)
      if not resumed then
        notify("handoff.nvim: the installer failed: " .. tostring(why), vim.log.levels.ERROR)
      end
    end)
  end)
  if not ok then
    return { code = -1, stdout = "", stderr = tostring(err) }
  end
  return coroutine.yield()
end

--- The SHA-256 of a file, by the first tool this system has (Neovim's own `sha256()` takes no
--- bytes with a NUL in them), or nil and why not.
local function sha256_file(path)
  local tools = {
    { "sha256sum", "--", path },
    { "shasum", "-a", "256", path },
    { "openssl", "dgst", "-sha256", "-r", path },
    { "certutil", "-hashfile", path, "SHA256" },
  }
  for _, cmd in ipairs(tools) do
    if vim.fn.executable(cmd[1]) == 1 then
      local res = exec(cmd)
      -- The digest is the first 64-digit word (certutil's first line is a heading).
      local hex
      for word in (res.stdout or ""):lower():gmatch("%x+") do
        if #word == 64 then
          hex = word
          break
        end
      end
      if res.code == 0 and hex then
        return hex
      end
      return nil, ("%s failed: %s"):format(cmd[1], vim.trim(res.stderr or ""))
    end
  end
  return nil, "no sha256sum, shasum, openssl or certutil to check the download with"
end

--- Writes a file's data to the disk before it is renamed into place (a crash then leaves the
--- old binary or the new one, never a torn one).
local function fsync(path)
  local fd = uv.fs_open(path, "r", 0)
  if fd then
    uv.fs_fsync(fd)
    uv.fs_close(fd)
  end
end

local function write_json(path, value)
  local tmp = path .. ".tmp" .. uv.os_getpid()
  local fd, err = uv.fs_open(tmp, "w", 420)
  if not fd then
    return nil, err
  end
  uv.fs_write(fd, vim.json.encode(value) .. "\n")
  uv.fs_fsync(fd)
  uv.fs_close(fd)
  return uv.fs_rename(tmp, path)
end

--- What a host's `--version` output says: `{ version, schema_digest, target }` (the last two
--- nil for a binary older than them), or nil when it is not a host's.
---@param out string
---@return { version: string, schema_digest?: string, target?: string }?
function M.parse_version(out)
  local version = out:match("^handoff%-nvim (%S+)")
  if not version then
    return nil
  end
  return { version = version, schema_digest = out:match("\nschema (%x+)"), target = out:match("\ntarget (%S+)") }
end

--- What `bin --version` says (`parse_version`), or nil and why not.
local function identify(bin)
  local res = exec({ bin, "--version" })
  local out = res.stdout or ""
  local id = res.code == 0 and M.parse_version(out)
  if not id then
    return nil, ("it does not run here (%s)"):format(vim.trim((res.stderr ~= "" and res.stderr) or out or ""):sub(1, 200))
  end
  return id
end

--- Puts `tmp` (a checked binary) in place of the installed one with `manifest`, keeping the
--- installed one and its manifest as the previous. Each step a rename, so the installed binary
--- is always a whole one.
local function put_in_place(tmp, manifest)
  local p = paths()
  fsync(tmp)
  if vim.fn.filereadable(p.bin) == 1 then
    vim.fn.mkdir(p.prev_dir, "p")
    uv.fs_unlink(p.prev_bin)
    -- A hard link keeps the installed binary where it is until the rename below replaces it.
    if not uv.fs_link(p.bin, p.prev_bin) then
      uv.fs_copyfile(p.bin, p.prev_bin)
    end
    uv.fs_unlink(p.prev_manifest)
    if vim.fn.filereadable(p.manifest) == 1 then
      uv.fs_copyfile(p.manifest, p.prev_manifest)
    end
  end
  local ok, err = uv.fs_rename(tmp, p.bin)
  if not ok then
    uv.fs_unlink(tmp)
    return nil, ("cannot move the binary into %s: %s"):format(p.dir, tostring(err))
  end
  local okm, errm = write_json(p.manifest, manifest)
  if not okm then
    return nil, ("cannot write %s: %s"):format(p.manifest, tostring(errm))
  end
  fsync(p.dir)
  return p.bin
end

local function now()
  return os.date("!%Y-%m-%dT%H:%M:%SZ")
end

--- Why a binary's `--version` does not fit the plugin, or nil (the host's handshake's words).
local function misfit(id)
  return require("handoff.host").stale_message(id.version, id.schema_digest)
end

--- The git commit the checkout is at, or nil (not a git checkout).
local function checkout_commit(root)
  local res = exec({ "git", "-C", root, "rev-parse", "HEAD" })
  return res.code == 0 and vim.trim(res.stdout) or nil
end

--- How far this checkout is past the release it pins: commits since the one that last
--- changed `release.lua` (nil without git).
local function commits_past_release(root)
  local res = exec({ "git", "-C", root, "log", "-1", "--format=%H", "--", "lua/handoff/release.lua" })
  local pin = res.code == 0 and vim.trim(res.stdout) or ""
  if pin == "" then
    return nil
  end
  local count = exec({ "git", "-C", root, "rev-list", "--count", pin .. "..HEAD" })
  return count.code == 0 and tonumber(vim.trim(count.stdout)) or nil
end

--- Downloads `asset` from `url` into a temporary file beside the installed binary and checks
--- it: the file's path and its SHA-256, or nil and `{ kind, message }`. Kind "network" (curl
--- failed: no network, no such file) lets a build take over; "checksum" is never worked around.
local function download(url, asset, opts, say)
  local p = paths()
  vim.fn.mkdir(p.dir, "p")
  local tmp = ("%s/.%s.download-%d"):format(p.dir, M.exe_name(), uv.os_getpid())
  uv.fs_unlink(tmp)
  if vim.fn.executable("curl") ~= 1 then
    return nil, { kind = "network", message = "curl is not installed" }
  end
  local cmd = { "curl", "--fail", "--location", "--silent", "--show-error", "--connect-timeout", "20", "--retry", "2", "--output", tmp }
  vim.list_extend(cmd, opts.curl_args or settings().curl_args or {})
  table.insert(cmd, url)
  say(("downloading %s"):format(url))
  local res = exec(cmd, { text = true, env = opts.env })
  if res.code ~= 0 then
    uv.fs_unlink(tmp)
    return nil, { kind = "network", message = ("curl failed (exit %d): %s"):format(res.code, vim.trim(res.stderr or "")) }
  end
  local got, why = sha256_file(tmp)
  if not got then
    uv.fs_unlink(tmp)
    return nil, { kind = "checksum", message = why }
  end
  if got ~= asset.sha256:lower() then
    uv.fs_unlink(tmp)
    return nil, {
      kind = "checksum",
      message = ("the download from %s is not the released file: its SHA-256 is %s, lua/handoff/release.lua pins %s. "
        .. "Nothing was installed; the binary in place is kept"):format(url, got, asset.sha256),
    }
  end
  uv.fs_chmod(tmp, 493) -- 0755
  return tmp, got
end

--- Builds the host from the checkout with cargo and installs the result.
local function build(root, say)
  say(("building the host with cargo in %s (a few minutes)"):format(root))
  local res = exec({ "cargo", "build", "--release", "--locked", "--bin", "handoff-nvim" }, { cwd = root, text = true })
  if res.code ~= 0 then
    local tail = vim.split(vim.trim(res.stderr or ""), "\n")
    return nil, ("cargo build failed (exit %d): %s"):format(res.code, table.concat(tail, "\n", math.max(1, #tail - 5)))
  end
  local built = root .. "/target/release/" .. M.exe_name()
  local id, why = identify(built)
  if not id then
    return nil, ("the binary cargo built (%s): %s"):format(built, why)
  end
  local p = paths()
  vim.fn.mkdir(p.dir, "p")
  local tmp = ("%s/.%s.build-%d"):format(p.dir, M.exe_name(), uv.os_getpid())
  uv.fs_unlink(tmp)
  local ok, err = uv.fs_copyfile(built, tmp)
  if not ok then
    return nil, ("cannot copy %s: %s"):format(built, tostring(err))
  end
  uv.fs_chmod(tmp, 493)
  local sum = sha256_file(tmp)
  local commit = checkout_commit(root)
  local manifest = {
    version = id.version,
    schema_digest = id.schema_digest,
    target = id.target,
    sha256 = sum,
    source = "build",
    commit = commit,
    installed_at = now(),
  }
  local bin, why2 = put_in_place(tmp, manifest)
  if not bin then
    return nil, why2
  end
  return { ok = true, binary = bin, version = id.version, source = "build", commit = commit }
end

--- The message when neither a download nor a build can be had: the URL, the checksum and the
--- steps by hand, in one notice.
local function by_hand(reason, url, asset, target)
  local dest = paths().bin
  local lines = { ("handoff.nvim: cannot install the host binary: %s, and cargo is not installed to build it."):format(reason) }
  if url and asset then
    table.insert(lines, "Install it by hand:")
    table.insert(lines, ("  curl -fLo %s %s"):format(asset.file, url))
    table.insert(lines, ("  echo '%s  %s' | sha256sum -c"):format(asset.sha256, asset.file))
    table.insert(lines, ("  mkdir -p %s && install -m 755 %s %s"):format(vim.fn.fnamemodify(dest, ":h"), asset.file, dest))
    table.insert(lines, "(the checksum is the one lua/handoff/release.lua pins), or install Rust (https://rustup.rs) and run :HandoffInstall again, or set bin = \"/path/to/handoff-nvim\".")
  else
    table.insert(lines, ("Install Rust (https://rustup.rs) and run :HandoffInstall again (it builds for %s), or set bin = \"/path/to/handoff-nvim\"."):format(target or "this system"))
  end
  return table.concat(lines, "\n")
end

--- The installer's steps, in a coroutine. Returns `{ ok, binary, version, source, error }`.
local function install(opts, say)
  local host = require("handoff.host")
  local user = host.user_bin()
  if user then
    return { ok = true, binary = user, source = "user", message = ("bin is set (%s): nothing to install"):format(user) }
  end
  local root = host.root()
  local cargo = vim.fn.executable("cargo") == 1
  if opts.build then
    if not cargo then
      return { ok = false, error = "handoff.nvim: :HandoffInstall build needs cargo (https://rustup.rs)" }
    end
    local r, why = build(root, say)
    return r or { ok = false, error = "handoff.nvim: " .. why }
  end
  local targets, why_target = M.targets()
  local release, why_release = M.release()
  local reason, target, asset, url
  if not release then
    reason = why_release
  elseif not targets then
    reason = why_target
  else
    for _, t in ipairs(targets) do
      if release.assets[t] then
        target, asset = t, release.assets[t]
        break
      end
    end
    if host.stale_message(release.version, release.schema_digest) then
      reason = ("release %s's binary does not fit this checkout (its version or settings differ)"):format(release.version)
      asset = nil
    elseif not asset then
      target = targets[1]
      reason = ("release %s has no binary for %s"):format(release.version, target)
    else
      url = M.asset_url(release, asset, opts.url)
      if not url then
        reason = "no install.url is set and lua/handoff/release.lua names none"
      end
    end
  end
  if release and asset and url then
    local past = commits_past_release(root)
    if past and past > 0 then
      say(("this checkout is %d commit%s past release %s: installing release %s's binary (the settings it takes are the same)")
        :format(past, past == 1 and "" or "s", release.version, release.version))
    end
    local tmp, got = download(url, asset, opts, say)
    if tmp then
      local id, why = identify(tmp)
      local wrong = id and (id.version ~= release.version or id.schema_digest ~= release.schema_digest or id.target ~= target)
      if not id or wrong then
        uv.fs_unlink(tmp)
        return { ok = false, error = ("handoff.nvim: the downloaded binary is checked but %s; nothing was installed"):format(
          why or ("says it is %s for %s"):format(id.version, tostring(id.target))) }
      end
      local bin, why2 = put_in_place(tmp, {
        version = release.version,
        schema_digest = release.schema_digest,
        target = target,
        sha256 = got,
        source = "download",
        url = url,
        installed_at = now(),
      })
      if not bin then
        return { ok = false, error = "handoff.nvim: " .. why2 }
      end
      return { ok = true, binary = bin, version = release.version, source = "download" }
    end
    if got.kind ~= "network" then
      return { ok = false, error = "handoff.nvim: " .. got.message }
    end
    reason = ("cannot download %s: %s"):format(url, got.message)
  end
  if cargo then
    say(reason .. ": building it instead")
    local r, why = build(root, say)
    return r or { ok = false, error = "handoff.nvim: " .. why }
  end
  return { ok = false, error = by_hand(reason, url, asset, target) }
end

--- The last result, and whether an install runs now (one at a time).
H.running = false

---@class handoff.InstallResult
---@field ok boolean
---@field binary? string
---@field version? string
---@field source? "download"|"build"|"user"
---@field error? string

--- Installs the host binary for this plugin's version: the release's (downloaded and checked
--- against the pinned checksum) or, without one, a cargo build. `opts.wait`: returns when done
--- with the result (for build hooks); else it runs in the background and tells how it ended.
--- `opts.url`, `opts.curl_args` override the `install` settings; `opts.build` builds from the
--- checkout whatever the release offers.
---@param opts? { wait?: boolean, url?: string, curl_args?: string[], build?: boolean, quiet?: boolean }
---@return handoff.InstallResult?
function M.run(opts)
  opts = opts or {}
  if H.running then
    local r = { ok = false, error = "handoff.nvim: an install is already running" }
    notify(r.error, vim.log.levels.WARN)
    return opts.wait and r or nil
  end
  H.running = true
  local result
  local function say(msg)
    if not opts.quiet then
      notify("handoff.nvim: " .. msg)
    end
  end
  local co = coroutine.create(function()
    local ok, r = pcall(install, opts, say)
    result = ok and r or { ok = false, error = "handoff.nvim: the installer failed: " .. tostring(r) }
    H.running = false
    if result.ok then
      local what = result.source == "download" and ("release %s, checksum verified"):format(result.version)
        or result.source == "build" and ("built at %s"):format(result.commit and result.commit:sub(1, 12) or "this checkout")
        or nil
      if what then
        local running_host = require("handoff.state").chan
          and "; the host running now keeps the binary it started with until it restarts" or ""
        say(("installed %s (%s)%s"):format(result.binary, what, running_host))
      elseif result.message then
        say(result.message)
      end
    else
      notify(result.error, vim.log.levels.ERROR)
    end
  end)
  local ok, err = coroutine.resume(co)
  if not ok then
    H.running = false
    result = { ok = false, error = "handoff.nvim: the installer failed: " .. tostring(err) }
    notify(result.error, vim.log.levels.ERROR)
  end
  if opts.wait then
    -- A cargo build can take many minutes on a small machine: wait as long as it takes.
    vim.wait(24 * 60 * 60 * 1000, function()
      return result ~= nil
    end, 50)
    return result
  end
end

--- Swaps the installed binary with the previous one (`:HandoffInstall rollback`); again swaps
--- them back. Returns `{ ok, binary, version, source, error }`.
---@return handoff.InstallResult
function M.rollback()
  local p = paths()
  local function fail(msg)
    notify(msg, vim.log.levels.ERROR)
    return { ok = false, error = msg }
  end
  if vim.fn.filereadable(p.prev_bin) ~= 1 then
    return fail(("handoff.nvim: no previous binary to roll back to (in %s)"):format(p.prev_dir))
  end
  local swap_bin, swap_manifest = p.dir .. "/.rollback-bin", p.dir .. "/.rollback-manifest"
  uv.fs_unlink(swap_bin)
  uv.fs_unlink(swap_manifest)
  local had = vim.fn.filereadable(p.bin) == 1
  if had and not uv.fs_link(p.bin, swap_bin) then
    uv.fs_copyfile(p.bin, swap_bin)
  end
  if vim.fn.filereadable(p.manifest) == 1 then
    uv.fs_rename(p.manifest, swap_manifest)
  end
  local ok, err = uv.fs_rename(p.prev_bin, p.bin)
  if not ok then
    return fail(("handoff.nvim: cannot roll back: %s"):format(tostring(err)))
  end
  if vim.fn.filereadable(p.prev_manifest) == 1 then
    uv.fs_rename(p.prev_manifest, p.manifest)
  end
  if had then
    uv.fs_rename(swap_bin, p.prev_bin)
  end
  if vim.fn.filereadable(swap_manifest) == 1 then
    uv.fs_rename(swap_manifest, p.prev_manifest)
  end
  fsync(p.dir)
  local m = read_json(p.manifest) or {}
  notify(("handoff.nvim: rolled back to %s (%s); the host uses it from its next start"):format(p.bin, M.describe(m)))
  return { ok = true, binary = p.bin, version = m.version, source = m.source }
end

--- Where an installed binary came from, in words (for messages and :checkhealth).
---@param m handoff.InstallManifest
function M.describe(m)
  if m.source == "download" then
    return ("downloaded release %s for %s, checksum verified against lua/handoff/release.lua%s"):format(
      tostring(m.version), tostring(m.target), m.url and (" (from " .. m.url .. ")") or "")
  elseif m.source == "build" then
    return ("built locally at commit %s, version %s for %s"):format(
      m.commit and m.commit:sub(1, 12) or "?", tostring(m.version), tostring(m.target))
  end
  return "no record of where it came from"
end

--- `:HandoffInstall [rollback|build]`.
function M.command(arg)
  if arg == nil or arg == "" then
    return M.run()
  elseif arg == "rollback" then
    return M.rollback()
  elseif arg == "build" then
    return M.run({ build = true })
  end
  notify(("handoff.nvim: :HandoffInstall takes rollback or build, not %q"):format(arg), vim.log.levels.ERROR)
end

return M
