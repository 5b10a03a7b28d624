# A loopback HTTPS git server for tests/integration/inject.rs: `git http-backend` as CGI behind
# Basic auth that only the REAL token passes, and npm's whoami behind the npm token as a Bearer;
# every Authorization header seen is logged.
import base64, http.server, os, ssl, subprocess, sys

port, root, cert, key, user, token, log, npm_token = sys.argv[1:9]
want = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes

    def log_message(self, *args):
        pass

    def serve(self):
        if self.path == "/ping":  # the cost measurement's request: no auth, no log
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"pong\n")
            return
        auth = self.headers.get("Authorization", "")
        with open(log, "a") as f:
            f.write(f"{self.command} {self.path} auth={auth}\n")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/-/whoami"):  # npm's: the registry token as a Bearer
            ok = auth == "Bearer " + npm_token
            body = b'{"username":"me"}' if ok else b'{"error":"unauthorized"}'
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if auth != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(
            os.environ,
            GIT_PROJECT_ROOT=root,
            GIT_HTTP_EXPORT_ALL="1",
            PATH_INFO=path,
            QUERY_STRING=query,
            REQUEST_METHOD=self.command,
            CONTENT_TYPE=self.headers.get("Content-Type", ""),
            CONTENT_LENGTH=str(len(body)),
            HTTP_CONTENT_ENCODING=self.headers.get("Content-Encoding", ""),
            GIT_PROTOCOL=self.headers.get("Git-Protocol", ""),
            REMOTE_USER=user,
            REMOTE_ADDR="127.0.0.1",
        )
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True
        ).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode().partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

    do_GET = do_POST = serve


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
open(log + ".ready", "w").close()
srv.serve_forever()
