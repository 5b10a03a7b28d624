//! The battery's end when it is interrupted: Ctrl-C on its terminal (SIGINT), its terminal closed
//! (SIGHUP), or SIGTERM (what a test that runs it sets as its parent-death signal).
//!
//! Guards against a battery that dies and leaves its case running: every command it starts leads a
//! session of its own (child.rs), so the terminal's SIGINT never reaches it, and the command's
//! time-out was the battery's to enforce. Without this, a Ctrl-C left the case's launcher, jail and
//! watcher running for up to its whole time-out, and its scene (a HOME and a workspace under
//! `/var/tmp`) behind for good. On a signal the command's group is killed, the scene removed, and
//! the battery exits with 128 + the signal; no new command starts once that has begun.

use crate::process::signal_group;
use rustix::process::Signal;
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the scene's removal is retried while the killed group's last processes end.
const REMOVE_FOR: Duration = Duration::from_secs(3);

struct State {
    stopping: bool,
    /// The running command's process group (its pid: it leads its session).
    group: Option<i32>,
    /// The running case's scene, removed on a signal (not with `--keep`).
    scene: Option<PathBuf>,
}

static STATE: Mutex<State> = Mutex::new(State {
    stopping: false,
    group: None,
    scene: None,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    // A poisoned lock still holds the facts: the handler must act on them regardless.
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Handle SIGINT, SIGTERM and SIGHUP for the rest of the battery's run.
pub(super) fn install() -> io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("battery-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                stop(sig);
            }
        })?;
    Ok(())
}

fn stop(sig: i32) -> ! {
    // The lock is kept to the exit: `spawn` cannot start another command meanwhile.
    let mut s = state();
    s.stopping = true;
    if let Some(group) = s.group.take() {
        if let Err(e) = signal_group(group, Signal::KILL) {
            tracing::warn!("ending the interrupted battery command: {e}");
        }
    }
    if let Some(scene) = s.scene.take() {
        remove(&scene);
    }
    eprintln!("claude-sandbox battery: interrupted (signal {sig}); the running case was ended and its scene removed");
    std::process::exit(128 + sig);
}

/// Remove `dir`, again while processes of the killed group may still be writing into it.
fn remove(dir: &Path) {
    let t0 = Instant::now();
    while dir.exists() && t0.elapsed() < REMOVE_FOR {
        super::remove_scene(dir);
        if dir.exists() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if dir.exists() {
        eprintln!(
            "claude-sandbox battery: could not remove {}; remove it by hand",
            dir.display()
        );
    }
}

/// Start `c` and remember its group, unless the battery is stopping.
pub(super) fn spawn(c: &mut Command) -> io::Result<Child> {
    let mut s = state();
    if s.stopping {
        return Err(io::Error::other("the battery is stopping"));
    }
    let child = c.spawn()?;
    s.group = i32::try_from(child.id()).ok();
    Ok(child)
}

/// The command led by `pid` was reaped (or abandoned): its group is no longer ours to kill.
pub(super) fn ended(pid: u32) {
    let mut s = state();
    if s.group.is_some_and(|g| u32::try_from(g).ok() == Some(pid)) {
        s.group = None;
    }
}

/// The scene to remove on a signal (`None` once the case has removed or kept it).
pub(super) fn scene(dir: Option<PathBuf>) {
    state().scene = dir;
}
