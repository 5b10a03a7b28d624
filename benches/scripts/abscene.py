"""The scene the A/B scripts launch in, made once: a workspace that is a git repository with
`repos - 1` more inside, `dirs` PATH directories of `exes` executables each, and a home with
~/.local/bin, all under a fresh directory of /var/tmp (or of $AB_DIR: another file system, e.g.
an ext4 image with a journal, as most machines have) removed at exit (also when a run fails)."""
import atexit, os, shutil, subprocess, tempfile


def scene(prefix, repos=5, dirs=10, exes=200):
    root = tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("AB_DIR", "/var/tmp"))
    atexit.register(shutil.rmtree, root, True)
    ws, home = f"{root}/ws", f"{root}/home"
    os.makedirs(f"{home}/.local/bin")
    os.makedirs(ws)
    subprocess.run(["git", "init", "-q", ws], check=True)
    for r in range(1, repos):
        os.makedirs(f"{ws}/repo{r}")
        subprocess.run(["git", "init", "-q", f"{ws}/repo{r}"], check=True)
    path = []
    for i in range(dirs):
        d = f"{ws}/tools{i}/bin"
        os.makedirs(d)
        path.append(d)
        for j in range(exes):
            p = f"{d}/t{i}-{j}"
            open(p, "w").write("#!/bin/sh\nexit 0\n")
            os.chmod(p, 0o755)
    path.append("/usr/local/bin:/usr/bin:/bin")
    return root, ws, home, ":".join(path)
