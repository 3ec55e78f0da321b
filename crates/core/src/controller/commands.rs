//! The slash commands, once: every command the prompt takes, with its argument and its help.
//! The controller parses input by this table ([`parse`], through `classify_input`), the ACP
//! agent advertises it (`available_commands_update`), the plugin completes it
//! (`lua/handoff/slash_commands.lua`, generated from it by the Neovim front end and checked by
//! `tests/commands.rs`), and the CLI's `prompt` runs what it parses. A new command is a new
//! variant here: every `match` on it, the parser's included, must then say what it does.

/// One slash command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlashCommand {
    Handoff,
    Pin,
    Pins,
    Unpin,
    Back,
    New,
    Sessions,
    Model,
    Thinking,
}

impl SlashCommand {
    /// Every command, in the order they are offered.
    pub const ALL: [SlashCommand; 9] = [
        SlashCommand::Handoff,
        SlashCommand::Pin,
        SlashCommand::Pins,
        SlashCommand::Unpin,
        SlashCommand::Back,
        SlashCommand::New,
        SlashCommand::Sessions,
        SlashCommand::Model,
        SlashCommand::Thinking,
    ];

    /// The name typed after `/`.
    pub fn name(self) -> &'static str {
        match self {
            SlashCommand::Handoff => "handoff",
            SlashCommand::Pin => "pin",
            SlashCommand::Pins => "pins",
            SlashCommand::Unpin => "unpin",
            SlashCommand::Back => "back",
            SlashCommand::New => "new",
            SlashCommand::Sessions => "sessions",
            SlashCommand::Model => "model",
            SlashCommand::Thinking => "thinking",
        }
    }

    /// Its argument as the prompt shows it (`[…]` optional, `{…}` required); `None`: it takes
    /// none, and only the name alone is the command (`/pins x` is a prompt, maybe a template).
    pub fn args(self) -> Option<&'static str> {
        match self {
            SlashCommand::Handoff => Some("[focus instructions]"),
            SlashCommand::Pin => Some("{text}"),
            SlashCommand::Unpin => Some("{number}"),
            SlashCommand::Model => Some("[name]"),
            SlashCommand::Thinking => Some("[off|minimal|low|medium|high]"),
            SlashCommand::Pins | SlashCommand::Back | SlashCommand::New | SlashCommand::Sessions => None,
        }
    }

    /// What it does, in one line.
    pub fn help(self) -> &'static str {
        match self {
            SlashCommand::Handoff => "Hand off: write a handoff document and continue in a new session that starts from it",
            SlashCommand::Pin => "Pin a text for the whole task: sent with every request, carried whole by every handoff",
            SlashCommand::Pins => "List the pins, numbered",
            SlashCommand::Unpin => "Remove a pin (its number in /pins)",
            SlashCommand::Back => "Go back to the session this one was handed off from",
            SlashCommand::New => "Start a new, empty session",
            SlashCommand::Sessions => "List the sessions of this folder, newest first (the editor picks one to resume)",
            SlashCommand::Model => "Switch the model (no name: say which is in use)",
            SlashCommand::Thinking => "Set how hard the model thinks (no level: say which is in force)",
        }
    }

    /// The command called `name` (without the `/`).
    pub fn named(name: &str) -> Option<SlashCommand> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// `input` as a command and its argument (whitespace around it dropped; empty when none was
/// given), or `None` when it is no command: a prompt. Only input that starts with `/name`
/// (whitespace before it aside) is a command, and a command that takes no argument only alone.
pub fn parse(input: &str) -> Option<(SlashCommand, &str)> {
    let line = input.trim_start().strip_prefix('/')?;
    let (name, arg) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let command = SlashCommand::named(name)?;
    let arg = arg.trim();
    if command.args().is_none() && !arg.is_empty() {
        return None;
    }
    Some((command, arg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        for command in SlashCommand::ALL {
            assert_eq!(SlashCommand::named(command.name()), Some(command));
            assert_eq!(parse(&format!("/{}", command.name())), Some((command, "")));
        }
    }

    #[test]
    fn a_command_is_its_name_at_the_start_then_whitespace_or_the_end() {
        assert_eq!(parse("/handoff"), Some((SlashCommand::Handoff, "")));
        assert_eq!(parse("  /handoff  focus on tests "), Some((SlashCommand::Handoff, "focus on tests")));
        assert_eq!(parse("/pin\nline one\nline two"), Some((SlashCommand::Pin, "line one\nline two")));
        assert_eq!(parse("/handoffs"), None);
        assert_eq!(parse("please /handoff"), None);
        // One that takes no argument is a command only alone.
        assert_eq!(parse(" /back "), Some((SlashCommand::Back, "")));
        assert_eq!(parse("/pins x"), None);
        assert_eq!(parse("/new session please"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn the_thinking_hint_names_every_level() {
        let levels: Vec<&str> = crate::provider::ThinkingLevel::ALL.iter().map(|l| l.as_str()).collect();
        assert_eq!(SlashCommand::Thinking.args(), Some(format!("[{}]", levels.join("|")).as_str()));
    }
}
