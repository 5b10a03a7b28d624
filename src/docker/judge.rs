//! **Pure**: what the Docker filter does with one request (`judge`): forward it (perhaps
//! rewritten), or refuse it and say why. No I/O; `serve` does what the verdict says.
//!
//! Guards against the Docker API as root on the host: only the endpoints a test suite's containers
//! need pass (ping, version, info, the image and network listings, a container's create, start,
//! attach, wait, logs, inspect, stop, kill, remove, and the listing); a container's create is
//! refused with a host bind mount or any volume, privileged, a host namespace or another
//! container's, added capabilities, devices, a security option other than `no-new-privileges`,
//! sysctls, a cgroup parent, another runtime, a logging driver that ships elsewhere, or any
//! `HostConfig` key this version does not know set to a value; its ports are published on
//! 127.0.0.1 only, and while the jail's network is not the host's, its network is `none` (the
//! engine's network is the host's: a container on it is egress around `[network]`). Every created
//! container is labelled with the session, and only the session's own containers (recorded from
//! their create, by full id or name) may be operated on: one of the human's is refused.

use super::http::Request;
use serde_json::{Map, Value};

/// The label every container the jail creates carries: `LABEL=<session id>`.
pub(crate) const LABEL: &str = "claude-sandbox.session";
/// And the runtime directory of the session's launcher, whose lock says whether it still runs
/// (`docker::sweep`).
pub(crate) const RUNTIME_LABEL: &str = "claude-sandbox.runtime";

/// What the filter knows of the launch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Policy {
    pub session: String,
    /// The launcher's runtime directory (`RUNTIME_LABEL`).
    pub runtime: String,
    /// The jail's network is not the host's (allowlist or none): containers get no network.
    pub isolated: bool,
}

/// The containers this session created (full id, name given).
#[derive(Debug, Default)]
pub(crate) struct SessionState {
    containers: Vec<(String, Option<String>)>,
}

impl SessionState {
    /// A container created: a name given again is the new container's (the old one is gone).
    pub(crate) fn created(&mut self, id: &str, name: Option<String>) {
        let name = name.map(|n| n.strip_prefix('/').unwrap_or(&n).to_string());
        for (_, n) in &mut self.containers {
            if n.is_some() && *n == name {
                *n = None;
            }
        }
        self.containers.push((id.to_string(), name));
    }

    /// The full id `r` names among the session's containers: its name (with or without `/`), or a
    /// prefix of exactly one id.
    fn resolve(&self, r: &str) -> Option<&str> {
        let name = r.strip_prefix('/').unwrap_or(r);
        if let Some((id, _)) = self
            .containers
            .iter()
            .find(|(_, n)| n.as_deref() == Some(name))
        {
            return Some(id);
        }
        if r.is_empty() || !r.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut ids = self.containers.iter().filter(|(id, _)| id.starts_with(r));
        match (ids.next(), ids.next()) {
            (Some((id, _)), None) => Some(id),
            _ => None,
        }
    }
}

/// What to do with a request.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Forward it as it now is; the response streams back.
    Forward(Request),
    /// A container's create, rewritten: the response's id is the session's (`name` given).
    Create(Request, Option<String>),
    /// Attach: forwarded, then the connection is hijacked both ways.
    Upgrade(Request),
    Refuse(Refusal),
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// An endpoint the filter does not pass (`METHOD /path`).
    Endpoint(String),
    /// A pull (the engine's network is the host's, outside `[network]`).
    Pull,
    /// A container the session did not create.
    NotOurs(String),
    /// A create body that is not a JSON object.
    BadBody,
    /// A host path or volume mounted (the field).
    Mount(&'static str),
    Privileged,
    /// A host namespace or another container's (the field and value).
    Namespace(&'static str, String),
    Capabilities,
    Devices(&'static str),
    SecurityOpt(String),
    /// Another key set: the field.
    Field(String),
    /// A network other than the default while the jail's is its own, or not the default bridge.
    Network(String),
    /// A port published on an address other than loopback.
    Ports(String),
}

impl Refusal {
    /// One word per kind, for the alert's fingerprint (one alert per kind and session).
    pub(crate) fn class(&self) -> &'static str {
        match self {
            Refusal::Endpoint(_) => "endpoint",
            Refusal::Pull => "pull",
            Refusal::NotOurs(_) => "not-ours",
            Refusal::BadBody => "bad-body",
            Refusal::Mount(_) => "mount",
            Refusal::Privileged => "privileged",
            Refusal::Namespace(..) => "host-namespace",
            Refusal::Capabilities => "capabilities",
            Refusal::Devices(_) => "devices",
            Refusal::SecurityOpt(_) => "security-opt",
            Refusal::Field(_) => "field",
            Refusal::Network(_) => "network",
            Refusal::Ports(_) => "ports",
        }
    }

    /// A refusal that is a way to the host as root, or to the human's containers: high.
    pub(crate) fn is_high(&self) -> bool {
        matches!(
            self,
            Refusal::NotOurs(_)
                | Refusal::Mount(_)
                | Refusal::Privileged
                | Refusal::Namespace(..)
                | Refusal::Capabilities
                | Refusal::Devices(_)
                | Refusal::SecurityOpt(_)
        )
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Refusal::Endpoint(e) => format!("{e}: not an endpoint the filter passes"),
            Refusal::Pull => {
                "a pull: the engine reaches the network as the host, outside [network] \
                              (pull the image outside the jail)"
                    .into()
            }
            Refusal::NotOurs(c) => format!("container {c:?}: not one this session created"),
            Refusal::BadBody => "a container create whose body is not a JSON object".into(),
            Refusal::Mount(f) => format!("HostConfig.{f}: host paths and volumes are not mounted"),
            Refusal::Privileged => "HostConfig.Privileged".into(),
            Refusal::Namespace(f, v) => format!("HostConfig.{f} = {v:?}: a namespace not its own"),
            Refusal::Capabilities => "HostConfig.CapAdd / Capabilities: added capabilities".into(),
            Refusal::Devices(f) => format!("HostConfig.{f}: devices"),
            Refusal::SecurityOpt(o) => format!("HostConfig.SecurityOpt {o:?}"),
            Refusal::Field(f) => format!("{f}: not passed by the filter"),
            Refusal::Network(n) => format!(
                "network {n:?}: containers run on no network while the jail's is its own, else \
                 on the default bridge"
            ),
            Refusal::Ports(p) => format!("a port published on {p:?}: only 127.0.0.1 is allowed"),
        }
    }
}

/// The verdict on `req`.
pub(crate) fn judge(req: &Request, policy: &Policy, state: &SessionState) -> Verdict {
    let segs: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    let m = req.method.as_str();
    // Before API 1.24 the engine applies a `HostConfig` sent with start: none but the current
    // semantics, and no body but a create's.
    if !version_at_least_1_24(&req.version) {
        return Verdict::Refuse(Refusal::Field(format!("API version {}", req.version)));
    }
    let is_create = m == "POST" && segs == ["containers", "create"];
    if !req.body.is_empty() && !is_create {
        return Verdict::Refuse(Refusal::Field(format!("a body on {m} {}", req.path)));
    }
    let refuse = || Verdict::Refuse(Refusal::Endpoint(format!("{m} {}", req.path)));
    let forward = || Verdict::Forward(req.clone());
    match (m, segs.as_slice()) {
        ("GET" | "HEAD", ["_ping"])
        | ("GET", ["version" | "info" | "networks"] | ["images", "json"] | ["networks", _]) => {
            forward()
        }
        ("GET", ["images", name @ .., "json"]) if !name.is_empty() => forward(),
        ("POST", ["images", "create"]) => Verdict::Refuse(Refusal::Pull),
        ("GET", ["containers", "json"]) => {
            let mut r = req.clone();
            r.query = with_label_filter(&req.query, &policy.session);
            Verdict::Forward(r)
        }
        ("POST", ["containers", "create"]) => match create(req, policy) {
            Ok(r) => Verdict::Create(r, req.param("name")),
            Err(e) => Verdict::Refuse(e),
        },
        ("DELETE", ["containers", c]) => owned(req, state, c, None),
        ("GET", ["containers", c, op @ ("json" | "logs" | "top")])
        | (
            "POST",
            ["containers", c, op @ ("start" | "stop" | "kill" | "wait" | "restart" | "resize" | "attach")],
        ) => owned(req, state, c, Some(op)),
        _ => refuse(),
    }
}

/// `/v1.NN` at 1.24 or later, or none (the engine's own, the newest).
fn version_at_least_1_24(v: &str) -> bool {
    let Some((major, minor)) = v.strip_prefix("/v").and_then(|v| v.split_once('.')) else {
        return v.is_empty();
    };
    // Above 1.99: a version no engine knows, answered with an error (never judged further).
    match (major.parse::<u32>(), minor.parse::<u32>()) {
        (Ok(a), Ok(b)) => (a, b) >= (1, 24) && (a, b) <= (1, 99),
        _ => false,
    }
}

/// `req` on container `c` with its full id, if it is the session's.
fn owned(req: &Request, state: &SessionState, c: &str, op: Option<&str>) -> Verdict {
    let Some(id) = state.resolve(c) else {
        return Verdict::Refuse(Refusal::NotOurs(c.to_string()));
    };
    let mut r = req.clone();
    r.path = match op {
        Some(op) => format!("/containers/{id}/{op}"),
        None => format!("/containers/{id}"),
    };
    if op == Some("attach") && r.upgrade {
        return Verdict::Upgrade(r);
    }
    r.upgrade = false;
    Verdict::Forward(r)
}

/// The query with the listing's `filters` narrowed to the session's label.
fn with_label_filter(query: &str, session: &str) -> String {
    let want = format!("{LABEL}={session}");
    let mut filters: Map<String, Value> = Map::new();
    let mut rest: Vec<&str> = Vec::new();
    // Every `filters` pair dropped, however its key is escaped (the engine reads the first one):
    // the first kept, narrowed.
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if super::http::decode(k) != "filters" {
            rest.push(kv);
        } else if filters.is_empty() {
            if let Ok(Value::Object(m)) = serde_json::from_str(&super::http::decode(v)) {
                filters = m;
            }
        }
    }
    // Both forms the engine reads: `{"label": ["k=v"]}` and `{"label": {"k=v": true}}`; a label
    // filter of the jail's own is kept beside (filters of one key are ANDed for labels).
    match filters.get_mut("label") {
        Some(Value::Object(m)) => {
            m.insert(want, Value::Bool(true));
        }
        Some(Value::Array(a)) => a.push(Value::String(want)),
        _ => {
            filters.insert("label".into(), Value::Array(vec![Value::String(want)]));
        }
    }
    let f = format!(
        "filters={}",
        super::http::encode(&Value::Object(filters).to_string())
    );
    [f].into_iter()
        .chain(rest.into_iter().map(str::to_string))
        .collect::<Vec<_>>()
        .join("&")
}

/// `HostConfig` keys passed whatever their value: resources, the container's own settings.
const PASSED: &[&str] = &[
    "AutoRemove",
    "BlkioWeight",
    "BlkioWeightDevice",
    "BlkioDeviceReadBps",
    "BlkioDeviceWriteBps",
    "BlkioDeviceReadIOps",
    "BlkioDeviceWriteIOps",
    "CapDrop",
    "ConsoleSize",
    "ContainerIDFile",
    "CpuCount",
    "CpuPercent",
    "CpuPeriod",
    "CpuQuota",
    "CpuRealtimePeriod",
    "CpuRealtimeRuntime",
    "CpuShares",
    "CpusetCpus",
    "CpusetMems",
    "Dns",
    "DnsOptions",
    "DnsSearch",
    "ExtraHosts",
    "GroupAdd",
    "Init",
    "IOMaximumBandwidth",
    "IOMaximumIOps",
    "Isolation",
    "KernelMemory",
    "KernelMemoryTCP",
    "Memory",
    "MemoryReservation",
    "MemorySwap",
    "MemorySwappiness",
    "NanoCpus",
    "PidsLimit",
    "ReadonlyRootfs",
    "ShmSize",
    "Ulimits",
];

/// `HostConfig` keys judged by value below; with `PASSED`, every key this version knows (any other
/// spelling is refused, set or not: the engine's decoder matches keys ignoring case).
const JUDGED: &[&str] = &[
    "Binds",
    "Mounts",
    "VolumesFrom",
    "VolumeDriver",
    "Privileged",
    "CapAdd",
    "Capabilities",
    "Devices",
    "DeviceRequests",
    "DeviceCgroupRules",
    "SecurityOpt",
    "PidMode",
    "IpcMode",
    "UTSMode",
    "UsernsMode",
    "CgroupnsMode",
    "Cgroup",
    "LogConfig",
    "Runtime",
    "OomScoreAdj",
    "NetworkMode",
    "PortBindings",
    "MaskedPaths",
    "ReadonlyPaths",
    "RestartPolicy",
    "Tmpfs",
    "Annotations",
    "Sysctls",
    "CgroupParent",
    "Links",
    "PublishAllPorts",
    "OomKillDisable",
    "StorageOpt",
];

/// The namespace fields of `HostConfig`: refused unless the container's own.
const NAMESPACES: &[&str] = &[
    "PidMode",
    "IpcMode",
    "UTSMode",
    "UsernsMode",
    "CgroupnsMode",
    "Cgroup",
];

/// The create body's own keys (the engine's `container.Config`, and the two it adds): nothing
/// else passes, so a second spelling of one (`hostconfig`, `Hoſtconfig`) never reaches an engine
/// that would merge it over the judged one.
const CREATE_KEYS: &[&str] = &[
    "Hostname",
    "Domainname",
    "User",
    "AttachStdin",
    "AttachStdout",
    "AttachStderr",
    "ExposedPorts",
    "Tty",
    "OpenStdin",
    "StdinOnce",
    "Env",
    "Cmd",
    "Healthcheck",
    "ArgsEscaped",
    "Image",
    "Volumes",
    "WorkingDir",
    "Entrypoint",
    "NetworkDisabled",
    "MacAddress",
    "OnBuild",
    "Labels",
    "StopSignal",
    "StopTimeout",
    "Shell",
    "HostConfig",
    "NetworkingConfig",
];

/// Every object in `v`, at any depth, has ASCII keys only and no two keys equal ignoring ASCII
/// case: Go's decoder folds case (and `ſ` to `s`, `K` to `k`) and merges a second spelling into
/// the same field, so either would let a key the judge did not read win.
fn unambiguous_keys(v: &Value, at: &str) -> Result<(), Refusal> {
    match v {
        Value::Object(o) => {
            let mut seen = std::collections::BTreeSet::new();
            for (k, v) in o {
                if !k.is_ascii() || !seen.insert(k.to_ascii_lowercase()) {
                    return Err(Refusal::Field(format!(
                        "{at}: the key {k:?} (non-ASCII, or a second spelling of a key)"
                    )));
                }
                unambiguous_keys(v, at)?;
            }
            Ok(())
        }
        Value::Array(a) => a.iter().try_for_each(|v| unambiguous_keys(v, at)),
        _ => Ok(()),
    }
}

/// Every key of `o` is one of `keys`, spelt exactly.
fn only_keys(o: &Map<String, Value>, keys: &[&str], at: &str) -> Result<(), Refusal> {
    match o.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(k) => Err(Refusal::Field(format!("{at}.{k}"))),
        None => Ok(()),
    }
}

/// A restart policy that restarts nothing: a container that restarts itself outlives a launcher
/// killed outright.
fn no_restart(v: &Value) -> bool {
    v.as_object().is_some_and(|o| {
        only_keys(o, &["Name", "MaximumRetryCount"], "").is_ok()
            && matches!(
                o.get("Name").and_then(Value::as_str),
                None | Some("" | "no")
            )
    })
}

/// Tmpfs mounts whose options are all `TMPFS_OPTIONS` (a `bind` there reaches runc).
fn plain_tmpfs(v: &Value) -> bool {
    v.as_object().is_some_and(|o| {
        o.values().all(|opts| {
            opts.as_str().is_some_and(|opts| {
                opts.split(',')
                    .filter(|s| !s.is_empty())
                    .all(|opt| TMPFS_OPTIONS.contains(&opt.split('=').next().unwrap_or_default()))
            })
        })
    })
}

/// Tmpfs options that set size and permissions, never a bind or a propagation.
const TMPFS_OPTIONS: &[&str] = &[
    "size",
    "mode",
    "uid",
    "gid",
    "ro",
    "rw",
    "noexec",
    "exec",
    "nosuid",
    "nodev",
    "nr_inodes",
];

/// A value that sets nothing: null, false, 0, "", [], {}.
fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// A container's create body judged and rewritten: the session's label, loopback ports, the
/// network.
fn create(req: &Request, policy: &Policy) -> Result<Request, Refusal> {
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&req.body) else {
        return Err(Refusal::BadBody);
    };
    unambiguous_keys(&Value::Object(body.clone()), "the create body")?;
    only_keys(&body, CREATE_KEYS, "the create body")?;
    let mut host = match body.remove("HostConfig") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(h)) => h,
        Some(_) => return Err(Refusal::BadBody),
    };
    let network = judge_host(&mut host, policy)?;
    host.insert("NetworkMode".into(), Value::String(network.clone()));
    // The endpoints name networks: none but the one the container gets (none: no endpoint).
    match body.get("NetworkingConfig") {
        None | Some(Value::Null) => {}
        Some(Value::Object(n)) => {
            only_keys(n, &["EndpointsConfig"], "NetworkingConfig")?;
            let endpoints = n.get("EndpointsConfig").and_then(Value::as_object);
            let allowed = |k: &str| ["default", "bridge", network.as_str()].contains(&k);
            if let Some(other) = endpoints.and_then(|e| e.keys().find(|k| !allowed(k))) {
                return Err(Refusal::Network(other.clone()));
            }
        }
        Some(_) => return Err(Refusal::BadBody),
    }
    if network == "none" {
        body.remove("NetworkingConfig");
    }
    match body
        .entry("Labels")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        v @ Value::Null => *v = Value::Object(Map::new()),
        Value::Object(_) => {}
        _ => return Err(Refusal::BadBody),
    }
    if let Some(l) = body.get_mut("Labels").and_then(Value::as_object_mut) {
        l.insert(LABEL.into(), Value::String(policy.session.clone()));
        l.insert(RUNTIME_LABEL.into(), Value::String(policy.runtime.clone()));
    }
    body.insert("HostConfig".into(), Value::Object(host));
    // The body as it goes on: what was inserted can collide with nothing that came in.
    unambiguous_keys(&Value::Object(body.clone()), "the create body")?;
    let mut r = req.clone();
    r.body = Value::Object(body).to_string().into_bytes();
    r.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
    r.headers
        .push(("Content-Type".into(), "application/json".into()));
    Ok(r)
}

/// `HostConfig` judged; ports rewritten to loopback. The network the container gets.
fn judge_host(host: &mut Map<String, Value>, policy: &Policy) -> Result<String, Refusal> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    for (k, v) in host.iter() {
        if !PASSED.contains(&k.as_str()) && !JUDGED.contains(&k.as_str()) {
            return Err(Refusal::Field(format!("HostConfig.{k}")));
        }
        // An empty list of masked or read-only paths unmasks `/proc` (`systempaths=unconfined`).
        if ["MaskedPaths", "ReadonlyPaths"].contains(&k.as_str()) && !v.is_null() {
            return Err(Refusal::Field(format!("HostConfig.{k}")));
        }
        if is_unset(v) || PASSED.contains(&k.as_str()) {
            continue;
        }
        match k.as_str() {
            "Binds" => return Err(Refusal::Mount("Binds")),
            "Mounts" => return Err(Refusal::Mount("Mounts")),
            "VolumesFrom" => return Err(Refusal::Mount("VolumesFrom")),
            "VolumeDriver" => return Err(Refusal::Mount("VolumeDriver")),
            "Privileged" => return Err(Refusal::Privileged),
            "CapAdd" | "Capabilities" => return Err(Refusal::Capabilities),
            "Devices" => return Err(Refusal::Devices("Devices")),
            "DeviceRequests" => return Err(Refusal::Devices("DeviceRequests")),
            "DeviceCgroupRules" => return Err(Refusal::Devices("DeviceCgroupRules")),
            "SecurityOpt" => {
                let opts = v.as_array().map(Vec::as_slice).unwrap_or_default();
                if let Some(o) = opts.iter().map(text).find(|o| {
                    !matches!(
                        o.as_str(),
                        "no-new-privileges" | "no-new-privileges:true" | "no-new-privileges=true"
                    )
                }) {
                    return Err(Refusal::SecurityOpt(o));
                }
            }
            "PidMode" | "IpcMode" | "UTSMode" | "UsernsMode" | "CgroupnsMode" | "Cgroup" => {
                let mode = text(v);
                let own = match k.as_str() {
                    "IpcMode" => ["private", "shareable", "none"].contains(&mode.as_str()),
                    "CgroupnsMode" => mode == "private",
                    _ => false,
                };
                if !own {
                    let f = NAMESPACES.iter().copied().find(|f| f == k).unwrap_or("?");
                    return Err(Refusal::Namespace(f, mode));
                }
            }
            "LogConfig" => {
                if let Some(o) = v.as_object() {
                    only_keys(o, &["Type", "Config"], "HostConfig.LogConfig")?;
                }
                let t = v.get("Type").map(text).unwrap_or_default();
                if !["", "json-file", "local", "none"].contains(&t.as_str()) {
                    return Err(Refusal::Field(format!("HostConfig.LogConfig.Type {t:?}")));
                }
            }
            "Runtime" if text(v) == "runc" => {}
            "RestartPolicy" if no_restart(v) => {}
            "Tmpfs" if plain_tmpfs(v) => {}
            // Below 0 the host's own processes are killed first when memory runs out.
            "OomScoreAdj" if v.as_i64().is_some_and(|n| n >= 0) => {}
            "NetworkMode" | "PortBindings" => {}
            other => return Err(Refusal::Field(format!("HostConfig.{other}"))),
        }
    }
    let asked = host.get("NetworkMode").map(text).unwrap_or_default();
    let network = match asked.as_str() {
        "" | "default" | "bridge" | "none" if policy.isolated => "none".to_string(),
        "" | "default" => "default".to_string(),
        "bridge" | "none" => asked.clone(),
        _ if asked == "host" || asked.starts_with("container:") => {
            return Err(Refusal::Namespace("NetworkMode", asked));
        }
        _ => return Err(Refusal::Network(asked)),
    };
    if let Some(Value::Object(ports)) = host.get_mut("PortBindings") {
        for bindings in ports.values_mut().filter_map(Value::as_array_mut) {
            for b in bindings.iter_mut().filter_map(Value::as_object_mut) {
                only_keys(b, &["HostIp", "HostPort"], "HostConfig.PortBindings")?;
                let ip = b.get("HostIp").map(text).unwrap_or_default();
                if !["", "0.0.0.0", "::", "127.0.0.1"].contains(&ip.as_str()) {
                    return Err(Refusal::Ports(ip));
                }
                b.insert("HostIp".into(), Value::String("127.0.0.1".into()));
            }
        }
    }
    Ok(network)
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
