# shellcheck shell=bash
# Steps: the GPUs the driver sees, and the NVIDIA container runtime K3s needs for its RuntimeClass.

check_gpus() {
  local listing found=0 line topology
  listing=$(exec nvidia-smi -L) || die "nvidia-smi failed: the NVIDIA driver is not working (AMI of $AMI_PARAMETER)"
  printf '%s\n' "$listing"
  # The lines that start with "GPU <digit>", counted by bash (grep -c would be a process).
  while IFS= read -r line; do
    if [[ "$line" == 'GPU '[0-9]* ]]; then found=$((found + 1)); fi
  done <<<"$listing"
  [ "$found" -eq "$EXPECTED_GPUS" ] ||
    die "nvidia-smi -L lists $found GPU(s), expected $EXPECTED_GPUS (instance.gpus for $INSTANCE_TYPE)"
  make_dir "$RESULTS_DIR/host"
  printf '%s\n' "$listing" >"$RESULTS_DIR/host/nvidia-smi-L.txt"
  # To the log and the file, as `| tee` did (one process more).
  topology=$(exec nvidia-smi topo -m)
  printf '%s\n' "$topology" >"$RESULTS_DIR/host/nvidia-smi-topo.txt"
  printf '%s\n' "$topology"
}

check_container_runtime() {
  # hash finds it on the PATH as `command -v` does, and keeps its path in BASH_CMDS: a
  # `$(command -v ...)` for the log was a subshell.
  if hash nvidia-container-runtime 2>/dev/null; then
    log "found ${BASH_CMDS[nvidia-container-runtime]}"
    return 0
  fi
  # The DLAMI ships the toolkit; another AMI gets it from NVIDIA's apt repository (the steps of
  # NVIDIA's install guide), before K3s starts and looks for the runtime.
  log "nvidia-container-runtime is missing (the AMI of $AMI_PARAMETER should have it): installing nvidia-container-toolkit"
  local keyring="$KEYRINGS_DIR/nvidia-container-toolkit-keyring.gpg" arch
  arch=$(dpkg --print-architecture)
  curl -fsSL --retry 5 --max-time 60 https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor --yes -o "$keyring"
  echo "deb [signed-by=$keyring] https://nvidia.github.io/libnvidia-container/stable/deb/$arch /" \
    >"$APT_SOURCES_DIR/nvidia-container-toolkit.list"
  within_budget apt-get -o DPkg::Lock::Timeout=60 update -q
  DEBIAN_FRONTEND=noninteractive within_budget apt-get -o DPkg::Lock::Timeout=60 install -y -q nvidia-container-toolkit
  command -v nvidia-container-runtime >/dev/null ||
    die "nvidia-container-runtime still missing after installing nvidia-container-toolkit; use the AMI of $AMI_PARAMETER"
}
