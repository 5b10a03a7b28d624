//! A case's scene: a throwaway workspace, home and runtime directory under the test directory, and
//! the shell that runs its snippets there, in a session of its own with a time-out.

use super::*;

/// The scene of one case: a throwaway workspace and home, outside `/tmp` (the jail's `/tmp` is private).
pub(super) struct Scene {
    pub(super) root: PathBuf,
    pub(super) ws: PathBuf,
    pub(super) rt: PathBuf,
    pub(super) marker: PathBuf,
    pub(super) env: Vec<(String, String)>,
}

pub(super) const PRELUDE: &str = "set -e\n";
pub(super) const PLANTED: &str = "__CLAUDE_SANDBOX_BATTERY_PLANTED__";

pub(super) fn sh(cmd: &str, scene: &Scene, timeout: Duration) -> (bool, String) {
    let mut c = Command::new("bash");
    c.args(["-c", cmd])
        .current_dir(&scene.ws)
        .env_clear()
        .envs(scene.env.iter().cloned())
        .stdin(Stdio::null());
    let r = child::run_contained(c, timeout, |_| {});
    (r.ok, r.output)
}

pub(super) fn scene(case: &Case, bin: &Path, host_env: &HostEnv) -> Result<Scene> {
    let base = host_env
        .get(host::TEST_TMP)
        .map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from);
    let root = base.join(format!(
        "claude-sandbox-battery-{}-{}",
        std::process::id(),
        case.name
    ));
    let _ = std::fs::remove_dir_all(&root);
    // From its first byte, removed if the battery is interrupted (a half-run scene, even with --keep).
    interrupt::scene(Some(root.clone()));
    let (home, ws, rt) = (root.join("home"), root.join("ws"), root.join("rt"));
    for d in [
        home.join(".local/bin"),
        home.join(".config"),
        home.join(".cache"),
        home.join(".claude"),
        ws.clone(),
    ] {
        std::fs::create_dir_all(&d)
            .map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
    }
    let w = |p: PathBuf, s: &str| {
        std::fs::write(&p, s).map_err(|e| Error::io(format!("writing {}", p.display()), e))
    };
    w(home.join(".bashrc"), "# bashrc\n")?;
    w(home.join(".profile"), "# profile\n")?;
    w(home.join(".gitconfig"), "[user]\n\tname = Human\n\temail = human@example.invalid\n[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n")?;
    w(home.join(".claude/settings.json"), "{}\n")?;
    let marker = root.join("PWNED");
    // What a planted program does when the human runs it: leave the marker.
    let evil = root.join("evil");
    w(
        evil.clone(),
        &format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    )?;
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io("chmod", e))?;
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        home.join(".local/bin").display(),
        ws.join("node_modules/.bin").display()
    );
    let env = vec![
        ("HOME".into(), home.display().to_string()),
        ("PATH".into(), path),
        ("MARKER".into(), marker.display().to_string()),
        ("EVIL".into(), evil.display().to_string()),
        ("ROOT".into(), root.display().to_string()),
        ("WS".into(), ws.display().to_string()),
        ("RUNTIME".into(), rt.display().to_string()),
        (
            "CS_BIN".into(),
            home.join(".cache/claude-sandbox/claude-sandbox")
                .display()
                .to_string(),
        ),
        (host::RUNTIME_DIR.into(), rt.display().to_string()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("TERM".into(), "xterm".into()),
        ("NO_COLOR".into(), "1".into()),
    ];
    // The watch mode the battery was asked for reaches the scene's launcher (the scene's
    // environment is otherwise its own: `CLAUDE_SANDBOX_WATCH=poll claude-sandbox battery`).
    let mut env = env;
    // `~/` is the scene's home, as in `path`.
    let scene_home = format!("{}/", home.display());
    env.extend(
        case.env
            .iter()
            .map(|(k, v)| (k.clone(), v.replace("~/", &scene_home))),
    );
    if let Some(mode) = host_env.get_str(host::WATCH) {
        env.push((host::WATCH.into(), mode.into()));
    }
    // The launcher itself runs from a copy under $HOME, in a writable cache directory (so that rewriting "the guard that
    // launches the next session" is a real attempt on a writable path, and --unguarded cannot
    // damage the binary running the battery).
    let cs = home.join(".cache/claude-sandbox/claude-sandbox");
    std::fs::create_dir_all(cs.parent().unwrap_or(&home))
        .map_err(|e| Error::io("creating the launcher copy directory", e))?;
    std::fs::copy(bin, &cs)
        .map_err(|e| Error::io(format!("copying {} to {}", bin.display(), cs.display()), e))?;
    let s = Scene {
        root,
        ws,
        rt,
        marker,
        env,
    };
    let (ok, out) = sh(
        "git init -q && echo hello > README && git add README && git commit -qm init",
        &s,
        Duration::from_secs(20),
    );
    if !ok {
        let _ = std::fs::remove_dir_all(&s.root);
        return Err(Error::Jail(format!("setting up a repository: {out}")));
    }
    Ok(s)
}

pub(super) fn requirement_missing(req: &str) -> Option<String> {
    match req {
        "sudo" => {
            let ok = Command::new("sudo")
                .args(["-n", "true"])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            (!ok).then(|| "sudo -n does not work for this user outside the jail".into())
        }
        r if r.starts_with("git>=") => {
            let want: Vec<u32> = r[5..].split('.').filter_map(|p| p.parse().ok()).collect();
            let out = Command::new("git").arg("--version").output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let have: Vec<u32> = text
                .split_whitespace()
                .nth(2)?
                .split('.')
                .filter_map(|p| p.parse().ok())
                .collect();
            (have < want).then(|| format!("git {} is older than {}", text.trim(), &r[5..]))
        }
        "tiocsti" => {
            let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
                .map_or(true, |s| s.trim() == "1");
            (!legacy).then(|| {
                "the kernel refuses TIOCSTI (dev.tty.legacy_tiocsti=0): nothing to prove".into()
            })
        }
        cmd => {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {cmd}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            (!found).then(|| format!("{cmd} is not installed"))
        }
    }
}
