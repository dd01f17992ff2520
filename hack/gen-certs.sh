#!/usr/bin/env bash
# Make a throwaway CA, a scheduler (server) certificate and one client certificate per node,
# for trying TLS/mTLS and for the tests. Not for production use.
#
#   hack/gen-certs.sh DIR [NODE ...]
#
# DIR/ca.pem, ca-key.pem                 the CA
# DIR/server.pem, server-key.pem         SANs: localhost, 127.0.0.1, ::1, scoria-scheduler(.scoria-system.svc)
# DIR/NODE.pem, NODE-key.pem             CN=NODE, SAN DNS:NODE (the node the certificate may report for)
set -euo pipefail
dir="${1:?usage: hack/gen-certs.sh DIR [NODE ...]}"
shift
command -v openssl >/dev/null || { echo "error: openssl is required" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
days=30
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" -subj "/CN=scoria-test-ca" \
  -keyout ca-key.pem -out ca.pem 2>/dev/null

issue() {  # issue NAME CN SANS EXTENDED_KEY_USAGE
  local name="$1" cn="$2" sans="$3" eku="$4"
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$cn" -keyout "$name-key.pem" -out "$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$sans" "$eku" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days "$days" -sha256 \
    -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

issue server scoria-scheduler \
  "DNS:localhost,IP:127.0.0.1,IP:::1,DNS:scoria-scheduler,DNS:scoria-scheduler.scoria-system.svc" serverAuth
for node in "$@"; do
  issue "$node" "$node" "DNS:$node" clientAuth
done
rm -f ca.srl
echo "certificates in $dir: ca.pem server.pem${*:+ $(printf '%s.pem ' "$@")}"
