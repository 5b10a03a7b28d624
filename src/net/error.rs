//! The network part's failures, typed: a bad host pattern, a proxy that cannot listen, a bridge that
//! cannot start. Each message names the cause and what to give or check instead; the launch wraps
//! them (`Error::Jail`, `Error::Config`) with the way to `doctor`.

use std::path::PathBuf;

/// An allow or deny entry that is not a host pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a host pattern: give a name (api.example.com), a `*.` suffix (*.example.org) or an \
     IP address"
)]
pub(crate) struct BadPattern(pub String);

/// The launcher's proxy could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error(transparent)]
    Pattern(#[from] BadPattern),
    #[error("creating {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("binding {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `[secrets] inject`: the session CA, the roots or the jail's bundle.
    #[error(
        "[secrets] inject: {0}; check the file SSL_CERT_FILE names (or \
         /etc/ssl/certs/ca-certificates.crt), or remove `inject`"
    )]
    Inject(String),
}

/// The in-jail bridge to the proxy could not be started (the command is not run).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BridgeError {
    #[error(
        "cannot listen on 127.0.0.1:{port} in the jail for the network proxy: {source}; run \
         `claude-sandbox doctor` for the cause"
    )]
    Listen { port: u16, source: std::io::Error },
    #[error(
        "cannot listen on 127.0.0.1:{port} in the jail for the bridged loopback port ([network] \
         loopback, or a live IDE's lock file): {source}; a port below 1024 cannot be bridged for an \
         ordinary user: have the service listen on a higher port"
    )]
    Loopback { port: u16, source: std::io::Error },
    #[error("cannot start the network bridge: {0}")]
    Fork(std::io::Error),
}
