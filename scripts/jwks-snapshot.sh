#!/usr/bin/env bash
# jwks-snapshot.sh JWKS_URL [REGION STACK]
# The issuer's signing keys as the authorizer's JWT_JWKS_SNAPSHOT parameter: compact JSON in
# base64url (no quoting for `sam deploy --parameter-overrides`), keeping only what verifies a
# signature (kid, kty, alg, use, n, e, crv, x, y: no x5c certificate chain, which would not
# fit a Lambda environment's 4 KB). Refuses a JWKS with no signing key, and one still too large.
#
# When the issuer cannot be reached (its Region down: the outage a deploy of the survivor is
# for), and REGION and STACK are given, prints the snapshot the live STACK in REGION already
# has, saying so on stderr: the deploy keeps the keys the outage needs instead of wiping them.
# Fails (prints nothing) when neither is to be had: a first create needs the issuer.
set -euo pipefail
url="${1:?usage: jwks-snapshot.sh <JWKS URL> [REGION STACK]}"
region="${2:-}" stack="${3:-}"

encode() {
  python3 -c '
import base64, json, sys
jwks = json.load(sys.stdin)
fields = ("kid", "kty", "alg", "use", "n", "e", "crv", "x", "y")
keys = [
    {f: k[f] for f in fields if f in k}
    for k in jwks.get("keys", [])
    if k.get("kid") and k.get("kty") in ("RSA", "EC") and k.get("use", "sig") == "sig"
]
if not keys:
    sys.exit("jwks-snapshot: the JWKS holds no RSA or EC signing key with a kid")
value = base64.urlsafe_b64encode(json.dumps({"keys": keys}, separators=(",", ":")).encode()).decode().rstrip("=")
if len(value) > 3000:
    sys.exit(f"jwks-snapshot: {len(value)} characters of signing keys, more than the 3,000 the template allows (Lambda environments hold 4 KB)")
print(value)
'
}

if jwks="$(curl -fsS --max-time 10 "$url")"; then
  printf '%s' "$jwks" | encode
  exit 0
fi
if [ -n "$region" ] && [ -n "$stack" ]; then
  kept="$(aws cloudformation describe-stacks --region "$region" --stack-name "$stack" \
    --query "Stacks[0].Parameters[?ParameterKey=='JwtJwksSnapshot'].ParameterValue" --output text 2>/dev/null || true)"
  if [ -n "$kept" ] && [ "$kept" != None ]; then
    echo "jwks-snapshot: $url did not answer: keeping $stack's snapshot in $region" >&2
    printf '%s\n' "$kept"
    exit 0
  fi
fi
echo "jwks-snapshot: $url did not answer, and no live stack holds a snapshot to keep (a first create needs the issuer)" >&2
exit 1
