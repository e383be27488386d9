#!/bin/sh
# make-test-certs.sh DIR - a throwaway CA, a server certificate for 127.0.0.1/localhost and a
# client certificate (dockerd --tlsverify layout: the client side reads ca.pem, cert.pem,
# key.pem from DOCKER_CERT_PATH), plus DIR/rogue/ with a client pair from another CA, for the
# control case a verifying daemon must refuse. Keys are EC P-256; everything valid for 2 days.
set -eu
d=$1
mkdir -p "$d/rogue"
cd "$d"
q() { "$@" >/dev/null 2>&1; }
ext_srv="subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
ext_cli="extendedKeyUsage=clientAuth"
q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=vestibule-test-ca -keyout ca-key.pem -out ca.pem
q openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout server-key.pem -out server.csr
printf '%s\n' "$ext_srv" > server.ext
q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
  -extfile server.ext -out server-cert.pem
q openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=client \
  -keyout key.pem -out client.csr
printf '%s\n' "$ext_cli" > client.ext
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
  -extfile client.ext -out cert.pem
# the rogue client: same names, another CA; its ca.pem is the real one so only the client
# certificate is wrong
q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=rogue-ca -keyout rogue/ca-key.pem -out rogue/rogue-ca.pem
q openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=client \
  -keyout rogue/key.pem -out rogue/client.csr
q openssl x509 -req -in rogue/client.csr -CA rogue/rogue-ca.pem -CAkey rogue/ca-key.pem \
  -CAcreateserial -days 2 -extfile client.ext -out rogue/cert.pem
cp ca.pem rogue/ca.pem
chmod 0644 ./*.pem rogue/*.pem
