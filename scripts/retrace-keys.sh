#!/usr/bin/env bash
# retrace-keys.sh DIR [AGENT_ID ...] — make the certificates of a TLS deployment
# (docs/security.md) with the Debian `openssl` command:
#   DIR/ca.crt, ca.key                 the deployment's CA (keep ca.key offline)
#   DIR/coordinator.crt, .key          CN=coordinator (agents and the CLI check this name)
#   DIR/agent-N.crt, .key              CN=agent-N, one per agent id N: the coordinator
#                                      accepts agent N's messages only from this key
#   DIR/operator.crt, .key             CN=operator-$OPERATOR (default operator-admin):
#                                      may change state (retrace alarm add/clear)
# Keys are EC P-256, written 0600; certificates are valid for $DAYS days (default 825).
# Existing files are kept (so agents can be added later against the same CA), except
# that a certificate is re-issued when its key is new.
#   OPERATOR=NAME  DAYS=N  retrace-keys.sh DIR 1 2 3
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -ge 1 ] && exit 0 || exit 2
fi
command -v openssl > /dev/null || { echo "retrace-keys: needs the openssl command (apt-get install openssl)" >&2; exit 1; }
dir=$1
shift
days=${DAYS:-825}
operator=${OPERATOR:-admin}
for id in "$@"; do
  [[ "$id" =~ ^[1-9][0-9]{0,9}$ ]] && [ "$id" -le 4294967295 ] || {
    echo "retrace-keys: agent id '$id' is not 1..4294967295" >&2; exit 2; }
done
[[ "$operator" =~ ^[A-Za-z0-9._-]{1,48}$ ]] || {
  echo "retrace-keys: OPERATOR must be 1..48 of [A-Za-z0-9._-]" >&2; exit 2; }
umask 077
mkdir -p "$dir"
cd "$dir"

newkey() { # FILE: an EC P-256 key, unless it exists; prints 1 if made
  if [ ! -s "$1" ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2> /dev/null
    echo 1
  fi
}

if [ -n "$(newkey ca.key)" ] || [ ! -s ca.crt ]; then
  openssl req -new -x509 -key ca.key -out ca.crt -days "$days" -subj "/CN=retrace-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2> /dev/null
  echo "retrace-keys: CA $dir/ca.crt"
fi

issue() { # NAME EKU: NAME.key + NAME.crt signed by the CA, CN=NAME, SAN DNS:NAME
  local name=$1 eku=$2 ext
  if [ -n "$(newkey "$name.key")" ] || [ ! -s "$name.crt" ]; then
    ext=$(mktemp)
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=DNS:%s\n' \
      "$eku" "$name" > "$ext"
    openssl req -new -key "$name.key" -subj "/CN=$name" 2> /dev/null |
      openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
        -extfile "$ext" -out "$name.crt" 2> /dev/null
    rm -f "$ext"
    echo "retrace-keys: $dir/$name.crt"
  fi
}

# Daemons are both TLS servers and clients (the coordinator dials agents back).
issue coordinator serverAuth,clientAuth
for id in "$@"; do
  issue "agent-$id" serverAuth,clientAuth
done
issue "operator-$operator" clientAuth
# A stable name for the operator's pair, whatever OPERATOR was.
ln -sf "operator-$operator.crt" operator.crt
ln -sf "operator-$operator.key" operator.key
chmod 0644 ./*.crt ca.crt 2> /dev/null || true
