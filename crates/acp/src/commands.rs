//! The slash commands as an ACP client sees them: the controller's table advertised
//! (`available_commands_update`) with the prompt templates, and a command typed with `\`.

use std::path::PathBuf;
use std::time::Duration;

use super::updates::Updates;
use super::wire;
use handoff_core::controller::SlashCommand;

/// How long after answering `session/new` (or `session/load`) the command list is sent: Zed
/// drops updates for a session it has not registered yet.
pub(super) const COMMANDS_DELAY: Duration = Duration::from_millis(50);

/// The command list, a moment after the session is answered: the controller's command table,
/// then the prompt templates of `templates_dir` (`/name args` expands one).
pub(super) fn send_commands_later(updates: Updates, templates_dir: Option<PathBuf>) {
    handoff_core::task::spawn("the ACP command list", async move {
        let templates = match templates_dir {
            Some(dir) => tokio::task::spawn_blocking(move || handoff_core::agent::templates::list(&dir)).await.unwrap_or_default(),
            None => Vec::new(),
        };
        tokio::time::sleep(COMMANDS_DELAY).await;
        let mut commands: Vec<wire::AvailableCommand> = SlashCommand::ALL
            .into_iter()
            .map(|slash| {
                let command = wire::AvailableCommand::new(slash.name(), slash.help());
                match slash.args() {
                    Some(args) => command.input(wire::AvailableCommandInput::Unstructured(wire::UnstructuredCommandInput::new(args))),
                    None => command,
                }
            })
            .collect();
        for template in templates {
            if !commands.iter().any(|c| c.name == template.name) {
                commands.push(wire::AvailableCommand::new(template.name, template.description));
            }
        }
        updates.send(wire::SessionUpdate::AvailableCommandsUpdate(wire::AvailableCommandsUpdate::new(commands)));
    });
}

/// The input as the controller takes it: a client that types commands with `\` (codecompanion)
/// means the table's `/name`; anything else is as typed.
pub(super) fn as_typed(input: &str) -> String {
    let trimmed = input.trim_start();
    if let Some(rest) = trimmed.strip_prefix('\\') {
        let name = rest.split(char::is_whitespace).next().unwrap_or(rest);
        if SlashCommand::named(name).is_some() {
            return format!("/{rest}");
        }
    }
    input.to_string()
}
