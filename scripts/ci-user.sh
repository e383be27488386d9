#!/usr/bin/env bash
# Create (idempotently) the unprivileged test user the suites run sandboxes as: a server
# started as root must never run code as root, and native isolation is tested the way a
# desktop user gets it. Prints the user's uid:gid.
set -euo pipefail
name=${SBX_TEST_USER:-vestibule-test}
uid=${SBX_TEST_UID:-2000}
if ! getent passwd "$name" >/dev/null; then
        groupadd -g "$uid" "$name" 2>/dev/null || true
        useradd -m -u "$uid" -g "$uid" -s /bin/bash "$name"
fi
# Subordinate ids for rootless Podman.
grep -q "^$name:" /etc/subuid 2>/dev/null || echo "$name:200000:65536" >>/etc/subuid
grep -q "^$name:" /etc/subgid 2>/dev/null || echo "$name:200000:65536" >>/etc/subgid
# A runtime dir like the one logind makes on a desktop.
rt=/run/user/$(id -u "$name")
mkdir -p "$rt" && chown "$name:$name" "$rt" && chmod 0700 "$rt"
echo "$(id -u "$name"):$(id -g "$name")"
