// claude-sandbox: Node's global `fetch` through the sandbox's proxy, for Node releases that do not
// read HTTPS_PROXY themselves (Node 20, Node 22 before 22.21: docs/network.md, "Node").
// Loaded by `NODE_OPTIONS=--require` in allowlist mode only; it changes nothing where Node already
// put a dispatcher in place (NODE_USE_ENV_PROXY honoured) and never throws: a failure here leaves
// `fetch` as it was (failing closed: the jail has no route but the proxy). Written by claude-sandbox
// (src/net/node_proxy.cjs); only the jail's own processes load it.
'use strict';
// Node 22.21 and later print "EnvHttpProxyAgent is experimental" (UNDICI-EHPA) at every start under
// the sandbox's NODE_USE_ENV_PROXY=1, on stderr, which tools and their tests read: that warning
// alone is dropped, every other one is printed by Node's own listeners as before.
(function () {
  try {
    const printers = process.listeners('warning');
    if (printers.length === 0) return;
    for (const l of printers) process.removeListener('warning', l);
    process.on('warning', function (w) {
      if (w && w.code === 'UNDICI-EHPA') return;
      for (const l of printers) l.call(process, w);
    });
  } catch (_) {
    // Left as it was.
  }
})();
(function () {
  const KEY = Symbol.for('undici.globalDispatcher.1');
  const env = process.env;
  const proxyUrl = env.https_proxy || env.HTTPS_PROXY || env.http_proxy || env.HTTP_PROXY;
  if (!proxyUrl || typeof globalThis.fetch !== 'function' || globalThis[KEY] !== undefined) {
    return;
  }
  let proxy;
  try {
    proxy = new URL(proxyUrl);
    // Node's own undici is loaded by its first fetch, synchronously: it then sets its default
    // Agent, whose class is the only way to it (no `require('undici')` in Node).
    globalThis.fetch('data:,').catch(() => {});
  } catch (_) {
    return;
  }
  const current = globalThis[KEY];
  if (proxy.protocol !== 'http:' || !current || current.constructor.name !== 'Agent') {
    return;
  }
  const CONNECT_TIMEOUT_MS = 30000;
  const net = require('net');
  const tls = require('tls');
  const noProxy = (env.no_proxy || env.NO_PROXY || '')
    .split(',')
    .map((s) => s.trim().toLowerCase().replace(/^\*?\./, ''))
    .filter(Boolean);
  const bare = (h) => h.replace(/^\[|\]$/g, '').toLowerCase();
  const direct = (h) => noProxy.some((n) => n === '*' || h === n || h.endsWith('.' + n));

  // The server's socket, TLS on top for https; `socket` is a tunnel when given.
  function finish(opts, host, port, socket, cb) {
    if (opts.protocol !== 'https:') {
      if (socket) return cb(null, socket);
      const s = net.connect({ host, port });
      s.once('connect', () => cb(null, s)).on('error', cb);
      return s;
    }
    const servername = opts.servername || (net.isIP(host) ? undefined : host);
    const t = tls.connect({ socket, host, port, servername, ALPNProtocols: ['http/1.1'] });
    t.once('secureConnect', () => cb(null, t)).on('error', cb);
    return t;
  }

  function connect(opts, callback) {
    let called = false;
    const cb = (err, s) => {
      if (!called) {
        called = true;
        callback(err, s);
      }
    };
    const host = bare(opts.hostname);
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    if (direct(host)) return finish(opts, host, port, undefined, cb);
    const authority = (host.includes(':') ? `[${host}]` : host) + ':' + port;
    const raw = net.connect({ host: bare(proxy.hostname), port: Number(proxy.port) || 80 });
    let got = Buffer.alloc(0);
    const onData = (chunk) => {
      got = Buffer.concat([got, chunk]);
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = got.subarray(0, end).toString('latin1');
      const status = head.split('\r\n')[0];
      if (/^HTTP\/1\.[01] 200/.test(status)) {
        raw.setTimeout(0);
        raw.removeListener('data', onData);
        raw.removeListener('end', onEnd);
        const rest = got.subarray(end + 4);
        if (rest.length) raw.unshift(rest);
        finish(opts, host, port, raw, cb);
        return;
      }
      // A refusal: its body is the sentence the sandbox wrote for the reader.
      const len = Number((/\r\ncontent-length:\s*(\d+)/i.exec(head) || [])[1] || 0);
      if (got.length - end - 4 >= len) onEnd();
    };
    const onEnd = () => {
      const end = got.indexOf('\r\n\r\n');
      const status = got.subarray(0, got.indexOf('\r\n')).toString('latin1');
      const body = end < 0 ? '' : got.subarray(end + 4).toString('utf8').trim();
      raw.destroy();
      cb(new Error(`the proxy refused ${authority} (${status || 'no answer'}): ${body}`));
    };
    // `on`, not `once`: a second error of the tunnel's socket must not be an uncaught one (the
    // callback is called once whatever comes).
    raw.on('data', onData).once('end', onEnd).on('error', cb);
    // The proxy answers within its own limits; this only bounds a proxy that stopped.
    raw.setTimeout(CONNECT_TIMEOUT_MS, () => {
      raw.destroy();
      cb(new Error(`the proxy did not answer CONNECT ${authority} within ${CONNECT_TIMEOUT_MS} ms`));
    });
    raw.once('connect', () => raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`));
    return raw;
  }

  try {
    globalThis[KEY] = new current.constructor({ connect });
  } catch (_) {
    // Left as it was.
  }
})();
