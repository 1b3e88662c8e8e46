#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks need when they are missing: the host C compilers
# (required; clang also builds the rv64gcv target), and the optional ones: the cross compilers, their C libraries
# and QEMU (user mode, Arm and RISC-V system emulators), and Chromium (renders the HTML report headless). The tests
# that need an optional one skip without it, except in CI (CI=true), where they fail; there, a missing package
# that cannot be installed (not root) fails this script too.
set -euo pipefail
# what shows that a package is installed (a command, or a file for a library) : the package
required=(
    gcc:gcc
    clang:clang
)
optional=(
    arm-none-eabi-gcc:gcc-arm-none-eabi
    /usr/lib/picolibc/arm-none-eabi/picolibc.specs:picolibc-arm-none-eabi
    /usr/lib/arm-none-eabi/newlib/libc.a:libnewlib-arm-none-eabi
    riscv64-linux-gnu-gcc:gcc-riscv64-linux-gnu
    /usr/riscv64-linux-gnu/include/stdio.h:libc6-dev-riscv64-cross
    aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu
    /usr/aarch64-linux-gnu/include/stdio.h:libc6-dev-arm64-cross
    riscv64-unknown-elf-gcc:gcc-riscv64-unknown-elf
    /usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs:picolibc-riscv64-unknown-elf
    qemu-riscv64:qemu-user
    qemu-aarch64:qemu-user
    qemu-system-arm:qemu-system-arm
    qemu-system-riscv64:qemu-system-misc
    chromium:chromium
)
missing_packages() {  # the packages of the checks given as arguments that fail
    local check what
    for check in "$@"; do
        what=${check%%:*}
        if [[ $what == /* ]]; then
            [ -e "$what" ] || echo "${check#*:}"
        else
            command -v "$what" >/dev/null 2>&1 || echo "${check#*:}"
        fi
    done
}
mapfile -t missing_required < <(missing_packages "${required[@]}")
mapfile -t missing < <(missing_packages "${required[@]}" "${optional[@]}" | sort -u)  # qemu-user answers two
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "install-tools: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
    case "${CI:-}" in 1|true|TRUE|True|yes) exit 1 ;; esac  # in CI their tests need them all
    [ ${#missing_required[@]} -eq 0 ] && exit 0  # optional tools outside CI: their tests skip
    exit 1
fi
echo "install-tools: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
