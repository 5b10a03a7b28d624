#!/usr/bin/env python3
"""A read-only npm registry on loopback for the install tests: serves the `npm pack` tarballs in DIR
(their package.json becomes each package's one version) and answers 404 for every other name, as
the public registry does for an unpublished one. It stops by itself after --seconds.

    python3 .ci/npm-registry.py DIR PORT_FILE [--seconds N]

Binds 127.0.0.1 on a free port and writes the port to PORT_FILE once it listens.
"""
import base64
import hashlib
import http.server
import json
import pathlib
import sys
import tarfile
import threading
import urllib.parse


def packuments(directory, base):
    out = {}
    for tgz in sorted(pathlib.Path(directory).glob("*.tgz")):
        data = tgz.read_bytes()
        with tarfile.open(tgz) as t:
            manifest = json.load(t.extractfile("package/package.json"))
        name, version = manifest["name"], manifest["version"]
        manifest["dist"] = {
            "tarball": f"{base}/-/tarballs/{tgz.name}",
            "shasum": hashlib.sha1(data).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
        }
        manifest["_id"] = f"{name}@{version}"
        out[name] = {
            "name": name,
            "dist-tags": {"latest": version},
            "versions": {version: manifest},
        }
    return out


def main():
    directory, port_file = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 900
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    base = f"http://127.0.0.1:{server.server_port}"
    docs = packuments(directory, base)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            path = urllib.parse.unquote(self.path.split("?", 1)[0])
            if path.startswith("/-/tarballs/"):
                f = pathlib.Path(directory) / pathlib.Path(path).name
                body = f.read_bytes() if f.is_file() else None
                kind = "application/octet-stream"
            else:
                doc = docs.get(path.lstrip("/"))
                body = json.dumps(doc).encode() if doc else None
                kind = "application/json"
            if body is None:
                self.send_response(404)
                body, kind = b'{"error":"Not found"}', "application/json"
            else:
                self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            sys.stderr.write("npm-registry: " + (fmt % args) + "\n")

    server.RequestHandlerClass = Handler
    threading.Timer(seconds, server.shutdown).start()
    pathlib.Path(port_file).write_text(str(server.server_port))
    server.serve_forever()


if __name__ == "__main__":
    main()
