#!/usr/bin/env bash
# Installs the Debian packages the tests use, when a command is missing. Needs root (apt-get).
set -euo pipefail
declare -A need=(
  [ip]=iproute2 [bridge]=iproute2 [iptables-restore]=iptables [iptables-save]=iptables [nft]=nftables [ipset]=ipset
  [sshd]=openssh-server [ssh]=openssh-client [ssh-keygen]=openssh-client [socat]=socat [dnsmasq]=dnsmasq-base
  [openssl]=openssl [conntrack]=conntrack [dig]=dnsutils [kubectl]=kubernetes-client [zsh]=zsh [visudo]=sudo [unshare]=util-linux [nfacct]=nfacct
  [chromium]=chromium
)
missing=()
for cmd in "${!need[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$cmd" ]; then missing+=("${need[$cmd]}"); fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "test dependencies: all present"
  exit 0
fi
pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
echo "test dependencies: installing $pkgs"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
