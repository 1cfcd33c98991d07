#!/usr/bin/env bash
# The issuer's JWKS, fetched now, as the authorizer's JWT_JWKS_SNAPSHOT parameter: compact
# JSON in base64url (no quoting for `sam deploy --parameter-overrides`). Refuses a JWKS with
# no signing key, and one too large for a Lambda environment (4 KB for all variables).
set -euo pipefail
url="${1:?usage: jwks-snapshot.sh <JWKS URL>}"
curl -fsS --max-time 10 "$url" | python3 -c '
import base64, json, sys
jwks = json.load(sys.stdin)
keys = [k for k in jwks.get("keys", []) if k.get("kid") and k.get("kty") in ("RSA", "EC") and k.get("use", "sig") == "sig"]
if not keys:
    sys.exit("jwks-snapshot: the JWKS holds no RSA or EC signing key with a kid")
value = base64.urlsafe_b64encode(json.dumps(jwks, separators=(",", ":")).encode()).decode().rstrip("=")
if len(value) > 3000:
    sys.exit(f"jwks-snapshot: {len(value)} characters, more than the 3,000 the template allows (Lambda environments hold 4 KB)")
print(value)
'
