#!/usr/bin/env bash
# Installs what building and testing resound needs. Idempotent; safe to re-run.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
# alsa-lib's headers and pkg-config file: the ALSA driver (alsa crate) links
# alsa-lib, and the test sound card (an alsa-lib ioplug plugin, crates/lab/alsa)
# is compiled against its headers.
[ -f /usr/include/alsa/asoundlib.h ] && [ -f /usr/include/alsa/pcm_ioplug.h ] || need_apt+=(libasound2-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    need_apt+=(cargo rustc)
fi
# The test command (scripts/test.sh) also needs Debian's Chromium for the
# live monitor page test (headless), and, for the libjack tests, the
# distribution's JACK headers (C test programs are compiled against them)
# and its JACK programs (never its jackd), and rt-app (an interfering
# real-time load for the legacy-reservation experiments).
if [ "${RESOUND_SETUP_TESTS:-0}" = 1 ]; then
    command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
    [ -f /usr/include/jack/jack.h ] || need_apt+=(libjack-jackd2-dev)
    [ -x /usr/bin/jack_lsp ] && [ -x /usr/bin/jack_midi_dump ] || need_apt+=(jackd2)
    # A real media program for the legacy period detector's tests.
    command -v gst-launch-1.0 >/dev/null 2>&1 && [ -n "$(find /usr/lib -name libgstvideotestsrc.so 2>/dev/null | head -1)" ] || need_apt+=(gstreamer1.0-tools gstreamer1.0-plugins-base)

    # The legacy-reservation experiments' interfering real-time load.
    command -v rt-app >/dev/null 2>&1 || need_apt+=(rt-app)

    # cyclictest (rt-tests): the soak's probe for machine stalls.
    command -v cyclictest >/dev/null 2>&1 || need_apt+=(rt-tests)

    # useradd/groupadd and setpriv: the security tests make temporary users
    # and run programs as them.
    command -v useradd >/dev/null 2>&1 && command -v groupadd >/dev/null 2>&1 || need_apt+=(passwd)
    command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)

    # aplay/arecord: the ALSA test plugin's own tests drive it with them.
    [ -x /usr/bin/aplay ] && [ -x /usr/bin/arecord ] || need_apt+=(alsa-utils)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need ${need_apt[*]}; run as root or install them" >&2
        exit 1
    fi
    echo "setup: installing ${need_apt[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt >/dev/null 2>&1 || true
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy >/dev/null 2>&1 || true
fi
