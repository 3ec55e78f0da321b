//! External agents (Claude Code, Codex, Gemini, our own `handoff-nvim acp`…) driven over the
//! Agent Client Protocol: we are the client. The agent runs as a child in a process group the
//! host ends (`connection`); a prompt's `session/update`s are shown and recorded in our own
//! session file in pi's format, provider `acp`, model the agent's name (`record`), so
//! `session_query`, pi, `/back` and the handoff work on it; its requests are served by us
//! (`client`): `session/request_permission` through our consent policy, `fs/*` through our file
//! access, `terminal/*` through our sandboxed bash with our environment policy (`terminal`).
//! `handoff` hands such a session off: the agent writes the document with our instruction, our
//! facts are added, and the next session starts on the same agent, another one, or ours.
//!
//! A library of the front ends (the CLI, the Neovim host): it uses the engine (`handoff-core`)
//! and the ACP wire names (`handoff-acp-wire`),
//! and the engine knows nothing of it.

mod client;
mod connection;
pub mod handoff;
pub mod offers;
mod originals;
mod record;
mod runner;
mod terminal;

use std::collections::BTreeMap;

pub use client::{probe, serve, AgentInfo, ExternalSession, Services, Shown, Turn};
pub use originals::EditOriginals;
pub use runner::Runner;
pub use terminal::Terminals;
pub use record::{agent_of, changes_files, record_agent_spec, AgentEntry, AGENT_ENTRY};

use handoff_core::config::Settings;

/// The provider recorded on an external agent's replies (the model is the agent's name).
pub const PROVIDER: &str = "acp";

/// Our own agent's name as `--to` takes it: the next session runs on our engine.
pub const OURS: &str = "ours";

/// Failures of driving an external agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("no agent named {name:?} is configured (agents = {{ {name} = {{ command = {{ … }} }} }}), and it is not a command either")]
    Unknown { name: String },
    #[error("the agent {name:?} has an empty command")]
    NoCommand { name: String },
    #[error("cannot start the agent {name:?} (`{command}`): {error}")]
    Start { name: String, command: String, error: String },
    #[error("the agent {name:?} went away (its process ended or closed its output)")]
    Gone { name: String },
    #[error("the agent answered with an error {code}: {message}")]
    Answered { code: i64, message: String },
    #[error("{0}")]
    NotOffered(String),
    /// An agent whose program is not found ([`AgentSpec::missing`] says which).
    #[error("{0}")]
    Missing(String),
    #[error("the agent {name:?} asks to sign in, and no key of its environment signed it in: set the variable a way names in its env (agents.{name}.env), or sign in with the agent's own CLI. Its ways: {ways}")]
    SignIn { name: String, ways: String },
    #[error("the agent broke the protocol: {0}")]
    Protocol(String),
    #[error(transparent)]
    Session(#[from] handoff_core::session::SessionError),
}

/// An agent to start: its name (what the session records as its model), its command line and
/// the variables it gets beside the host's environment.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentSpec {
    pub name: String,
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl AgentSpec {
    /// `name_or_command`: a name of the settings' `agents`, else a command line run by `sh`
    /// (`handoff-nvim acp --yes`), named by its first word.
    pub fn resolve(settings: &Settings, name_or_command: &str) -> Result<AgentSpec, AgentError> {
        let wanted = name_or_command.trim();
        if let Some(agent) = settings.agents.as_ref().and_then(|agents| agents.get(wanted)) {
            if agent.command.is_empty() {
                return Err(AgentError::NoCommand { name: wanted.to_string() });
            }
            return Ok(AgentSpec { name: wanted.to_string(), command: agent.command.clone(), env: agent.env.clone() });
        }
        let Some(first) = program_word(wanted) else {
            return Err(AgentError::Unknown { name: wanted.to_string() });
        };
        if !wanted.contains(char::is_whitespace) && !first.contains('/') && which(first).is_none() {
            return Err(AgentError::Unknown { name: wanted.to_string() });
        }
        let name = std::path::Path::new(first).file_name().map_or(first.to_string(), |n| n.to_string_lossy().into_owned());
        Ok(AgentSpec {
            name,
            command: vec!["/bin/sh".into(), "-c".into(), format!("exec {wanted}")],
            env: BTreeMap::new(),
        })
    }

    /// The configured agents, by name.
    pub fn configured(settings: &Settings) -> Vec<AgentSpec> {
        settings
            .agents
            .iter()
            .flatten()
            .map(|(name, agent)| AgentSpec { name: name.clone(), command: agent.command.clone(), env: agent.env.clone() })
            .collect()
    }

    /// Why the agent cannot start here: its program is not found (the error names it).
    pub fn missing(&self) -> Option<String> {
        match self.program() {
            Some(_) => None,
            None => Some(format!("the command {:?} of agent {:?} is not found", self.program_name().unwrap_or_default(), self.name)),
        }
    }

    /// The program the command runs, as written: for a command line (`resolve`'s `exec LINE`),
    /// its program; for any other shell script, the shell.
    fn program_name(&self) -> Option<String> {
        match self.command.as_slice() {
            [sh, c, line] if sh == "/bin/sh" && c == "-c" => Some(line.strip_prefix("exec ").and_then(program_word).unwrap_or(sh).to_string()),
            [first, ..] => Some(first.clone()),
            [] => None,
        }
    }

    /// Where the command's program is, if it is found (on `PATH` for a bare name).
    pub fn program(&self) -> Option<std::path::PathBuf> {
        which(&self.program_name()?)
    }
}

/// The program a command line runs: its first word past `env` and `NAME=value` assignments.
fn program_word(line: &str) -> Option<&str> {
    line.split_whitespace().find(|word| *word != "env" && !word.contains('='))
}

/// `program` as the system finds it: a path as it is, a bare name on `PATH`.
fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(program);
    if program.contains('/') {
        return path.is_file().then(|| path.to_path_buf());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
