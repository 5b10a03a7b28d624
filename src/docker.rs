//! The Docker filter: containers for a test suite from the jail without the engine's full power
//! (docs/containers.md).
//!
//! Guards against the jail using the Docker engine as root on the host: the real socket stays
//! masked (`jail::plan::masks`); with `[containers] docker = true` (system and user files only),
//! the launcher serves a filter of its own for the session (`serve`, a process outside the jail),
//! its socket bound read-only into the jail (`layout::DOCKER_DIR`) and named by the jail's
//! `$DOCKER_HOST`. It forwards only what `judge` passes: the endpoints a test suite's containers
//! need, a container's create without host mounts, privileges, host namespaces, devices or added
//! capabilities, labelled with the session; operations on the session's own containers only. At
//! the session's end the launcher removes every container labelled with the session (`Running`'s
//! drop), through the real socket. A refusal is a `docker-refused` alert.

pub(crate) mod http;
pub(crate) mod judge;
pub(crate) mod serve;

use crate::host::HostEnv;
use serde::Serialize;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[containers]` of one configuration file, as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContainersTable {
    pub docker: Option<bool>,
}

/// `[containers]` merged over the files.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Containers {
    /// The Docker filter: off by default; the workspace file may not turn it on.
    pub docker: bool,
}

/// The filter a launch runs, decided when planning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Filter {
    /// The session's directory of the socket, bound at `layout::DOCKER_DIR`.
    pub dir: PathBuf,
    /// The engine's socket (`$DOCKER_HOST` outside, else `/var/run/docker.sock`).
    pub upstream: PathBuf,
    /// The jail's network is its own: containers get none.
    pub isolated: bool,
}

/// The engine's socket as the launcher's environment names it; `Err`: why there is none.
fn upstream(env: &HostEnv) -> Result<PathBuf, String> {
    let p = match env.get_str("DOCKER_HOST") {
        Some(h) => match h.strip_prefix("unix://") {
            Some(p) if p.starts_with('/') => PathBuf::from(p),
            _ => return Err(format!("$DOCKER_HOST is {h:?}, not a unix:// socket path")),
        },
        None => PathBuf::from("/var/run/docker.sock"),
    };
    match UnixStream::connect(&p) {
        Ok(_) => Ok(p),
        Err(e) => Err(format!(
            "no Docker engine answers at {} ({e})",
            crate::escape::visible_path(&p)
        )),
    }
}

/// The filter for this launch, if `[containers] docker` is on and an engine answers.
pub(crate) fn plan(
    on: bool,
    env: &HostEnv,
    session_home: &Path,
    isolated: bool,
    warnings: &mut Vec<String>,
) -> Option<Filter> {
    if !on {
        return None;
    }
    match upstream(env) {
        Ok(upstream) => Some(Filter {
            dir: crate::runtime_dir::SessionDir::of_home(session_home).docker(),
            upstream,
            isolated,
        }),
        Err(why) => {
            warnings.push(format!(
                "[containers] docker is on but {why}: the jail has no Docker"
            ));
            None
        }
    }
}

/// The jail's environment for the filter.
pub(crate) fn jail_env() -> (String, String) {
    (
        "DOCKER_HOST".into(),
        format!(
            "unix://{}/{}",
            crate::jail::layout::DOCKER_DIR,
            crate::jail::layout::DOCKER_SOCKET
        ),
    )
}

/// `explain`'s and `doctor`'s lines.
pub fn describe(filter: Option<&Filter>, on: bool) -> Vec<String> {
    let Some(f) = filter else {
        return vec![if on {
            "docker: none — [containers] docker is on but no engine answers".into()
        } else {
            "docker: none — the Docker socket is masked (set [containers] docker = true for a \
             filtered one)"
                .into()
        }];
    };
    vec![
        format!(
            "docker: filtered ({}) — containers without host mounts, privileges, host namespaces, \
             devices or added capabilities; the session's own only, removed at its end",
            crate::escape::visible_path(&f.upstream)
        ),
        format!(
            "  containers' network: {}",
            if f.isolated {
                "none (the jail's network is its own)"
            } else {
                "the default bridge, ports on 127.0.0.1 (egress not filtered by [network])"
            }
        ),
        "  refused: pulls, builds, exec, volumes, networks, every other endpoint (docs/containers.md)"
            .into(),
    ]
}

/// `doctor`'s check: whether the filter can start here.
pub(crate) fn check_doctor(env: &HostEnv) -> Vec<crate::doctor::Check> {
    use crate::doctor::{Check, Mark};
    let opts = crate::jail::launch::RunOptions {
        command: vec!["true".into()],
        ..Default::default()
    };
    let Ok((_, config)) = crate::jail::launch::plan_input(&opts, "doctor", env) else {
        return Vec::new();
    };
    let (mark, why, fix) = match (config.containers.docker, upstream(env)) {
        (false, _) => (
            Mark::Pass,
            "off: the Docker socket is masked".to_string(),
            None,
        ),
        (true, Ok(p)) => (
            Mark::Pass,
            format!(
                "the filter starts: the engine answers at {}",
                crate::escape::visible_path(&p)
            ),
            None,
        ),
        (true, Err(why)) => (
            Mark::Warn,
            format!("[containers] docker is on but {why}"),
            Some("start the Docker engine, or set DOCKER_HOST=unix:///path/to/docker.sock".into()),
        ),
    };
    vec![Check {
        name: "docker filter",
        mark,
        why,
        fix,
    }]
}

/// The serving filter; when dropped, it is killed and the session's containers removed.
pub(crate) struct Running {
    pub(crate) service: Option<crate::service::Running>,
    pub(crate) upstream: PathBuf,
    pub(crate) session: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        // The filter first: nothing new is created while the session's containers are removed.
        drop(self.service.take());
        match remove_session_containers(&self.upstream, &self.session) {
            Ok(0) => {}
            Ok(n) => tracing::info!("docker filter: {n} container(s) of the session removed"),
            Err(e) => tracing::warn!(
                "docker filter: the session's containers were not removed ({e}): \
                 `docker ps -a --filter label={}={}`",
                judge::LABEL,
                self.session
            ),
        }
    }
}

/// One request to the engine, its response read whole.
fn ask(upstream: &Path, method: &str, target: &str) -> std::io::Result<http::Response> {
    let mut s = UnixStream::connect(upstream)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"
    )?;
    http::read_response(&mut s)
}

/// Remove (forced, with their anonymous volumes) the containers labelled with `session`.
pub(crate) fn remove_session_containers(upstream: &Path, session: &str) -> std::io::Result<usize> {
    remove_labelled(upstream, &format!("{}={session}", judge::LABEL), |_| true)
}

/// At a launch, the containers of this runtime directory's sessions that no longer run (a
/// launcher killed outright could not remove its own): removed, said in the log.
pub(crate) fn sweep(upstream: &Path, runtime: &Path, current: &str) {
    let label = format!("{}={}", judge::RUNTIME_LABEL, runtime.display());
    let dead = |labels: &serde_json::Value| {
        labels
            .get(judge::LABEL)
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| s != current && !crate::jail::liveness::held_by_id(runtime, s))
    };
    match remove_labelled(upstream, &label, dead) {
        Ok(0) => {}
        Ok(n) => tracing::info!("docker filter: {n} container(s) of ended sessions removed"),
        Err(e) => tracing::warn!("docker filter: ended sessions' containers not swept: {e}"),
    }
}

/// Remove the containers labelled `label` whose labels `pick` picks; how many.
fn remove_labelled(
    upstream: &Path,
    label: &str,
    pick: impl Fn(&serde_json::Value) -> bool,
) -> std::io::Result<usize> {
    let filters = serde_json::json!({ "label": [label] });
    let list = ask(
        upstream,
        "GET",
        &format!(
            "/containers/json?all=1&filters={}",
            http::encode(&filters.to_string())
        ),
    )?;
    let ids: Vec<String> = serde_json::from_slice::<Vec<serde_json::Value>>(&list.body)
        .map_err(std::io::Error::other)?
        .iter()
        .filter(|c| c.get("Labels").is_some_and(&pick))
        .filter_map(|c| c.get("Id")?.as_str().map(str::to_string))
        .filter(|id| id.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    for id in &ids {
        let r = ask(upstream, "DELETE", &format!("/containers/{id}?force=1&v=1"))?;
        if r.status >= 300 && r.status != 404 {
            return Err(std::io::Error::other(format!(
                "removing {id}: status {}",
                r.status
            )));
        }
    }
    Ok(ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Scope};

    fn merge(c: &mut Config, text: &str, scope: Scope) -> crate::Result<()> {
        c.merge_text(
            text,
            Path::new("/w/f.toml"),
            scope,
            Path::new("/h"),
            Path::new("/w"),
        )
    }

    #[test]
    fn only_the_system_and_user_files_turn_it_on() {
        let on = "[containers]\ndocker = true\n";
        let mut c = Config::default();
        let err = merge(&mut c, on, Scope::Workspace).unwrap_err().to_string();
        assert!(err.contains("`containers.docker`"), "{err}");
        merge(&mut c, on, Scope::User).unwrap();
        assert!(c.containers.docker);
        merge(&mut c, "[containers]\ndocker = false\n", Scope::Workspace).unwrap();
        assert!(!c.containers.docker, "the workspace may turn it off");
        let mut locked = Config::default();
        merge(&mut locked, "locked = true\n", Scope::System).unwrap();
        assert!(merge(&mut locked, on, Scope::User).is_err());
        assert!(merge(&mut c, "[containers]\npodman = true\n", Scope::User).is_err());
    }

    #[test]
    fn no_filter_without_an_engine() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("s/home");
        let mut w = Vec::new();
        let env = HostEnv::of(&[]);
        assert!(plan(false, &env, &home, true, &mut w).is_none() && w.is_empty());
        let tcp = HostEnv::of(&[("DOCKER_HOST", "tcp://10.0.0.1:2375")]);
        assert!(plan(true, &tcp, &home, true, &mut w).is_none());
        assert!(w[0].contains("not a unix:// socket"), "{w:?}");
        let dead = format!("unix://{}/dead.sock", t.path().display());
        let dead = HostEnv::of(&[("DOCKER_HOST", dead.as_str())]);
        assert!(plan(true, &dead, &home, true, &mut w).is_none());
        assert!(w[1].contains("no Docker engine answers"), "{w:?}");
        let live = t.path().join("live.sock");
        let _l = std::os::unix::net::UnixListener::bind(&live).unwrap();
        let url = format!("unix://{}", live.display());
        let env = HostEnv::of(&[("DOCKER_HOST", url.as_str())]);
        let f = plan(true, &env, &home, true, &mut w).unwrap();
        assert_eq!((f.dir, f.upstream), (t.path().join("s/docker"), live));
        assert_eq!(
            jail_env().1,
            "unix:///tmp/.claude-sandbox-docker/docker.sock"
        );
    }
}
