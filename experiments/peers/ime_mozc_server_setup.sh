#!/bin/sh
# Setup for ime_mozc_server.py: installs the Debian Mozc server and its Emacs helper (a
# stdin/stdout S-expression front end to the server) and creates the non-root user the helper
# runs as (mozc_server refuses to run as root), with a fresh ~/.config/mozc (default config,
# empty user history). Run as root; idempotent.
#
#     sh experiments/peers/ime_mozc_server_setup.sh [USER]   # USER defaults to mozcpeer
set -eu
user="${1:-mozcpeer}"
if ! dpkg -s mozc-server emacs-mozc-bin >/dev/null 2>&1; then
    apt-get install -y mozc-server emacs-mozc-bin
fi
id "$user" >/dev/null 2>&1 || useradd -m "$user"
home="$(getent passwd "$user" | cut -d: -f6)"
# a fresh profile: no learned history from earlier runs
for pid in $(pgrep -u "$user" -x mozc_server); do kill "$pid"; done
rm -rf "$home/.config/mozc" "$home/.mozc"
install -d -o "$user" -g "$user" -m 700 "$home/.config" "$home/.config/mozc"
echo "ready: runuser -u $user -- mozc_emacs_helper"
