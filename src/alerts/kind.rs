//! What an alert is about (`AlertKind`) and what was done about it (`Action`): each named once,
//! with its meaning.

use serde::{Deserialize, Serialize};

/// What an alert is about, as `alerts --json` spells it (`kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertKind {
    /// A new executable in a writable PATH directory that shadows a later command (`watch`).
    PathShadow,
    /// A new executable in a writable PATH directory, shadowing nothing.
    PathNew,
    /// An executable of the baseline changed.
    PathChanged,
    /// A hook planted in a repository's hooks directory.
    GitHook,
    /// A new exec-capable key in a repository's config, or a config git refuses to read.
    GitConfig,
    /// A new file matching a configured `hidden` glob, visible in the jail until the next session.
    SecretVisible,
    /// A host the allowlist proxy refused (`net`).
    NetworkDenied,
    /// A new name off a measured agent state directory's allowlist (`jail::statedir`,
    /// `jail::statesweep`).
    AgentStateNotAllowed,
    /// A script named by the human's agent settings, written in the jail (`jail::statedir`).
    AgentStateScript,
    /// A file linked to a name outside the writable roots that could be neither copied nor sealed
    /// (`jail::hardlinks`).
    HardLinkOpen,
    /// A workspace entry point sealed one by one and replaced outside (`jail::detached`).
    SealDetached,
    /// A unix socket opened outside the jail during the session where the jail could reach it,
    /// covered there (`jail::sockets::later`).
    SocketOpened,
    /// A repository's config that could not be diverted, or came back replaced (`jail::gitcopy`).
    GitConfigDiversion,
    /// The jail's copy of a config that git refuses to read: not merged back.
    GitConfigRefused,
    /// Keys of the jail's copy of a config kept at your values: exec-capable ones.
    GitConfigKept,
    /// The jail's `~/.claude.json` was not merged back (`jail::home`).
    MergeRefused,
    /// A workspace-root entry point nothing installed reads, created in the session (`jail::plan`).
    EntryPointCreated,
    /// A request the filtering ssh agent refused: a signature the `[ssh]` policy does not allow, or
    /// a change to the agent (`ssh_agent`).
    SshRefused,
    /// A request the Docker filter refused: an endpoint it does not pass, a container's create
    /// with a host mount, privileges or a host namespace, another's container (`docker`).
    DockerRefused,
    /// Something a session would have handed back that is more than data, held for review
    /// (`crate::held`): the alert's id is the held item's.
    Held,
    /// A kind this version does not know (written by another one): kept as it was written.
    Other(String),
}

impl AlertKind {
    /// Every kind this version writes.
    pub const ALL: &[AlertKind] = &[
        AlertKind::PathShadow,
        AlertKind::PathNew,
        AlertKind::PathChanged,
        AlertKind::GitHook,
        AlertKind::GitConfig,
        AlertKind::SecretVisible,
        AlertKind::NetworkDenied,
        AlertKind::AgentStateNotAllowed,
        AlertKind::AgentStateScript,
        AlertKind::HardLinkOpen,
        AlertKind::SealDetached,
        AlertKind::SocketOpened,
        AlertKind::GitConfigDiversion,
        AlertKind::GitConfigRefused,
        AlertKind::GitConfigKept,
        AlertKind::MergeRefused,
        AlertKind::EntryPointCreated,
        AlertKind::SshRefused,
        AlertKind::DockerRefused,
        AlertKind::Held,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            AlertKind::PathShadow => "path-shadow",
            AlertKind::PathNew => "path-new",
            AlertKind::PathChanged => "path-changed",
            AlertKind::GitHook => "git-hook",
            AlertKind::GitConfig => "git-config",
            AlertKind::SecretVisible => "secret-visible",
            AlertKind::NetworkDenied => "network-denied",
            AlertKind::AgentStateNotAllowed => "agent-state-not-allowed",
            AlertKind::AgentStateScript => "agent-state-script",
            AlertKind::HardLinkOpen => "hard-link-open",
            AlertKind::SealDetached => "seal-detached",
            AlertKind::SocketOpened => "socket-opened",
            AlertKind::GitConfigDiversion => "git-config-diversion",
            AlertKind::GitConfigRefused => "git-config-refused",
            AlertKind::GitConfigKept => "git-config-kept",
            AlertKind::MergeRefused => "merge-refused",
            AlertKind::EntryPointCreated => "entry-point-created",
            AlertKind::SshRefused => "ssh-refused",
            AlertKind::DockerRefused => "docker-refused",
            AlertKind::Held => "held",
            AlertKind::Other(s) => s,
        }
    }

    fn parse(s: &str) -> AlertKind {
        Self::ALL
            .iter()
            .find(|k| k.as_str() == s)
            .cloned()
            .unwrap_or_else(|| AlertKind::Other(s.to_string()))
    }
}

impl std::fmt::Display for AlertKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for AlertKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AlertKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d).map(|s| AlertKind::parse(&s))
    }
}

/// What was done about what an alert reports (`action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Alerted,
    Quarantined,
    Neutralised,
    /// Carrying out the verdict failed: the file is where it was.
    Failed,
    /// Refused as it happened (a connection).
    Denied,
    /// Kept aside for the human's review (`crate::held`).
    Held,
}

impl Action {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Alerted => "alerted",
            Action::Quarantined => "quarantined",
            Action::Neutralised => "neutralised",
            Action::Failed => "failed",
            Action::Denied => "denied",
            Action::Held => "held",
        }
    }
}
