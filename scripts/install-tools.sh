#!/usr/bin/env bash
# Installs the Debian packages the tests need (C compilers) when they are missing.
set -euo pipefail
packages=(gcc clang)
missing=()
for p in "${packages[@]}"; do
    command -v "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "install-tools: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
    exit 1
fi
echo "install-tools: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
