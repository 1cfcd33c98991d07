"""scripts/jwks-snapshot.sh: the deploy's copy of the issuer's signing keys, fetched from a real
local HTTP server, in base64url; only what verifies a signature is kept (an issuer's x5c
chains no longer overflow the parameter); a JWKS without signing keys is refused; with the
issuer unreachable, the live stack's snapshot is kept, and a first create fails loudly."""

import base64
import http.server
import json
import os
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


def run(url, *args, env=None):
    return subprocess.run([str(SCRIPT), url, *args], capture_output=True, text=True, env=env)


def decode(value):
    return json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


SIGNING_FIELDS = ("kid", "kty", "alg", "use", "n", "e", "crv", "x", "y")


def test_the_snapshot_is_the_issuers_signing_keys_in_base64url():
    server, url = serve(json.dumps(LAB_JWKS, indent=2).encode())
    try:
        out = run(url)
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr
    value = out.stdout.strip()
    assert set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    expected = {"keys": [{f: k[f] for f in SIGNING_FIELDS if f in k} for k in LAB_JWKS["keys"]]}
    assert decode(value) == expected


def test_certificate_chains_are_left_out_so_an_x5c_issuer_fits():
    """An Auth0- or Entra-style JWKS: two RSA keys, each with its certificate chain. Whole, it
    is over the 3,000 characters the parameter allows; its signing fields fit."""
    modulus = base64.urlsafe_b64encode(os.urandom(256)).decode().rstrip("=")
    chain = base64.b64encode(os.urandom(800)).decode()
    jwks = {"keys": [
        {"kid": f"k{i}", "kty": "RSA", "alg": "RS256", "use": "sig", "n": modulus, "e": "AQAB",
         "x5c": [chain], "x5t": "abc", "x5t#S256": "def"}
        for i in range(2)
    ]}
    assert len(base64.urlsafe_b64encode(json.dumps(jwks, separators=(",", ":")).encode())) > 3000
    server, url = serve(json.dumps(jwks).encode())
    try:
        out = run(url)
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr
    kept = decode(out.stdout.strip())
    assert [sorted(k) for k in kept["keys"]] == [sorted(["kid", "kty", "alg", "use", "n", "e"])] * 2


def fake_aws(tmp_path, answer):
    """An `aws` CLI on PATH that answers describe-stacks with `answer` (or fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text("#!/bin/sh\n" + (f"echo '{answer}'\n" if answer else "echo 'Stack does not exist' >&2; exit 254\n"))
    aws.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_an_unreachable_issuer_keeps_the_live_stacks_snapshot(tmp_path):
    """The issuer's Region down during a deploy of the survivor: the snapshot the stack holds
    is kept (never `JwtJwksSnapshot=`, which sam deploy refuses and which would wipe it)."""
    env = fake_aws(tmp_path, "eyJrZXlzIjpbXX0")
    out = run("http://127.0.0.1:9/.well-known/jwks.json", "us-west-2", "wsdr-secondary", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "eyJrZXlzIjpbXX0"
    assert "keeping wsdr-secondary's snapshot" in out.stderr


def test_an_unreachable_issuer_on_a_first_create_fails_and_prints_nothing(tmp_path):
    env = fake_aws(tmp_path, None)
    out = run("http://127.0.0.1:9/.well-known/jwks.json", "us-west-2", "wsdr-secondary", env=env)
    assert out.returncode != 0
    assert out.stdout == ""
    assert "a first create needs the issuer" in out.stderr
    out = run("http://127.0.0.1:9/.well-known/jwks.json")
    assert out.returncode != 0 and out.stdout == ""


def test_the_makefile_stops_a_deploy_without_a_snapshot():
    """Under `bash -euo pipefail`, a failing $(...) inside an argument list does not stop a
    recipe: the snapshot is computed first, and its failure exits."""
    makefile = (ROOT / "Makefile").read_text()
    assert "snapshot=$$(scripts/jwks-snapshot.sh $(JWT_JWKS_URL) $(1) $(2)) || exit 1" in makefile
    assert "JwtJwksSnapshot=$$snapshot" in makefile
    assert "JwtJwksSnapshot=$$(scripts/jwks-snapshot.sh" not in makefile


def test_a_jwks_without_signing_keys_is_refused():
    server, url = serve(b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "x"}]}')
    try:
        out = run(url)
    finally:
        server.shutdown()
    assert out.returncode != 0
    assert "no RSA or EC signing key" in out.stderr
