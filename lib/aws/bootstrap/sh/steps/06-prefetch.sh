# shellcheck shell=bash
# Step: the model once into the shared host cache before any replica starts (two replicas
# downloading into one cache at once is wasteful and racy), every image pulled and the router's
# wheelhouse staged meanwhile.

prefetch() {
  local image pid vllm_pull wheelhouse failed=() images=()
  local -A fetches=()
  # A CPU agent serves no model: it only stages the wheelhouse for the routers it may run.
  if [ "${NODE_ROLE:-}" = cpu ]; then
    stage_router_wheelhouse || true
    return 0
  fi
  make_dir "$MODEL_CACHE"
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
  stage_router_wheelhouse &
  wheelhouse=$!
  wait "$vllm_pull" || die "cannot pull $VLLM_IMAGE, which the model download runs in"
  download_model
  for pid in "${!fetches[@]}"; do
    wait "$pid" || failed+=("${fetches[$pid]}")
  done
  # Never fatal: without the wheelhouse each router start installs from PyPI and says so.
  wait "$wheelhouse" || true
  ((${#failed[@]} == 0)) || die "could not fetch: ${failed[*]}"
}

# Every image the lab's pods use, the benchmark Jobs' included (read, never applied).
# Only whole image references (a name with a tag, path or digest, alone on its line): the runner's
# ConfigMap carries its bundled code, whose `image: ctx.config...,` lines are not images.
manifest_images() {
  sed -n -E "s/^[[:space:]]*(- )?image:[[:space:]]*[\"']?([A-Za-z0-9][A-Za-z0-9._\/:@-]*[\/:@][A-Za-z0-9._\/:@-]*)[\"']?[[:space:]]*$/\\2/p" \
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
  make_dir "${SHAREGPT_FILE%/*}"
  if curl -fsSL --retry 5 --max-time "$((BUDGET_LEFT))" -o "$SHAREGPT_FILE.part" "$SHAREGPT_URL" &&
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

# The pinned vllm-router wheel and every dependency's wheel, downloaded once into the host cache
# (charts/routers.ts routerWheelhouse) so that a router restart installs offline (--no-index)
# instead of resolving and downloading from PyPI before every run (issue 11). pip runs INSIDE the
# router's own pinned image, so the wheels match its Python ABI and platform; --only-binary=:all:
# refuses source builds, which the slim image cannot do offline. Staged in a scratch folder and
# moved into place only when complete: a wheelhouse missing a dependency would break the offline
# install, an absent one only makes the router fall back to PyPI. Any failure is logged and
# returns 1; the caller does not fail the step on it.
# containerd v2.2 (K3s v1.36's go.mod; read at v2.2.3 and v2.2.7): `ctr image pull` stores the
# image under the reference as given (cmd/ctr/commands/images/pull.go, content.Fetch(ctx, client,
# ref, ...)) and `ctr run` looks the image up by exactly that name (run/run_unix.go NewContainer,
# client.ImageService().Get(ctx, ref)); --rm, --net-host, --env and --mount
# type=bind,src=,dst=,options= are ctr's flags (run/run.go, commands/commands.go); a reference
# with both tag and digest (`python:3.12-slim@sha256:...`) is valid (pkg/reference/reference.go,
# Spec.Object `<tag>@<digest spec>`).
stage_router_wheelhouse() {
  local scratch="$ROUTER_WHEELHOUSE.part"
  if compgen -G "$ROUTER_WHEELHOUSE/vllm_router-$ROUTER_VERSION-*.whl" >/dev/null; then
    log "router wheelhouse already at $ROUTER_WHEELHOUSE"
    return 0
  fi
  if [ -e "$scratch" ] || [ -L "$scratch" ]; then rm -rf "$scratch"; fi
  mkdir -p "$scratch"
  # A container of an interrupted earlier boot would make `ctr run` refuse the name.
  k3s ctr --namespace k8s.io containers delete lab-router-wheelhouse >/dev/null 2>&1 || true
  if ! within_budget k3s ctr --namespace k8s.io image pull "$ROUTER_IMAGE_REF" >/dev/null; then
    log "could not stage the router wheelhouse: pulling $ROUTER_IMAGE_REF failed; the routers install vllm-router from PyPI at each start"
    return 1
  fi
  log "staging vllm-router $ROUTER_VERSION and its dependencies as wheels in $ROUTER_WHEELHOUSE with $ROUTER_IMAGE_REF"
  # pip's own output goes to the log: a version without a wheel for the image's Python shows there
  # as "No matching distribution found" (--only-binary=:all:).
  if within_budget k3s ctr --namespace k8s.io run --rm --net-host \
    --mount "type=bind,src=$scratch,dst=/wheels,options=rbind:rw" \
    --mount type=bind,src=/etc/resolv.conf,dst=/etc/resolv.conf,options=rbind:ro \
    --env PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$ROUTER_IMAGE_REF" lab-router-wheelhouse \
    pip download --no-cache-dir --only-binary=:all: --dest /wheels "vllm-router==$ROUTER_VERSION" &&
    compgen -G "$scratch/vllm_router-$ROUTER_VERSION-*.whl" >/dev/null; then
    if [ -e "$ROUTER_WHEELHOUSE" ] || [ -L "$ROUTER_WHEELHOUSE" ]; then rm -rf "$ROUTER_WHEELHOUSE"; fi
    mv "$scratch" "$ROUTER_WHEELHOUSE"
    count_matches "$ROUTER_WHEELHOUSE" '*.whl'
    log "staged $MATCHES wheel(s) in $ROUTER_WHEELHOUSE"
  else
    rm -rf "$scratch"
    log "could not stage the router wheelhouse (pip download --only-binary=:all: vllm-router==$ROUTER_VERSION failed in $ROUTER_IMAGE_REF, see the lines above): the routers install vllm-router from PyPI at each start"
    return 1
  fi
}
