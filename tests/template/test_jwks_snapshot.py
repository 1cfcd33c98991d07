"""scripts/jwks-snapshot.sh: the deploy's copy of the issuer's JWKS, fetched from a real local
HTTP server, is the issuer's JSON in base64url, and a JWKS without signing keys is refused."""

import base64
import http.server
import json
import pathlib
import subprocess
import threading

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "jwks-snapshot.sh"
LAB_JWKS = json.loads((ROOT / "crates/lab/keys/idp-jwks.json").read_text())


def serve(body: bytes):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"


def run(url):
    return subprocess.run([str(SCRIPT), url], capture_output=True, text=True)


def test_the_snapshot_is_the_issuers_jwks_in_base64url():
    server, url = serve(json.dumps(LAB_JWKS, indent=2).encode())
    try:
        out = run(url)
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr
    value = out.stdout.strip()
    assert set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    decoded = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    assert json.loads(decoded) == LAB_JWKS


def test_a_jwks_without_signing_keys_is_refused():
    server, url = serve(b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "x"}]}')
    try:
        out = run(url)
    finally:
        server.shutdown()
    assert out.returncode != 0
    assert "no RSA or EC signing key" in out.stderr
