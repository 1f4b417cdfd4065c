#!/bin/sh
# Installs the Debian 12 packages iotrace builds, runs and tests with.
set -eu
PACKAGES="build-essential cmake pkg-config python3 mpich libmpich-dev libzmq3-dev libsodium-dev
libprotobuf-c-dev protobuf-c-compiler liblz4-dev zlib1g-dev libdeflate-dev libjansson-dev libcmocka-dev
glusterfs-server glusterfs-client libglusterfs-dev libgfapi0 liburcu-dev fuse3 faketime libfaketime
libmicrohttpd-dev libcrypt-dev libjs-chart.js chromium chromium-driver python3-selenium python3-jsonschema prometheus curl openssl
clang libclang-rt-14-dev systemd groff-base dpkg-dev gcovr
systemd-container debootstrap python3-pandas python3-jsonschema lintian valgrind
iproute2 util-linux tcpdump slurm-wlm munge"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
