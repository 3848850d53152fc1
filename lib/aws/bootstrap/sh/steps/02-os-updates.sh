# shellcheck shell=bash
# Step: keep the OS from derailing the boot or the study. On Ubuntu, apt-daily.timer refreshes the
# package lists and apt-daily-upgrade.timer runs unattended-upgrades (both through
# /usr/lib/apt/apt.systemd.daily, gated by the APT::Periodic::* intervals in days of
# /etc/apt/apt.conf.d/20auto-upgrades, "0" turning them off; Debian Wiki, UnattendedUpgrades).
# Both timers are Persistent=true, so a run missed while the host was off starts right at boot.
# At first boot they can hold the dpkg lock for many minutes, and later they can upgrade the
# NVIDIA driver under running replicas ("Failed to initialize NVML: Driver/library version
# mismatch"). So: timers off for the host's life, periodic apt off, NVIDIA and CUDA packages held,
# then wait until apt is idle.

hold_os_updates() {
  systemctl disable --now apt-daily.timer apt-daily-upgrade.timer ||
    log "could not disable the apt timers (not installed?)"
  # An upgrade already running is left to finish (stopping it mid-way could break dpkg); no new one starts.
  printf '%s\n' '// Written by the lab bootstrap: no periodic apt runs on the lab host (timers disabled too).' \
    'APT::Periodic::Update-Package-Lists "0";' 'APT::Periodic::Unattended-Upgrade "0";' >"$APT_CONF_DIR/99lab-no-periodic"
  wait_until "$((BUDGET_LEFT))" apt_is_idle ||
    die "apt/dpkg still busy when the step's budget ran out: $(pgrep -a -f '/usr/bin/(apt|apt-get|dpkg|unattended-upgrade)( |$)' || true)"
  log "apt and dpkg are idle"
  hold_gpu_packages
}

# The installed packages whose upgrade would change the driver or CUDA under the replicas, into
# GPU_PACKAGES: the names of the lines whose status starts with "ii" that match
# HELD_PACKAGES_PATTERN (an ERE), as `awk '$1 ~ /^ii/ { print $2 }' | grep -E` chose them, chosen by
# bash itself (those were three processes more). What dpkg-query printed counts even if it failed.
gpu_packages() {
  local listing status package rest
  GPU_PACKAGES=()
  listing=$(exec dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n') || true
  while read -r status package rest; do
    if [[ "$status" == ii* && "$package" =~ $HELD_PACKAGES_PATTERN ]]; then GPU_PACKAGES+=("$package"); fi
  done <<<"$listing"
}

hold_gpu_packages() {
  local packages=()
  gpu_packages
  packages=("${GPU_PACKAGES[@]}")
  if ((${#packages[@]} == 0)); then
    log "no NVIDIA or CUDA package installed to hold"
    return 0
  fi
  apt-mark hold "${packages[@]}" >/dev/null
  log "held ${#packages[@]} NVIDIA/CUDA package(s) at their versions: ${packages[*]}"
}

# The locks are what apt-get would wait on. Process names alone mislead: unattended-upgrades'
# shutdown helper runs for the machine's whole life under the same 15-character name
# ("unattended-upgr") as the upgrade worker, so processes are matched by their full path.
apt_is_idle() {
  if command -v fuser >/dev/null; then
    if fuser "${DPKG_LOCKS[@]}" >/dev/null 2>&1; then
      return 1
    fi
    return 0
  fi
  if pgrep -f '/usr/bin/(apt|apt-get|dpkg|unattended-upgrade)( |$)' >/dev/null; then return 1; fi
  return 0
}
