//! The proxy's caps (issue 34 item 0): what one session's proxy may hold at once, so that the
//! jail cannot spend the descriptors and threads the guard needs.

use serde::{Deserialize, Serialize};

/// What one session's proxy may hold at once (docs/network.md, "Limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Limits {
    /// Connections whose request head is still coming; one more closes the oldest.
    pub pending: usize,
    /// Connections being served (a thread and two descriptors each); one more is refused.
    pub tunnels: usize,
    /// The whole request head (the SOCKS5 handshake) must arrive within this.
    pub head_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            pending: 256,
            tunnels: 256,
            head_ms: 10_000,
        }
    }
}

impl Limits {
    /// `pending=N,tunnels=N,head_ms=N` over the defaults (`host::TEST_NET_LIMITS`, tests only).
    pub(super) fn with(mut self, spec: &str) -> Limits {
        for (k, v) in spec.split(',').filter_map(|kv| kv.split_once('=')) {
            let Ok(n) = v.trim().parse::<u64>() else {
                continue;
            };
            let n_usize = usize::try_from(n).unwrap_or(usize::MAX);
            match k.trim() {
                "pending" => self.pending = n_usize.max(1),
                "tunnels" => self.tunnels = n_usize.max(1),
                "head_ms" => self.head_ms = n.max(1),
                _ => {}
            }
        }
        self
    }

    /// Within `nofile` descriptors: a pending connection holds one, a tunnel two (and a third
    /// while it resolves), and a margin is kept for the listener, the log and the alert store.
    pub(super) fn within(self, nofile: u64) -> Limits {
        let budget = usize::try_from(nofile.saturating_sub(64) / 4)
            .unwrap_or(usize::MAX)
            .max(1);
        Limits {
            pending: self.pending.min(budget),
            tunnels: self.tunnels.min(budget),
            ..self
        }
    }
}
