# shellcheck shell=bash
# Step: the model once into the shared host cache before any replica starts (two replicas
# downloading into one cache at once is wasteful and racy), every image pulled meanwhile.

prefetch() {
  local image pid vllm_pull failed=() images=()
  local -A fetches=()
  mkdir -p "$MODEL_CACHE"
  # The model download runs in the vLLM image: pull it first, and everything else meanwhile.
  pull_image "$VLLM_IMAGE" &
  vllm_pull=$!
  mapfile -t images < <(manifest_images)
  for image in "${images[@]}"; do
    if [ "$image" != "$VLLM_IMAGE" ]; then
      pull_image "$image" &
      fetches[$!]=$image
    fi
  done
  if [ -n "$SHAREGPT_FILE" ]; then
    download_sharegpt &
    fetches[$!]="the ShareGPT file"
  fi
  wait "$vllm_pull" || die "cannot pull $VLLM_IMAGE, which the model download runs in"
  download_model
  for pid in "${!fetches[@]}"; do
    wait "$pid" || failed+=("${fetches[$pid]}")
  done
  ((${#failed[@]} == 0)) || die "could not fetch: ${failed[*]}"
}

# Every image the lab's pods use, the benchmark Jobs' included (read, never applied).
manifest_images() {
  sed -n -E "s/^[[:space:]]*(- )?image:[[:space:]]*[\"']?([^\"'[:space:]]+).*/\\2/p" \
    "$LAB_MANIFESTS_DIR"/*.yaml "$LAB_MANIFESTS_DIR"/jobs/*.yaml </dev/null | sort -u
}

pull_image() {
  if within_budget k3s crictl pull "$1" >/dev/null; then
    log "pulled $1"
  else
    log "failed to pull $1"
    return 1
  fi
}

# Once, on the host, so that the benchmark pods never each download it.
download_sharegpt() {
  if [ -s "$SHAREGPT_FILE" ]; then
    log "ShareGPT file already at $SHAREGPT_FILE"
    return 0
  fi
  mkdir -p "$(dirname "$SHAREGPT_FILE")"
  if curl -fsSL --retry 5 --max-time "$(budget_left)" -o "$SHAREGPT_FILE.part" "$SHAREGPT_URL" &&
    mv "$SHAREGPT_FILE.part" "$SHAREGPT_FILE"; then
    log "downloaded the ShareGPT file to $SHAREGPT_FILE"
  else
    log "failed to download $SHAREGPT_URL"
    return 1
  fi
}

# The replicas see the cache as HF_HOME=$MODEL_CACHE_MOUNT; the download writes the same layout.
download_model() {
  log "downloading $MODEL_NAME into $MODEL_CACHE with $VLLM_IMAGE_REF"
  within_budget k3s ctr --namespace k8s.io run --rm --net-host \
    --mount "type=bind,src=$MODEL_CACHE,dst=$MODEL_CACHE_MOUNT,options=rbind:rw" \
    --mount type=bind,src=/etc/resolv.conf,dst=/etc/resolv.conf,options=rbind:ro \
    --env "HF_HOME=$MODEL_CACHE_MOUNT" --env HF_HUB_DISABLE_PROGRESS_BARS=1 \
    "$VLLM_IMAGE_REF" lab-model-prefetch \
    python3 -c 'import sys; from huggingface_hub import snapshot_download; print(snapshot_download(sys.argv[1]))' \
    "$MODEL_NAME" || die "downloading $MODEL_NAME into $MODEL_CACHE failed (see the lines above)"
}
