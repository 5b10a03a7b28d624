#!/usr/bin/env python3
"""The Docker filter's cost (docs/containers.md): run once with DOCKER_HOST the engine's, outside,
and once inside the jail (`claude-sandbox run -- python3 benches/scripts/docker-filter.py IMAGE`),
where DOCKER_HOST is the filter. Needs docker-py (e.g. /opt/claude-sandbox-tc-venv/bin/python).

    docker-filter.py IMAGE [NETWORK]   NETWORK: none outside, as the filter makes it in allowlist mode
"""
import os, socket, statistics, sys, time

import docker

IMAGE = sys.argv[1]
NET = {"network_mode": sys.argv[2]} if len(sys.argv) > 2 else {}
PATH = os.environ["DOCKER_HOST"][len("unix://"):]


def timed(f, n):
    for _ in range(min(n, 50)):
        f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort()
    return statistics.median(ts), ts[int(len(ts) * 0.9)]


def raw_ping():
    s = socket.socket(socket.AF_UNIX)
    s.connect(PATH)
    s.sendall(b"GET /v1.41/_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n")
    while s.recv(65536):
        pass
    s.close()


c = docker.DockerClient(base_url=os.environ["DOCKER_HOST"])


def life():
    k = c.containers.create(IMAGE, ["true"], **NET)
    k.start()
    k.wait()
    k.remove()


print("GET /_ping, raw, a connection each  median %.3f ms p90 %.3f ms (n=2000)" % timed(raw_ping, 2000))
print("docker-py ping                      median %.2f ms p90 %.2f ms (n=200)" % timed(c.api.ping, 200))
print("docker-py version                   median %.2f ms p90 %.2f ms (n=200)" % timed(c.version, 200))
print("create+start+wait+remove            median %.1f ms p90 %.1f ms (n=10)" % timed(life, 10))
