#!/usr/bin/env python3
"""A proxy that checks every request's SigV4 signature before an S3 server sees it.

s3rver 3.7 (the test S3 server) checks only V2 signatures and lets every V4 request through
(lib/middleware/authentication.js: "Signature version 4 calculation is unimplemented"). This proxy
stands in front of it and recomputes each signature with botocore (Debian's python3-botocore, an
implementation independent of libcurl's), the way S3 does: from the request as received, the
path and query decoded and encoded again, the headers that SignedHeaders names, the payload hash
of x-amz-content-sha256 (checked against the body itself unless UNSIGNED-PAYLOAD). A request that
does not match is answered 403 SignatureDoesNotMatch, as S3 would; every other one is forwarded.

    sigv4_proxy.py [--upstream URL] [--access-key K --secret S --region R] -- COMMAND [ARG...]

runs COMMAND with AUTOPAR_S3_ENDPOINT pointing at the proxy and AUTOPAR_S3_CHECKS_SIGV4=1, and
exits with COMMAND's status: a refused request fails the operation that sent it, so a test that
did not expect the refusal fails. CMake runs storage_s3_test's cases through it
(CROSSCOMPILING_EMULATOR, which gtest_discover_tests uses for listing and for each test). The upstream defaults to $AUTOPAR_S3_ENDPOINT; when that
is unset the command runs without the proxy (the s3 tests then skip themselves).
"""
import argparse
import hashlib
import http.client
import http.server
import os
import re
import subprocess
import sys
import threading
import urllib.parse

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH_RE = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")
HOP_BY_HOP = {"connection", "keep-alive", "expect", "transfer-encoding", "te", "upgrade"}


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.checked = 0
        self.refused = []


def canonical_target(target):
    """(url path, sorted (name, value) pairs), both decoded: botocore encodes them once more."""
    split = urllib.parse.urlsplit(target)
    query = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
    return urllib.parse.unquote(split.path), query


def expected_signature(method, target, headers, body, creds, region, service, signed, date):
    path, query = canonical_target(target)
    named = {}
    for name in signed.split(";"):
        values = headers.get_all(name) or []
        if not values:
            return None, f"signed header {name} was not sent"
        named[name] = ",".join(values)
    payload = named.get("x-amz-content-sha256")
    if payload is None:
        return None, "x-amz-content-sha256 is not signed"
    if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
        return None, "x-amz-content-sha256 is not the SHA-256 of the body"
    host = named.get("host", "")
    request = AWSRequest(method=method,
                         url="http://" + host + urllib.parse.quote(path, safe="/~"),
                         headers=named, params=query)
    request.context["timestamp"] = named.get("x-amz-date", "")
    if request.context["timestamp"][:8] != date:
        return None, "the credential scope's date is not x-amz-date's"
    auth = S3SigV4Auth(creds, service, region)
    string_to_sign = auth.string_to_sign(request, auth.canonical_request(request))
    return auth.signature(string_to_sign, request), None


def make_handler(upstream, creds, region, stats):
    up = urllib.parse.urlsplit(upstream)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet; refusals are reported at the end
            pass

        def refuse(self, why):
            with stats.lock:
                stats.refused.append(f"{self.command} {self.path}: {why}")
            body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SignatureDoesNotMatch"
                    "</Code><Message>" + why + "</Message></Error>").encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def check(self, body):
            m = AUTH_RE.match(self.headers.get("Authorization", ""))
            if not m:
                return "no SigV4 Authorization header"
            key, date, req_region, service, signed, signature = m.groups()
            if key != creds.access_key or req_region != region or service != "s3":
                return f"credential {key}/{req_region}/{service} is not {creds.access_key}/{region}/s3"
            lowered = http.client.HTTPMessage()
            for name, value in self.headers.items():
                lowered[name.lower()] = value
            want, why = expected_signature(self.command, self.path, lowered, body, creds, region,
                                           service, signed, date)
            if why:
                return why
            return None if want == signature else "the signature does not match"

        def handle_any(self):
            length = int(self.headers.get("Content-Length", "0") or 0)
            body = self.rfile.read(length) if length else b""
            why = self.check(body)
            with stats.lock:
                stats.checked += 1
            if why:
                self.refuse(why)
                return
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            length = resp.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", default=os.environ.get("AUTOPAR_S3_ENDPOINT", ""))
    parser.add_argument("--access-key", default="S3RVER")
    parser.add_argument("--secret", default="S3RVER")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a COMMAND to run is required after --")
    if not args.upstream:
        print("sigv4_proxy: AUTOPAR_S3_ENDPOINT is not set; running the command without the proxy",
              file=sys.stderr)
        return subprocess.call(command)

    stats = Stats()
    creds = Credentials(args.access_key, args.secret)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), make_handler(args.upstream, creds, args.region, stats))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, AUTOPAR_S3_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}",
               AUTOPAR_S3_CHECKS_SIGV4="1")
    rc = subprocess.call(command, env=env)
    server.shutdown()
    print(f"sigv4_proxy: {stats.checked} requests checked with botocore, "
          f"{len(stats.refused)} refused", file=sys.stderr)
    for line in stats.refused[:20]:
        print("sigv4_proxy: refused " + line, file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
