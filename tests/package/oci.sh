#!/bin/bash
# tests/package/oci.sh - the server as an OCI image (issue 25, items 1-3), end to end:
#   1. scripts/oci-image.sh --from-build BUILD_DIR: the image archive, under 40 MB;
#   2. `docker load` into this host's Docker; tests/e2e/oci.test.mjs through `docker run -i`
#      of it as the docker-group user (SBX_DG_USER, default vestibule-dg: no root, no
#      VESTIBULE_RUN_AS of the client's), the allowlist case with a network on --network host;
#   3. `setup --from-tar` run inside the image loads a sandbox image through the Engine API
#      (the tarball mounted where the -images variant ships it), under a name of this run's, and
#      a run_code call through the image uses it (grade container);
#   4. the same e2e file against the Docker Desktop stand-in (scripts/desktop-standin.sh), as the
#      test user, with --network none and E2E_OCI_LIGHT=1 (the audit and hard-kill cases ran in
#      2), the image loaded into it (the stand-in is stopped after only when this script
#      started it);
#   5. tests/package/install-client-docker.sh (claude mcp list through the image) as the
#      docker-group user.
#
#   tests/package/oci.sh BUILD_DIR E2E_DIR IMAGES_DIR [CLAUDE_BIN]
#
# E2E_DIR: tests/e2e with its node_modules, readable by both users; IMAGES_DIR: python.tar
# (images/build.sh). Root only. Prints ok/FAILED lines; exit 0 when all hold.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(readlink -f "${1:?usage: oci.sh BUILD_DIR E2E_DIR IMAGES_DIR [CLAUDE_BIN]}")
e2e=$(readlink -f "${2:?usage: oci.sh BUILD_DIR E2E_DIR IMAGES_DIR [CLAUDE_BIN]}")
images=$(readlink -f "${3:?usage: oci.sh BUILD_DIR E2E_DIR IMAGES_DIR [CLAUDE_BIN]}")
claude=${4:-}
dg=${SBX_DG_USER:-vestibule-dg}
tu=${SBX_TEST_USER:-vestibule-test}
failed=0
ok() { echo "ok      $*"; }
bad() { echo "FAILED  $*"; failed=$((failed + 1)); }
[ "$(id -u)" -eq 0 ] || { echo "oci.sh: run as root" >&2; exit 2; }
work=$(mktemp -d /var/tmp/vst-oci.XXXXXX)
chmod 0755 "$work"
run_id=oci$$
standin_started=0
image=
cleanup() {
        docker rmi "vestibule-oci-ci/python:$run_id" >/dev/null 2>&1 || true
        if [ -n "$image" ]; then
                docker rmi "$image" >/dev/null 2>&1 || true
                docker -H unix:///run/vestibule-desktop/docker.sock rmi "$image" >/dev/null 2>&1 || true
        fi
        if [ "$standin_started" = 1 ]; then
                bash "$src/scripts/desktop-standin.sh" stop >/dev/null 2>&1 || true
        fi
        rm -rf "$work"
}
trap cleanup EXIT

# 1. the image
t0=$(date +%s)
if ! bash "$src/scripts/oci-image.sh" --from-build "$build" "$work/oci.tar"; then
        bad "scripts/oci-image.sh"
        exit 1
fi
size=$(stat -c %s "$work/oci.tar")
[ "$size" -lt 40000000 ] && ok "the image archive: $size bytes (< 40 MB), built in $(($(date +%s) - t0)) s" ||
        bad "the image archive is $size bytes, over 40 MB"
image=$(docker load -i "$work/oci.tar" | sed -n 's/^Loaded image: //p')
[ -n "$image" ] && ok "docker load: $image ($(docker image inspect -f '{{.Size}}' "$image") bytes unpacked)" ||
        { bad "docker load"; exit 1; }

# the users, as scripts/e2e-docker-group.sh makes the docker-group one
id "$dg" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$dg"
id -nG "$dg" | tr ' ' '\n' | grep -qx docker || usermod -aG docker "$dg"
as() { # as USER VAR=VAL... CMD...: a client's environment, nothing else of ours
        local u=$1 home
        shift
        home=$(getent passwd "$u" | cut -d: -f6)
        (cd /tmp && runuser -u "$u" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
                USER="$u" LOGNAME="$u" SHELL=/bin/bash TERM=xterm LANG=C.UTF-8 "$@")
}

# 2. this host's Docker, as the docker-group user
t0=$(date +%s)
# (this host's Docker has no bridge network: the server's container gets the host's network
# for the allowlist case that needs one, E2E_OCI_NET_ARGS)
if as "$dg" E2E_OCI_IMAGE="$image" E2E_OCI_ENV=VESTIBULE_IMAGE_SOURCE=debian E2E_OCI_NET_ARGS="--network host" \
        timeout 600 node --test --test-reporter=spec "$e2e/oci.test.mjs"; then
        ok "e2e oci.test.mjs on this host's Docker as $dg ($(($(date +%s) - t0)) s)"
else
        bad "e2e oci.test.mjs on this host's Docker as $dg"
fi

# 3. setup inside the image loads a tarball through the Engine API; a run uses it
t0=$(date +%s)
ref=vestibule-oci-ci/python:$run_id
# (setup's exit status also says whether the server is ready to run: node's image is not
# imported here, so it is not; the import is what this checks)
out=$(docker run --rm -v /var/run/docker.sock:/var/run/docker.sock \
        -v "$images/python.tar:/usr/share/vestibule/images/tar/python.tar:ro" \
        -e VESTIBULE_IMAGE_PYTHON="$ref" "$image" setup \
        --from-tar /usr/share/vestibule/images/tar/python.tar --language python 2>&1)
# (and unpacks no native rootfs there: the native backend never runs in the image)
if grep -q "python image imported in the container engine as '$ref'" <<<"$out" &&
        grep -q "python rootfs not unpacked: this server runs in its OCI image" <<<"$out" &&
        ! grep -q "rootfs installed" <<<"$out" && docker image inspect "$ref" >/dev/null 2>&1; then
        ok "setup --from-tar inside the image imported '$ref' through the Engine API, no rootfs unpacked ($(($(date +%s) - t0)) s)"
else
        bad "setup --from-tar inside the image: $out"
fi
mkdir -m 0777 "$work/ws"
if out=$(as "$dg" VESTIBULE_IMAGE_PYTHON="$ref" timeout 180 node "$src/tests/package/mcp-call.mjs" container \
        docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock -v "$work/ws:/workspace" \
        -e VESTIBULE_IMAGE_SOURCE=debian -e VESTIBULE_IMAGE_PYTHON="$ref" "$image" 2>&1) &&
        grep -q '^isolation: container$' <<<"$out"; then
        ok "run_code through the image on the image setup imported: isolation: container"
else
        bad "run_code on the imported image: $out"
fi

# 4. the Docker Desktop stand-in, as the test user
sock=/run/vestibule-desktop/docker.sock
dk() { docker -H "unix://$sock" "$@"; }
if ! dk version >/dev/null 2>&1; then
        bash "$src/scripts/desktop-standin.sh" start >/dev/null && standin_started=1
fi
if dk version >/dev/null 2>&1 && dk load -i "$work/oci.tar" >/dev/null; then
        t0=$(date +%s)
        if as "$tu" DOCKER_HOST="unix://$sock" E2E_OCI_SOCKET="$sock" E2E_OCI_DOCKER_ARGS="--network none" E2E_OCI_LIGHT=1 \
                E2E_OCI_IMAGE="$image" E2E_OCI_ENV=VESTIBULE_IMAGE_SOURCE=debian \
                timeout 600 node --test --test-reporter=spec "$e2e/oci.test.mjs"; then
                ok "e2e oci.test.mjs on the Docker Desktop stand-in as $tu ($(($(date +%s) - t0)) s)"
        else
                bad "e2e oci.test.mjs on the Docker Desktop stand-in as $tu"
        fi
else
        bad "the Docker Desktop stand-in did not start or did not load the image"
fi

# 5. install-client --docker / --wsl, as the docker-group user
cp "$build/vestibule-mcp" "$work/vestibule-mcp"
chmod 0755 "$work/vestibule-mcp"
if as "$dg" bash "$src/tests/package/install-client-docker.sh" "$work/vestibule-mcp" "$image" ${claude:+"$claude"}; then
        ok "install-client --docker/--wsl (tests/package/install-client-docker.sh)"
else
        bad "install-client --docker/--wsl (tests/package/install-client-docker.sh)"
fi
echo "oci: $failed failed"
[ "$failed" = 0 ]
