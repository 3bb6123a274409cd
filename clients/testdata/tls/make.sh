#!/usr/bin/env bash
# Makes the TLS files of the Python and Node clients' tests: a CA, a server certificate for localhost and
# 127.0.0.1, and a client certificate, each valid for 100 years. Test files only: the keys are public, in this
# repository. Run from this directory to make them again (OpenSSL 3).
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt -days $days \
    -subj "/CN=Cairn client tests CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,digitalSignature"
issue() { # name subject extensions
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days $days \
        -extfile <(printf '%s\n' "$3")
    rm "$1.csr"
}
issue server "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE"
issue client "/CN=worker" "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
rm -f ca.key ca.srl
