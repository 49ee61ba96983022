#!/usr/bin/env python3
"""`subs`: an MCP server (2025-11-25) that keeps resource subscriptions and a log level per
upstream session in memory, for the C41 tests (tests/tests/cases_client_state.rs). Standard
library only.

    subs_server.py --stdio        one session (this process), resource fx://s/1, on stdin/stdout
    subs_server.py --http PORT    Streamable HTTP at http://127.0.0.1:PORT/mcp, resource fx://h/1

Capabilities: `resources` (`subscribe: true`), `logging`, `tools`. Each session starts at log
level `info`. `resources/subscribe` of a URI it does not list is -32002.

Tool `touch {"uri"}`: sends `notifications/resources/updated {"uri"}` to every session that
subscribed to it (HTTP: on each such session's GET stream; stdio: on stdout), then a `debug`
`notifications/message` to the calling session when its level lets debug through (HTTP: on its
GET stream), and answers `notified N subscriber(s)`. Tool `info`: pid, level, subscriptions.

HTTP: `initialize` mints `Mcp-Session-Id`; an unknown session id gets 404 with a JSON-RPC error
body; GET opens the session's stream; DELETE ends the session.
"""

import json
import os
import queue
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class Session:
    def __init__(self):
        self.subs = set()
        self.level = "info"
        self.streams = []  # queues of open GET streams (HTTP)
        self.lock = threading.Lock()


class Server:
    def __init__(self, uri, send_to):
        self.uri = uri
        self.sessions = {}
        self.lock = threading.Lock()
        # send_to(session, message): delivers a message outside any answer.
        self.send_to = send_to

    def handle(self, session, msg):
        """The answer to one request of `session`, or None for a notification."""
        method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
        if rid is None:
            return None
        try:
            result = self.dispatch(session, method, params)
            return {"jsonrpc": "2.0", "id": rid, "result": result}
        except RpcError as e:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": e.code, "message": e.message}}

    def dispatch(self, session, method, params):
        if method == "initialize":
            return {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}, "logging": {},
                                     "resources": {"subscribe": True}},
                    "serverInfo": {"name": "subs", "version": "1"}}
        if method == "ping":
            return {}
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LEVELS:
                raise RpcError(-32602, f"invalid level {level!r}")
            session.level = level
            return {}
        if method == "resources/list":
            return {"resources": [{"uri": self.uri, "name": "one"}]}
        if method == "resources/read":
            self.known(params.get("uri"))
            return {"contents": [{"uri": self.uri, "text": "one"}]}
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = params.get("uri")
            self.known(uri)
            with session.lock:
                if method == "resources/subscribe":
                    session.subs.add(uri)
                else:
                    session.subs.discard(uri)
            return {}
        if method == "tools/list":
            schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
            return {"tools": [{"name": "touch", "inputSchema": schema},
                              {"name": "info", "inputSchema": {"type": "object"}}]}
        if method == "tools/call":
            return self.call(session, params.get("name"), params.get("arguments") or {})
        raise RpcError(-32601, f"method not found: {method}")

    def known(self, uri):
        if uri != self.uri:
            raise RpcError(-32002, f"Resource not found: {uri}")

    def call(self, session, name, args):
        if name == "touch":
            uri = args.get("uri")
            with self.lock:
                subscribed = [s for s in self.sessions.values() if uri in s.subs]
            for s in subscribed:
                self.send_to(s, note("notifications/resources/updated", {"uri": uri}))
            if LEVELS.index(session.level) <= LEVELS.index("debug"):
                self.send_to(session, note("notifications/message",
                                           {"level": "debug", "logger": "subs",
                                            "data": f"touched {uri}"}))
            text = f"notified {len(subscribed)} subscriber(s)"
            return {"content": [{"type": "text", "text": text}],
                    "structuredContent": {"notified": len(subscribed)}}
        if name == "info":
            info = {"pid": os.getpid(), "level": session.level, "subs": sorted(session.subs)}
            return {"content": [{"type": "text", "text": json.dumps(info)}],
                    "structuredContent": info}
        raise RpcError(-32602, f"unknown tool {name}")


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def note(method, params):
    return {"jsonrpc": "2.0", "method": method, "params": params}


def run_stdio():
    out_lock = threading.Lock()

    def write(message):
        with out_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    server = Server("fx://s/1", lambda _session, message: write(message))
    session = Session()
    server.sessions["stdio"] = session
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "method" not in msg:
            continue  # an answer to a request of ours (none are sent)
        answer = server.handle(session, msg)
        if answer is not None:
            write(answer)


def run_http(port):
    def send_to(session, message):
        with session.lock:
            streams = list(session.streams)
        for q in streams:
            q.put(message)

    server = Server("fx://h/1", send_to)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def session(self):
            sid = self.headers.get("Mcp-Session-Id")
            with server.lock:
                return sid, server.sessions.get(sid)

        def reply(self, status, body=None, headers=()):
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if self.path != "/mcp":
                return self.reply(404)
            length = int(self.headers.get("Content-Length") or 0)
            msg = json.loads(self.rfile.read(length) or b"{}")
            if msg.get("method") == "initialize":
                sid = uuid.uuid4().hex
                session = Session()
                with server.lock:
                    server.sessions[sid] = session
                return self.reply(200, server.handle(session, msg), [("Mcp-Session-Id", sid)])
            sid, session = self.session()
            if session is None:
                error = {"code": -32001, "message": "Session not found"}
                return self.reply(404, {"jsonrpc": "2.0", "id": msg.get("id"), "error": error})
            answer = server.handle(session, msg)
            if answer is None:
                return self.reply(202)
            self.reply(200, answer)

        def do_GET(self):
            sid, session = self.session()
            if session is None:
                return self.reply(404, {"jsonrpc": "2.0", "id": None,
                                        "error": {"code": -32001, "message": "Session not found"}})
            q = queue.Queue()
            with session.lock:
                session.streams.append(q)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            try:
                while True:
                    try:
                        message = q.get(timeout=5)
                        self.wfile.write(f"data: {json.dumps(message)}\n\n".encode())
                    except queue.Empty:
                        self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    with server.lock:
                        if server.sessions.get(sid) is not session:
                            return
            except OSError:
                pass
            finally:
                with session.lock:
                    if q in session.streams:
                        session.streams.remove(q)
                self.close_connection = True

        def do_DELETE(self):
            sid, _ = self.session()
            with server.lock:
                server.sessions.pop(sid, None)
            self.reply(200)

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    print(f"listening on {port}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stdio"]:
        run_stdio()
    elif sys.argv[1:2] == ["--http"] and len(sys.argv) == 3:
        run_http(int(sys.argv[2]))
    else:
        sys.exit("usage: subs_server.py --stdio | --http PORT")
