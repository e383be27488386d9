#!/usr/bin/env node
// engine-forward.mjs - a loopback-only TCP (or mutual-TLS) front for a local engine socket, so
// tests see a "remote" daemon at tcp://127.0.0.1:PORT without sending anything off the machine.
//
//   node engine-forward.mjs --socket /var/run/docker.sock [--tls CERTDIR] [--log FILE]
//
// Prints "port N" on stdout once listening on 127.0.0.1 (an ephemeral port). With --tls, CERTDIR
// holds ca.pem, server-cert.pem, server-key.pem: clients must present a certificate signed by
// ca.pem (requestCert + rejectUnauthorized), as dockerd --tlsverify does. --log appends one line
// per accepted connection ("conn") and per refused TLS client ("tls-refused ...").
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const socketPath = opt('--socket') ?? '/var/run/docker.sock';
const tlsDir = opt('--tls');
const logFile = opt('--log');
const log = (line) => {
  if (logFile) fs.appendFileSync(logFile, line + '\n');
};

function pipeTo(client) {
  log('conn');
  const upstream = net.createConnection(socketPath);
  client.pipe(upstream).pipe(client);
  const end = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', end);
  upstream.on('error', end);
  client.on('close', end);
  upstream.on('close', end);
}

let server;
if (tlsDir) {
  server = tls.createServer(
    {
      ca: fs.readFileSync(`${tlsDir}/ca.pem`),
      cert: fs.readFileSync(`${tlsDir}/server-cert.pem`),
      key: fs.readFileSync(`${tlsDir}/server-key.pem`),
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: 'TLSv1.2',
    },
    pipeTo,
  );
  server.on('tlsClientError', (e) => log(`tls-refused ${e.code ?? e.message}`));
} else {
  server = net.createServer(pipeTo);
}
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`port ${server.address().port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
